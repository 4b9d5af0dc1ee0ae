import { UsageGetRequest, UsageGetResponseSchema } from '../../../analytics/schemas.js'
import { defineRoute } from '../../route.js'

export const getUsage = defineRoute({
  method: 'POST',
  path: '/v1/analytics/usage/get',
  operationId: 'analytics.usage.get',
  summary: "A customer's usage and spending per feature over a range",
  description:
    'Usage per feature over the last 24h, 7d, 30d or 90d (each day 24 h, ending now), summed from the ClickHouse history; ' +
    "events count by their timestamp. Spending is 0 USD until usage is priced from the plan. A project_id other than the key's is 403.",
  tags: ['analytics'],
  access: { kind: 'project', scope: 'analytics:read' },
  body: UsageGetRequest,
  response: UsageGetResponseSchema,
  handler: ({ body, projectId, services }) => services.analytics.usage(projectId, body),
})
