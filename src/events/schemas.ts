import { Type, type Static } from '@sinclair/typebox'
import { EventSlug } from '../catalog/document.js'
import { IdempotencyKey, strictObject } from '../kernel/schema.js'

/** One raw usage event: the body of POST /v1/usage/record and an element of record-batch's `events`. */
export const UsageEventInput = strictObject(
  {
    idempotencyKey: Type.Optional(IdempotencyKey),
    eventSlug: EventSlug,
    properties: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description:
          'Arbitrary event properties, at most 16 KiB as JSON unless configured; `value` (a number or decimal string) is what the event counts for, 1 when absent.',
      }),
    ),
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        description: 'The event id; if omitted, one is derived from idempotencyKey or generated. Retries reuse it.',
      }),
    ),
    customerId: Type.String({ minLength: 1, maxLength: 128, description: 'The customer id.' }),
    timestamp: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: Number.MAX_SAFE_INTEGER,
        description: 'Epoch ms; if omitted, the time of the request. At most 5 minutes ahead, at most 35 days old unless configured.',
      }),
    ),
  },
  { $id: 'UsageEvent', description: 'A raw usage event.' },
)
export type UsageEventInput = Static<typeof UsageEventInput>

export const AcceptedSchema = Type.Object({
  accepted: Type.Literal(true, { description: 'Always true: the event is durable (or was already, for a duplicate).' }),
})

export const BatchResultSchema = Type.Union([
  Type.Object({ index: Type.Integer(), accepted: Type.Literal(true) }),
  Type.Object({
    index: Type.Integer(),
    accepted: Type.Literal(false),
    error: Type.Object({
      code: Type.String({ description: 'BAD_REQUEST or FORBIDDEN, as the single-event endpoint would answer.' }),
      reason: Type.String({ description: 'invalid_request or customer_disabled.' }),
      message: Type.String(),
      issues: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
    }),
  }),
])
export type BatchResult = Static<typeof BatchResultSchema>
