import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { WebhookId } from '../../../notifications/schemas.js'

export const deleteWebhook = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/delete',
  operationId: 'webhooks.delete',
  summary: 'Delete a webhook endpoint',
  description: 'Deliveries still queued for it are dropped at their next attempt. Deleting an endpoint that does not exist answers `deleted: false`.',
  tags: ['webhooks'],
  access: { kind: 'project', scope: 'webhooks:write' },
  body: strictObject({ id: WebhookId }),
  response: Type.Object({ id: Type.String(), deleted: Type.Boolean() }),
  handler: ({ body, projectId, services }) => services.webhooks.delete(projectId, body.id),
})
