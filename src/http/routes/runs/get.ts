import { RunSchema } from '../../../runs/schemas.js'
import { defineRoute } from '../../route.js'

export const getRun = defineRoute({
  method: 'GET',
  path: '/v1/runs/get/:runId',
  operationId: 'runs.get',
  summary: 'A run',
  description: 'A run past its deadline is expired on the way.',
  tags: ['runs'],
  access: { kind: 'project', scope: 'runs:read' },
  response: RunSchema,
  handler: ({ params, projectId, services }) => services.runs.get(projectId, params.runId!),
})
