import { Type } from '@sinclair/typebox'
import { PROVIDER_CODES } from './providers.js'
import { strictObject } from '../kernel/schema.js'

export const ProviderCode = Type.Union(
  PROVIDER_CODES.map((code) => Type.Literal(code)),
  {
    description: "`sandbox` (the gateway's own test provider), `stripe` or `square` (412 until configured).",
  },
)
const CustomerId = Type.String({ minLength: 1, maxLength: 256, description: "A customer of the project's catalog." })
const RedirectUrl = (description: string) => Type.String({ minLength: 1, maxLength: 2048, description: `${description} An absolute http or https URL.` })

export const CreatePaymentMethodBody = strictObject({
  paymentProvider: ProviderCode,
  customerId: CustomerId,
  successUrl: RedirectUrl('Where the setup page sends the customer once a payment method is added.'),
  cancelUrl: RedirectUrl('Where the setup page sends the customer if they cancel.'),
})

export const CreatePaymentMethodResponse = Type.Object({
  success: Type.Boolean(),
  url: Type.String({ description: 'The setup page to send the customer to (single use, expires).' }),
})

export const ListPaymentMethodsBody = strictObject({
  customerId: CustomerId,
  provider: Type.Optional(ProviderCode),
  skipCache: Type.Optional(Type.Boolean({ description: 'Accepted; the sandbox keeps no cache.' })),
})

export const PaymentMethodSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String({ description: 'Name on the card.' }),
    last4: Type.String({ description: 'Last four digits of the card number (the number itself is never stored).' }),
    expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
    expYear: Type.Integer(),
    brand: Type.String({ description: '`visa`, `mastercard`, `amex`, `discover`, `diners`, `jcb`, `unionpay`, …' }),
  },
  { $id: 'PaymentMethod', description: "A customer's payment method (a card) at a payment provider." },
)

export const ListPaymentMethodsResponse = Type.Array(PaymentMethodSchema)
