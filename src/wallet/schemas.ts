import { Type } from '@sinclair/typebox'
import { CustomerId } from '../runs/schemas.js'
import { WalletBalanceSchema } from './types.js'

export { CustomerId }

/** Answers of the wallet's money-in routes: the balance after it, and whether it was a replay. */
export const MoneyInResponseSchema = Type.Composite([
  WalletBalanceSchema,
  Type.Object({ replayed: Type.Boolean({ description: 'true when the idempotencyKey was applied before: nothing moved again.' }) }),
])
