import { EntitlementsGetResponseSchema, EntitlementsListRequest } from '../../../catalog/schemas.js'
import { checkProject } from '../../../catalog/service.js'
import { defineRoute } from '../../route.js'

export const getEntitlements = defineRoute({
  method: 'POST',
  path: '/v1/entitlements/get',
  operationId: 'entitlements.get',
  summary: "A customer's active entitlements, reduced",
  description:
    'The entitlements of /v1/access/entitlements/list without type, featureType, usageMode, tierMode, billingInterval, planType, ' +
    'resetInterval, aggregationMethod and windowSize, grants without type, and an empty subscriptionPhase. metadata.usage is the same, ' +
    'with asOf (when the counters were read) and usageAsOf (when the gateway accepted the newest event counted; null when none this period).',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  body: EntitlementsListRequest,
  response: EntitlementsGetResponseSchema,
  handler: ({ body, projectId, services }) => checkProject(body.projectId, projectId) ?? services.entitlements.getEntitlements(projectId, body.customerId),
})
