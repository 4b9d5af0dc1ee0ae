import { Type } from '@sinclair/typebox'
import { ConsumeResponseSchema } from '../../../runs/schemas.js'
import { defineRoute } from '../../route.js'
import { IdempotencyKey, strictObject } from '../../../kernel/schema.js'

export const consumeRun = defineRoute({
  method: 'POST',
  path: '/v1/runs/consume/:runId',
  operationId: 'runs.consume',
  summary: 'Apply a synchronous metered event to a running run',
  description:
    "Prices the event with the customer's entitlement to the feature (quantity from the feature's meter, cost at the plan feature's price, " +
    "the marginal cost for tiered and package prices, rounded up to whole minor units) and consumes it from the run's remaining. reason: accepted | " +
    'duplicate (the idempotencyKey was accepted before: the same answer, nothing consumed again) | expired | not_running | entitlement_denied | ' +
    'insufficient_budget (nothing consumed). An accepted event is recorded in the usage history like a raw event.',
  tags: ['runs'],
  access: { kind: 'project', scope: 'runs:write' },
  body: strictObject({
    featureSlug: Type.String({ minLength: 1, maxLength: 64 }),
    idempotencyKey: IdempotencyKey,
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'The event id in the usage history; default `<runId>:<idempotencyKey>`.' })),
    eventSlug: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    timestamp: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    properties: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
  response: ConsumeResponseSchema,
  errors: [409],
  handler: ({ body, params, projectId, services }) => services.runs.consume(projectId, params.runId!, body),
})
