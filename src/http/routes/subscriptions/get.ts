import { Type } from '@sinclair/typebox'
import { SubscriptionGetRequest, SubscriptionSchema } from '../../../catalog/schemas.js'
import { checkProject } from '../../../catalog/service.js'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'

export const getSubscription = defineRoute({
  method: 'POST',
  path: '/v1/subscriptions/get',
  operationId: 'subscriptions.get',
  summary: "A customer's subscription with its active phase",
  description:
    'The subscription with a phase in effect now, its current billing cycle, and the phase with its plan version and items; ' +
    '404 subscription_not_found when none is in effect.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  // The spec leaves customerId's required-ness open; a subscription is found by its customer, so it is required here.
  body: strictObject({
    customerId: Type.String({ minLength: 1, maxLength: 36, description: 'The customer whose subscription is returned.' }),
    projectId: SubscriptionGetRequest.properties.projectId,
  }),
  response: SubscriptionSchema,
  handler: ({ body, projectId, services }) => checkProject(body.projectId, projectId) ?? services.catalog.getSubscription(projectId, body.customerId),
})
