import { Type, type TSchema } from '@sinclair/typebox'
import { AMOUNT_PATTERN } from './money.js'

/** Schemas shared by several routes. Descriptions document the API (they end up in OpenAPI). */

export const Amount = Type.String({
  pattern: AMOUNT_PATTERN,
  description: 'Decimal amount: 1 to 19 digits, optionally a dot and 1 to 8 fractional digits.',
  examples: ['12.5'],
})

/** Amounts the service answers with: canonical decimals, negative where a limit was passed. */
export const SignedAmount = Type.String({ pattern: '^-?[0-9]+(\\.[0-9]{1,8})?$', description: 'Decimal amount (may be negative).' })

export const BudgetKey = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9][A-Za-z0-9:/_.@-]*$',
  description: "The budget's key, chosen by the caller, unique within the project.",
})

export const IdempotencyKey = Type.String({ minLength: 1, maxLength: 256, description: 'Retries with the same key and request replay the first answer.' })

export const HoldId = Type.String({ pattern: '^h_[1-9][0-9]{0,15}$', description: '`h_` and a positive integer of at most 16 digits.' })

export const EpochMs = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Epoch milliseconds.' })

export const WindowSchema = Type.Union(
  [Type.Literal('hour'), Type.Literal('day'), Type.Literal('week'), Type.Literal('month'), Type.Literal('never')],
  { description: 'hour, day, week (ISO, from Monday) and month are UTC calendar periods unless anchored; never counts for the life of the budget.' },
)
export const EnforceSchema = Type.Union([Type.Literal('hard'), Type.Literal('soft')])

export const LimitSchema = Type.Object({
  id: Type.String(),
  window: WindowSchema,
  enforce: EnforceSchema,
  amount: SignedAmount,
  consumed: SignedAmount,
  held: SignedAmount,
  remaining: SignedAmount,
  resetsAt: Type.Union([Type.Integer(), Type.Null()], { description: 'End of the current period; null for never.' }),
})

export const BalanceSchema = Type.Object({
  remaining: Type.Union([SignedAmount, Type.Null()], { description: 'Least remaining over hard limits; null without hard limits.' }),
  held: SignedAmount,
  limits: Type.Array(LimitSchema),
  asOf: Type.Integer(),
})

export const CrossedSchema = Type.Array(
  Type.Object({ limitId: Type.String(), enforce: EnforceSchema, window: WindowSchema, amount: SignedAmount, consumed: SignedAmount }),
  { description: 'Limits whose consumed passed their amount with this change.' },
)

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'Machine-readable code, e.g. BAD_REQUEST, BUDGET_EXCEEDED.' }),
      docs: Type.String({ description: '{docs_url}/api-reference/errors/code/<CODE>' }),
      message: Type.String(),
      requestId: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { $id: 'ErrorEnvelope' },
)

export function strictObject<T extends Parameters<typeof Type.Object>[0]>(properties: T, options: { description?: string } = {}) {
  return Type.Object(properties, { additionalProperties: false, ...options })
}

export type { TSchema }
