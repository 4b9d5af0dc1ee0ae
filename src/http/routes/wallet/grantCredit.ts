import { Type } from '@sinclair/typebox'
import { parseAmount } from '../../../kernel/money.js'
import { CreditSourceSchema, WalletCurrencySchema } from '../../../wallet/types.js'
import { defineRoute } from '../../route.js'
import { Amount, EpochMs, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { CustomerId, GrantResponseSchema } from '../../../wallet/schemas.js'

export const grantCredit = defineRoute({
  method: 'POST',
  path: '/v1/wallet/credits/grant',
  operationId: 'wallet.credits.grant',
  summary: 'Grant a credit to a customer (our addition)',
  description:
    'A credit is consumed before cash, higher priority first, then the one expiring first. It expires at expiresAt (what is left of it is journaled as expired). ' +
    'Once per idempotencyKey per customer: the same request replays, another is 409. A wallet holds one currency: another is 409 currency_mismatch.',
  tags: ['wallet'],
  access: { kind: 'project', scope: 'wallet:write' },
  body: strictObject({
    customerId: CustomerId,
    amount: Amount,
    currency: Type.Optional(WalletCurrencySchema),
    source: CreditSourceSchema,
    expiresAt: Type.Optional(EpochMs),
    priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: 'Higher is consumed first; default 50.' })),
    idempotencyKey: IdempotencyKey,
  }),
  response: GrantResponseSchema,
  errors: [409],
  handler: ({ body, projectId, services }) => services.wallet.grant(projectId, { ...body, amount: parseAmount(body.amount)! }),
})
