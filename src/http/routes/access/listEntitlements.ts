import { EntitlementsListRequest, EntitlementsListResponseSchema } from '../../../catalog/schemas.js'
import { checkProject } from '../../../catalog/service.js'
import { entitlementAnswer } from '../../../catalog/views.js'
import { success } from '../../../kernel/errors.js'
import { defineRoute } from '../../route.js'

export const listEntitlements = defineRoute({
  method: 'POST',
  path: '/v1/access/entitlements/list',
  operationId: 'access.entitlements.list',
  summary: "List a customer's active entitlements with their grants",
  description:
    'Entitlements in effect now, each with the grants in effect now (highest priority first); metadata carries the access flags ' +
    "(customerDisabled, customerUsageLimitReached, subscriptionStatus) and `usage`: the current reset period's usage counted against the " +
    'grants in effect (EntitlementUsage: usage, limit, remaining, overage, refused as decimal strings, periodStartAt, periodEndAt, denied, asOf, usageAsOf); ' +
    'asOf (epoch ms) is when the counters were read; usageAsOf (epoch ms, or null when nothing was counted this period) is when the gateway ' +
    'accepted the newest event counted: raw events are counted by the ingest worker, so events accepted after usageAsOf may not be counted yet ' +
    "(a run's consume counts at once). Each grant's metadata carries `usage` {consumed, remaining}. " +
    'A disabled customer is 403 customer_disabled.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  body: EntitlementsListRequest,
  response: EntitlementsListResponseSchema,
  handler: async ({ body, projectId, services }) => {
    const refused = checkProject(body.projectId, projectId)
    if (refused) return refused
    // The service answers the stored shapes the domains compute with; the answer has no sentinels (README.md, "Shapes").
    const listed = await services.entitlements.listEntitlements(projectId, body.customerId)
    return listed.ok ? success(listed.value.map(entitlementAnswer)) : listed
  },
})
