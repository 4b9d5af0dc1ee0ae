import { Type } from '@sinclair/typebox'
import { ConsumeResponseSchema as ConsumeResponseFields, RunSchema as RunFields } from './types.js'

export const CustomerId = Type.String({ minLength: 1, maxLength: 36, pattern: '^[^\\s|]+$', description: "The customer's id (the catalog's, 1 to 36 characters)." })
export const RunId = Type.String({ minLength: 1, maxLength: 64, description: 'A run id (`run_<n>`).' })

/** A run as the routes answer it: src/runs/types.ts RunSchema, named `Run` in OpenAPI. */
export const RunSchema = Type.Object(RunFields.properties, { $id: 'Run', description: 'A run: a budget reserved for a workload, consumed by its metered events.' })

/** The answer of POST /v1/runs/consume/{runId}: src/runs/types.ts ConsumeResponseSchema with its run named. */
export const ConsumeResponseSchema = Type.Object({ ...ConsumeResponseFields.properties, run: RunSchema }, {
  $id: 'RunConsumption',
  description: 'What an event did to a run: accepted or why not, its cost, and the run after it.',
})
