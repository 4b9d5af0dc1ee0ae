import { Type } from '@sinclair/typebox'
import { parseAmount } from '../../../kernel/money.js'
import { WalletCurrencySchema } from '../../../wallet/types.js'
import { defineRoute } from '../../route.js'
import { Amount, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { CustomerId, MoneyInResponseSchema } from '../../../wallet/schemas.js'

export const topUpWallet = defineRoute({
  method: 'POST',
  path: '/v1/wallet/top-up',
  operationId: 'wallet.topUp',
  summary: "Deposit cash into a customer's wallet (our addition)",
  description:
    'Cash is consumed after credits. Once per idempotencyKey per customer: the same request replays, another is 409. ' +
    'A wallet holds one currency (the first money in sets it, USD by default): another is 409 currency_mismatch.',
  tags: ['wallet'],
  access: { kind: 'project', scope: 'wallet:write' },
  body: strictObject({ customerId: CustomerId, amount: Amount, currency: Type.Optional(WalletCurrencySchema), idempotencyKey: IdempotencyKey }),
  response: MoneyInResponseSchema,
  errors: [409],
  handler: ({ body, projectId, services }) => services.wallet.topUp(projectId, { ...body, amount: parseAmount(body.amount)! }),
})
