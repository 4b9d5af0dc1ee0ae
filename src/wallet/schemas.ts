import { Type } from '@sinclair/typebox'
import { CustomerId } from '../catalog/schemas.js'
import { AmountSchema, CreditSchema, WalletBalanceSchema } from './types.js'

export { CustomerId }

/** The wallet's answers as the routes give them (named Money, WalletCredit and WalletBalance in OpenAPI). */
export { AmountSchema as MoneySchema, CreditSchema as WalletCreditSchema, WalletBalanceSchema }

const Replayed = Type.Boolean({ description: 'true when the idempotencyKey was applied before: nothing moved again.' })

/** Answers of the wallet's money-in routes: the balance after it, and whether it was a replay. */
export const MoneyInResponseSchema = Type.Intersect([WalletBalanceSchema, Type.Object({ replayed: Replayed })])

/** The answer of POST /v1/wallet/credits/grant: a money-in answer with the credit's id. */
export const GrantResponseSchema = Type.Intersect([WalletBalanceSchema, Type.Object({ creditId: Type.String(), replayed: Replayed })])
