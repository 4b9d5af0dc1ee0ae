import { defineRoute } from '../../route.js'
import { CreatePaymentMethodBody, CreatePaymentMethodResponse } from '../../../payments/schemas.js'

export const createPaymentMethod = defineRoute({
  method: 'POST',
  path: '/v1/payment-methods/create',
  operationId: 'paymentMethods.create',
  summary: 'Start adding a payment method for a customer',
  description:
    'Answers the URL of a setup page where the customer adds a payment method; the page then sends them to successUrl (or cancelUrl). `sandbox` serves the page from the gateway; `stripe` and `square` answer 412 until configured.',
  tags: ['payments'],
  access: { kind: 'project', scope: 'payments:write' },
  body: CreatePaymentMethodBody,
  response: CreatePaymentMethodResponse,
  errors: [412],
  handler: ({ body, projectId, services }) => services.payments.createSetup(projectId, body),
})
