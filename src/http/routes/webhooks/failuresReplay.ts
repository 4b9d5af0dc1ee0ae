import { Type } from '@sinclair/typebox'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'

export const replayWebhookFailures = defineRoute({
  method: 'POST',
  path: '/v1/webhooks/failures/replay',
  operationId: 'webhooks.failures.replay',
  summary: 'Deliver failed webhook deliveries again',
  description:
    'Queues each named delivery of the failed list again under the same delivery id (receivers dedup by x-metering-delivery), with ' +
    'the full attempts (METERING_WEBHOOK_ATTEMPTS), to the endpoint as it is now, and takes it off the failed list; if every attempt ' +
    'fails again it is listed again. A delivery still queued is not queued twice. Ids not in the failed list are answered in notFound.',
  tags: ['webhooks'],
  access: { kind: 'project', scope: 'webhooks:write' },
  body: strictObject({
    deliveryIds: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
      minItems: 1,
      maxItems: 100,
      description: 'Delivery ids from POST /v1/webhooks/failures/list.',
    }),
  }),
  response: Type.Object({
    requeued: Type.Array(Type.String(), { description: 'The deliveries queued again (or still queued).' }),
    notFound: Type.Array(Type.String(), { description: 'Ids that are not in the failed list (already replayed, or never failed).' }),
  }),
  handler: ({ body, projectId, services }) => services.webhooks.replayFailures(projectId, body.deliveryIds),
})
