import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { EventType, WebhookViewSchema } from '../../../notifications/schemas.js'

export const listWebhooks = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/list',
  operationId: 'webhooks.list',
  summary: "The project's webhook endpoints (without their secrets)",
  tags: ['webhooks'],
  access: { kind: 'project', scope: 'webhooks:write' },
  body: strictObject({ event: Type.Optional(EventType) }, { description: '`event`: only the endpoints subscribed to it.' }),
  response: Type.Object({ webhooks: Type.Array(WebhookViewSchema) }),
  handler: ({ body, projectId, services }) => services.webhooks.list(projectId, body.event),
})
