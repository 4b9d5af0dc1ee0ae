import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { BatchResultSchema } from '../../../events/schemas.js'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { handlerChecksDepth } from '../../../kernel/validation.js'

export const recordEventBatch = defineRoute({
  method: 'POST',
  path: '/v1/usage/record-batch',
  operationId: 'usage.recordBatch',
  summary: 'Ingest up to 1,000 raw events',
  description:
    'Each event is what POST /v1/usage/record takes and is validated on its own: the valid ones are accepted (durable in Redis) even when others are not. ' +
    'One result per event, in order; a refused event names its problems with JSON paths into this body ($.events[i]...).',
  tags: ['usage'],
  access: { kind: 'project', scope: 'budgets:write' },
  // Each event's depth is checked on its own (EventService.recordBatch), as the body of a record would
  // be: one event nested too deep is refused in its own result, not with the whole batch.
  body: handlerChecksDepth(
    strictObject({
      events: Type.Array(Type.Unknown({ description: 'A body of POST /v1/usage/record.' }), { minItems: 1, maxItems: 1000 }),
    }),
  ),
  response: Type.Object({ results: Type.Array(BatchResultSchema) }),
  handler: async ({ body, projectId, services }) => success(await services.events.recordBatch(projectId, body.events)),
})
