import { Type } from '@sinclair/typebox'
import { Amount, BalanceSchema, BudgetKey, CrossedSchema, EnforceSchema, EpochMs, HoldId, SignedAmount, WindowSchema, strictObject } from '../kernel/schema.js'

/** Schemas of the budget routes' answers, shared by several of them. */

export const LimitConfigSchema = strictObject({
  id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$', description: 'Limit identifier, unique within the budget.' }),
  window: WindowSchema,
  enforce: EnforceSchema,
  amount: Amount,
  anchor: Type.Optional(Type.Integer({ minimum: 0, maximum: 253402300799999, description: 'Epoch ms the periods are laid from (months clamp to their last day). Absent: UTC calendar periods.' })),
})

export const BudgetViewSchema = Type.Object({
  key: BudgetKey,
  unit: Type.String(),
  limits: Type.Array(LimitConfigSchema),
  holds: Type.Object({ defaultTtlMs: Type.Integer(), maxTtlMs: Type.Integer() }),
  closesAt: Type.Union([Type.Integer(), Type.Null()]),
  balance: BalanceSchema,
})

export const HoldOutcomeSchema = Type.Object({
  holdId: HoldId,
  state: Type.Union([Type.Literal('settled'), Type.Literal('released')]),
  settledBy: Type.Optional(Type.Union([Type.Literal('settle'), Type.Literal('expiry')], { description: 'expiry: the deadline passed and the hold was settled at its full amount.' })),
  amount: SignedAmount,
  settledAmount: Type.Optional(SignedAmount),
  expiresAt: EpochMs,
  replayed: Type.Boolean(),
  balance: BalanceSchema,
  crossed: CrossedSchema,
})

export const ConsumptionSchema = Type.Object({
  amount: SignedAmount,
  replayed: Type.Boolean(),
  balance: BalanceSchema,
  crossed: CrossedSchema,
})

/** POST /v1/budgets/upsert, and each budget of a config document. */
export const BudgetUpsertSchema = strictObject({
  key: BudgetKey,
  unit: Type.Optional(Type.String({ maxLength: 32, description: 'What amounts count, e.g. USD or tokens. Informational.' })),
  limits: Type.Array(LimitConfigSchema, { maxItems: 32 }),
  holds: Type.Optional(strictObject({
    defaultTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
    maxTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
  })),
  closesAt: Type.Optional(Type.Union([EpochMs, Type.Null()])),
})
