import { Type } from '@sinclair/typebox'
import { END_STATUSES } from '../../../runs/types.js'
import { RunSchema } from '../../../runs/schemas.js'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'

export const endRun = defineRoute({
  method: 'POST',
  path: '/v1/runs/end/:runId',
  operationId: 'runs.end',
  summary: 'End a run and give back what it did not consume',
  description:
    "Running children end first (canceled, or expired past their deadline). A child's unconsumed reservation goes back to its parent; a root " +
    "run's consumption is captured from the wallet (credits first) and the rest released. Ending again with the same status replays; a run that " +
    'ended otherwise (or expired) is 409 run_not_running.',
  tags: ['runs'],
  access: { kind: 'project', scope: 'runs:write' },
  body: strictObject({ status: Type.Union(END_STATUSES.map((s) => Type.Literal(s))) }),
  response: RunSchema,
  errors: [409],
  handler: ({ body, params, projectId, services }) => services.runs.end(projectId, params.runId!, body.status),
})
