import { UsageForecastRequest, UsageForecastResponseSchema } from '../../../analytics/schemas.js'
import { defineRoute } from '../../route.js'

export const forecastUsage = defineRoute({
  method: 'POST',
  path: '/v1/analytics/usage/forecast',
  operationId: 'analytics.usage.forecast',
  summary: "A forecast of a customer's usage of a feature",
  description:
    'Projects the daily usage of the 14 UTC days before today (least squares over the day index) over horizon_days, ' +
    'with the evidence used and warnings about sparse, stale, decreasing or missing data. When the customer has an entitlement limit ' +
    'for the feature, `limit` and `exhaustsAt` say when it runs out at the projected rate.',
  tags: ['analytics'],
  access: { kind: 'project', scope: 'analytics:read' },
  body: UsageForecastRequest,
  response: UsageForecastResponseSchema,
  handler: ({ body, projectId, services }) => services.analytics.forecast(projectId, body),
})
