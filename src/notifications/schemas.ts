import { Type } from '@sinclair/typebox'
import { NOTIFICATION_TYPES } from './queue.js'

export const WebhookId = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$',
  description: "The endpoint's id: the caller's name, or `wh_…` generated on create.",
})
export const EventType = Type.Union(
  NOTIFICATION_TYPES.map((t) => Type.Literal(t)),
  { $id: 'WebhookEventType', description: 'A notification type a webhook endpoint may subscribe to.' },
)

export const WebhookViewSchema = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(EventType),
    enabled: Type.Boolean(),
    createdAt: Type.Integer(),
    updatedAt: Type.Integer(),
  },
  { $id: 'Webhook', description: 'A webhook endpoint of the project (without its secret).' },
)
