import { Type } from '@sinclair/typebox'
import { CustomerId } from '../runs/schemas.js'
import { AmountSchema, CreditSchema, WalletBalanceSchema as WalletBalanceFields } from './types.js'

export { CustomerId }

/**
 * The wallet's answers as the routes give them: the schemas of src/wallet/types.ts, named in
 * OpenAPI (Money, WalletCredit, WalletBalance).
 */

/** Spec 2.6 Amount. */
export const MoneySchema = Type.Object(AmountSchema.properties, {
  $id: 'Money',
  description: 'An amount of money: exact at ledger scale 8, as a decimal, and for people (spec 2.6 Amount).',
})

export const WalletCreditSchema = Type.Object({ ...CreditSchema.properties, issued: MoneySchema, available: MoneySchema }, {
  $id: 'WalletCredit',
  description: 'A live credit of a wallet.',
})

export const WalletBalanceSchema = Type.Object({
  ...WalletBalanceFields.properties,
  available: MoneySchema,
  held: MoneySchema,
  credits: Type.Array(WalletCreditSchema, { description: 'The live credits in the order they are consumed (priority, then earliest expiry).' }),
}, { $id: 'WalletBalance', description: "A customer's wallet: what is available, what running runs hold, and the live credits." })

const Replayed = Type.Boolean({ description: 'true when the idempotencyKey was applied before: nothing moved again.' })

/** Answers of the wallet's money-in routes: the balance after it, and whether it was a replay. */
export const MoneyInResponseSchema = Type.Intersect([WalletBalanceSchema, Type.Object({ replayed: Replayed })])

/** The answer of POST /v1/wallet/credits/grant: a money-in answer with the credit's id. */
export const GrantResponseSchema = Type.Intersect([WalletBalanceSchema, Type.Object({ creditId: Type.String(), replayed: Replayed })])
