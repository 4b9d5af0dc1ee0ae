import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { EventType, WebhookId, WebhookViewSchema } from '../../../notifications/schemas.js'

export const upsertWebhook = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/upsert',
  operationId: 'webhooks.upsert',
  summary: 'Create or update a webhook endpoint of the project',
  description:
    "Notifications of the listed types are POSTed to `url` as JSON, signed with the endpoint's secret " +
    '(`x-metering-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`), with `x-metering-event` and a ' +
    '`x-metering-delivery` id that stays the same across retries. Without `id` a new endpoint is created. A new endpoint ' +
    'without `secret` gets a generated one, answered this once; an update without `secret` keeps the stored one.',
  tags: ['webhooks'],
  access: { kind: 'project', scope: 'webhooks:write' },
  body: strictObject({
    url: Type.String({ minLength: 8, maxLength: 2048, pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', description: 'An http or https URL.' }),
    id: Type.Optional(WebhookId),
    secret: Type.Optional(Type.String({ minLength: 16, maxLength: 256, pattern: '^[\\x21-\\x7e]+$', description: 'At least 16 printable ASCII characters.' })),
    events: Type.Array(EventType, { minItems: 1, uniqueItems: true }),
    enabled: Type.Optional(Type.Boolean({ description: 'Default true (on create; an update without it keeps the stored value).' })),
  }),
  response: Type.Intersect([
    WebhookViewSchema,
    Type.Object({
      created: Type.Boolean(),
      secret: Type.Optional(Type.String({ description: 'The generated secret, only when this call generated it.' })),
    }),
  ]),
  errors: [409],
  handler: ({ body, projectId, services }) => services.webhooks.upsert(projectId, body),
})
