import { AccessUpdateRequest, AccessUpdateResponseSchema } from '../../../catalog/schemas.js'
import { defineRoute } from '../../route.js'

export const updateAccess = defineRoute({
  method: 'POST',
  path: '/v1/access/update',
  operationId: 'access.update',
  summary: "Update a customer's access flags",
  description:
    'customerDisabled refuses the customer on the entitlement paths (403 customer_disabled); customerUsageLimitReached shows in ' +
    "entitlement metadata; subscriptionStatus overrides the status of the customer's current subscription until an apply changes that subscription. " +
    'Answers {}; 404 customer_not_found for a customer the catalog does not have.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:write' },
  body: AccessUpdateRequest,
  response: AccessUpdateResponseSchema,
  handler: ({ body, projectId, services }) => services.catalog.updateAccess(projectId, body),
})
