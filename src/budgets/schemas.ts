import { Type } from '@sinclair/typebox'
import { Amount, EpochMs, SignedAmount, strictObject } from '../kernel/schema.js'

/**
 * Schemas of the budget routes (POST /v1/budgets/*), shared by several of them and by the config
 * document's budgets and runs' budgetKey. Those with `$id` are named components in OpenAPI.
 */

export const BudgetKey = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9][A-Za-z0-9:/_.@-]*$',
  description: "The budget's key, chosen by the caller, unique within the project.",
})

export const HoldId = Type.String({ pattern: '^h_[1-9][0-9]{0,15}$', description: '`h_` and a positive integer of at most 16 digits.' })

export const WindowSchema = Type.Union([Type.Literal('hour'), Type.Literal('day'), Type.Literal('week'), Type.Literal('month'), Type.Literal('never')], {
  $id: 'LimitWindow',
  description: 'hour, day, week (ISO, from Monday) and month are UTC calendar periods unless anchored; never counts for the life of the budget.',
})
export const EnforceSchema = Type.Union([Type.Literal('hard'), Type.Literal('soft')], {
  $id: 'LimitEnforcement',
  description: 'hard: an authorize or charge that would pass the amount is denied (402); soft: never denies, passing it is only reported (crossed).',
})

/** A limit as the balance reports it. */
export const LimitSchema = Type.Object(
  {
    id: Type.String(),
    window: WindowSchema,
    enforce: EnforceSchema,
    amount: SignedAmount,
    consumed: SignedAmount,
    held: SignedAmount,
    remaining: SignedAmount,
    resetsAt: Type.Union([Type.Integer(), Type.Null()], { description: 'End of the current period; null for never.' }),
  },
  { $id: 'Limit' },
)

export const BalanceSchema = Type.Object(
  {
    remaining: Type.Union([SignedAmount, Type.Null()], { description: 'Least remaining over hard limits; null without hard limits.' }),
    held: SignedAmount,
    limits: Type.Array(LimitSchema),
    asOf: Type.Integer(),
  },
  { $id: 'Balance' },
)

export const CrossedSchema = Type.Array(
  Type.Object({ limitId: Type.String(), enforce: EnforceSchema, window: WindowSchema, amount: SignedAmount, consumed: SignedAmount }),
  { $id: 'Crossed', description: 'Limits whose consumed passed their amount with this change.' },
)

/** A limit as a budget is configured with it. */
export const LimitConfigSchema = strictObject(
  {
    id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$', description: 'Limit identifier, unique within the budget.' }),
    window: WindowSchema,
    enforce: EnforceSchema,
    amount: Amount,
    anchor: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 253402300799999,
        description: 'Epoch ms the periods are laid from (months clamp to their last day). Absent: UTC calendar periods.',
      }),
    ),
  },
  { $id: 'LimitConfig' },
)

export const BudgetViewSchema = Type.Object(
  {
    key: BudgetKey,
    unit: Type.String(),
    limits: Type.Array(LimitConfigSchema),
    holds: Type.Object({ defaultTtlMs: Type.Integer(), maxTtlMs: Type.Integer() }),
    closesAt: Type.Union([Type.Integer(), Type.Null()]),
    balance: BalanceSchema,
  },
  { $id: 'Budget', description: "A budget's configuration and its balance." },
)

/** The answer of POST /v1/budgets/authorize: the hold reserved. */
export const HoldSchema = Type.Object(
  {
    allowed: Type.Literal(true),
    holdId: HoldId,
    amount: SignedAmount,
    expiresAt: EpochMs,
    replayed: Type.Boolean(),
    balance: BalanceSchema,
  },
  { $id: 'Hold', description: 'An open hold: the amount reserved against every hard limit until it is settled, released or expires.' },
)

export const HoldOutcomeSchema = Type.Object(
  {
    holdId: HoldId,
    state: Type.Union([Type.Literal('settled'), Type.Literal('released')]),
    settledBy: Type.Optional(
      Type.Union([Type.Literal('settle'), Type.Literal('expiry')], { description: 'expiry: the deadline passed and the hold was settled at its full amount.' }),
    ),
    amount: SignedAmount,
    settledAmount: Type.Optional(SignedAmount),
    expiresAt: EpochMs,
    replayed: Type.Boolean(),
    balance: BalanceSchema,
    crossed: CrossedSchema,
  },
  { $id: 'HoldOutcome', description: 'A hold once settled or released.' },
)

export const ConsumptionSchema = Type.Object(
  {
    amount: SignedAmount,
    replayed: Type.Boolean(),
    balance: BalanceSchema,
    crossed: CrossedSchema,
  },
  { $id: 'Consumption', description: 'Usage charged or recorded against a budget.' },
)

/** POST /v1/budgets/upsert, and each budget of a config document. */
export const BudgetUpsertSchema = strictObject(
  {
    key: BudgetKey,
    unit: Type.Optional(Type.String({ maxLength: 32, description: 'What amounts count, e.g. USD or tokens. Informational.' })),
    limits: Type.Array(LimitConfigSchema, { maxItems: 32 }),
    holds: Type.Optional(
      strictObject({
        defaultTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
        maxTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
      }),
    ),
    closesAt: Type.Optional(Type.Union([EpochMs, Type.Null()])),
  },
  { $id: 'BudgetUpsert', description: "A budget's configuration, as POST /v1/budgets/upsert and the config document's budgets take it." },
)
