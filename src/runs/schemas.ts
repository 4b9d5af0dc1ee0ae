import { Type } from '@sinclair/typebox'
import { CustomerId } from '../catalog/schemas.js'

export { CustomerId }

export const RunId = Type.String({ minLength: 1, maxLength: 64, description: 'A run id (`run_<n>`).' })

/** The run answers the routes give (named `Run` and `RunConsumption` in OpenAPI). */
export { ConsumeResponseSchema, RunSchema } from './types.js'
