import { AcceptedSchema, UsageEventInput } from '../../../events/schemas.js'
import { defineRoute } from '../../route.js'

export const recordEvent = defineRoute({
  method: 'POST',
  path: '/v1/usage/record',
  operationId: 'usage.record',
  summary: 'Ingest a raw event',
  description:
    'Answers {accepted: true} once the event is durable in Redis, queued for ClickHouse; a repeat of (idempotencyKey ?? id) within the dedup window ' +
    '(24 h) is answered the same and not queued again. 400 for a bad event (nothing stored); 403 customer_disabled for a customer disabled by POST /v1/access/update.',
  tags: ['usage'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: UsageEventInput,
  response: AcceptedSchema,
  handler: ({ body, projectId, services }) => services.events.record(projectId, body),
})
