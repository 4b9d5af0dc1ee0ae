import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { EventType } from '../../../notifications/schemas.js'

export const listWebhookFailures = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/failures/list',
  operationId: 'webhooks.failures.list',
  summary: 'Webhook deliveries that failed every attempt, newest first',
  description:
    'Each entry has the delivery id, the endpoint, the attempts made, the last status or error, and the notification. ' +
    'The newest 1,000 per project are kept (METERING_WEBHOOK_FAILED_KEPT).',
  tags: ['webhooks'],
  access: { kind: 'project', scope: 'webhooks:write' },
  body: strictObject({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 100.' })) }),
  response: Type.Object({
    failures: Type.Array(
      Type.Object({
        deliveryId: Type.String(),
        endpointId: Type.String(),
        url: Type.String(),
        notificationId: Type.String(),
        type: EventType,
        attempts: Type.Integer(),
        lastStatus: Type.Union([Type.Integer(), Type.Null()]),
        lastError: Type.String(),
        failedAt: Type.Integer(),
        notification: Type.Object({ type: EventType, projectId: Type.String() }, { additionalProperties: true }),
      }),
    ),
  }),
  handler: ({ body, projectId, services }) => services.webhooks.failures(projectId, body.limit ?? 100),
})
