import { defineRoute } from '../../route.js'
import { ListPaymentMethodsBody, ListPaymentMethodsResponse } from '../../../payments/schemas.js'

export const listPaymentMethods = defineRoute({
  method: 'POST',
  path: '/v1/payment-methods/list',
  operationId: 'paymentMethods.list',
  summary: "List a customer's payment methods",
  description: 'The payment methods of one provider (default `sandbox`) for a customer, oldest first.',
  tags: ['payments'],
  access: { kind: 'project', scope: 'payments:read' },
  body: ListPaymentMethodsBody,
  response: ListPaymentMethodsResponse,
  errors: [412],
  handler: ({ body, projectId, services }) => services.payments.list(projectId, body),
})
