import { Type, type Static } from '@sinclair/typebox'
import { DEFAULT_HORIZON_DAYS, MAX_HORIZON_DAYS } from './forecast.js'

/**
 * Schemas of the analytics routes: POST /v1/analytics/usage/get (spec 4.7, Usage row 2.7) and
 * POST /v1/analytics/usage/forecast (4.11). Like src/catalog/schemas.ts: request bodies are strict,
 * answers are not (they may grow); no `$ref`, and an `$id` only on a schema OpenAPI shows as a named
 * component; descriptions end up in OpenAPI.
 * Field names are the spec's (snake_case here, camelCase in the forecast's statistics).
 */

const EpochMs = (description = 'Epoch milliseconds.') => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description })

/** Identifier fields of requests: 1 to 36 characters, like the catalog's (spec 8). */
const RequestId = (description: string) => Type.String({ minLength: 1, maxLength: 36, description })

/** `asOf` of every answer: the moment of the read. */
const AsOf = () => EpochMs("When the answer was computed, epoch ms, on the service's clock (the now its range or windows are laid from).")

/** `usageAsOf`: how far the data read reaches. */
const UsageAsOf = (what: string) =>
  Type.Union([EpochMs(), Type.Null()], {
    description:
      `The timestamp of the newest event in ${what}, epoch ms; null when there is none. Events reach ClickHouse through the ingest worker ` +
      '(runs through the journal worker), so an event accepted but not yet written is not counted: a usageAsOf far behind asOf while the customer ' +
      'keeps sending events means the pipeline is behind.',
  })

const DecimalText = Type.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description: 'Decimal amount, exact (never a float).', examples: ['12.5'] })

// ---------------------------------------------------------------------------------------------
// 4.7 Get usage

export const UsageRangeSchema = Type.Union([Type.Literal('24h'), Type.Literal('7d'), Type.Literal('30d'), Type.Literal('90d')], {
  description: 'The window ending now: the last 24 hours, 7, 30 or 90 days (each day 24 h).',
})
export type UsageRangeValue = Static<typeof UsageRangeSchema>

export const UsageGetRequest = Type.Object(
  {
    range: UsageRangeSchema,
    customer_id: RequestId('The customer whose usage is returned.'),
    project_id: Type.Optional(RequestId("The customer's project; by default the key's project (another project only for main projects).")),
  },
  { additionalProperties: false },
)
export type UsageGetRequest = Static<typeof UsageGetRequest>

export const SpendingSchema = Type.Object(
  {
    amount: DecimalText,
    currency: Type.String({ minLength: 1, description: 'ISO 4217 code; USD when nothing is priced.', examples: ['USD'] }),
    display_amount: Type.String({ description: 'The amount for people, e.g. "$1,234.50" or "$0".', examples: ['$0'] }),
  },
  { description: "The usage priced from the customer's plan; 0 USD when nothing is priced." },
)
export type Spending = Static<typeof SpendingSchema>

export const UsageRowSchema = Type.Object(
  {
    project_id: Type.String(),
    feature_slug: Type.String(),
    usage: Type.Number({ description: 'Accepted usage of the feature in the range, in its unit: what is billed and priced in `spending`.' }),
    refused: Type.Number({
      description:
        "Usage of the feature in the range that the customer's entitlement refused at its limit (overage strategy `none` or `last-call`): recorded, never billed; 0 when none. An addition to the spec.",
    }),
    spending: SpendingSchema,
    customer_id: Type.String(),
  },
  { $id: 'UsageRow', description: 'Usage and spending of one feature of a customer over the range.' },
)
export type UsageRowValue = Static<typeof UsageRowSchema>

export const UsageGetResponseSchema = Type.Object(
  {
    usage: Type.Array(UsageRowSchema, { description: 'One row per feature with usage in the range, by feature slug.' }),
    asOf: AsOf(),
    usageAsOf: UsageAsOf("the customer's usage read for the range"),
  },
  { description: "A customer's usage per feature over the range." },
)
export type UsageGetResponse = Static<typeof UsageGetResponseSchema>

// ---------------------------------------------------------------------------------------------
// 4.11 Forecast usage

export const UsageForecastRequest = Type.Object(
  {
    customer_id: RequestId('The customer whose usage is forecast.'),
    feature_slug: Type.String({ minLength: 1, maxLength: 64, description: 'The feature whose usage is forecast.' }),
    period_key: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The billing period the forecast is for; echoed as periodKey.' })),
    horizon_days: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_HORIZON_DAYS,
        default: DEFAULT_HORIZON_DAYS,
        description: `Days to project, today included; default ${DEFAULT_HORIZON_DAYS}.`,
      }),
    ),
  },
  { additionalProperties: false },
)
export type UsageForecastRequest = Static<typeof UsageForecastRequest>

/** horizon_days with its default applied (validation does not fill defaults). */
export function horizonDaysOf(body: UsageForecastRequest): number {
  return body.horizon_days ?? DEFAULT_HORIZON_DAYS
}

const LimitKindSchema = Type.Union([Type.Literal('entitlement'), Type.Literal('budget')])

export const ForecastLimitSchema = Type.Object(
  {
    kind: LimitKindSchema,
    id: Type.Optional(Type.String()),
    budgetKey: Type.Optional(
      Type.String({
        description: "For a budget's limit: the budget's key (`<customer_id>/<feature_slug>`, or `<customer_id>` when its unit is the feature's slug).",
      }),
    ),
    window: Type.Optional(Type.String()),
    amount: Type.Number({ description: "The limit's amount in usage units." }),
    used: Type.Number({ description: 'Usage already counted against it.' }),
    remaining: Type.Number({ description: 'amount − used (negative once passed), 2 decimals.' }),
    resetsAt: Type.Optional(Type.Union([EpochMs(), Type.Null()], { description: "When the limit's window resets; null for never." })),
    exhaustsAt: Type.Union([EpochMs(), Type.Null()], {
      description:
        'When the limit is used up at the projected rate (now when already used up); null when not within a year, not before the reset, or without data.',
    }),
    exhaustsWithinHorizon: Type.Boolean(),
  },
  { $id: 'ForecastLimit', description: 'The limit or budget the customer has for the feature, and when it runs out (an addition to the spec).' },
)

const Statistic = (description: string) => Type.Number({ description })

export const UsageForecastResponseSchema = Type.Object(
  {
    answer: Type.String({ description: 'The forecast in a sentence or two.' }),
    confidence: Type.Union([Type.Literal('high'), Type.Literal('medium'), Type.Literal('low')], {
      description: 'low below 5 observed days, medium below 10, else high.',
    }),
    freshness: Type.Object(
      {
        generatedAt: Type.Number({ description: 'When the forecast was made, epoch ms.' }),
        dataFrom: Type.Number({ description: 'Start of the first day with data in the 14 windows, epoch ms (the windows start when there is none).' }),
        dataTo: Type.Number({ description: 'End (exclusive) of the last day with data, epoch ms; equal to dataFrom when there is none.' }),
      },
      { description: 'What the data covers.' },
    ),
    evidence: Type.Array(
      Type.Object({ id: Type.String({ description: 'Id of a daily fact used.' }), timestamp: Type.Number({ description: 'Start of its UTC day, epoch ms.' }) }),
      { description: 'The daily facts the daily usage was computed from.' },
    ),
    warnings: Type.Array(Type.String(), { description: 'Sparse, stale, decreasing or missing data.' }),
    nextActions: Type.Array(Type.String(), { description: 'What to do about the warnings or the limit.' }),
    project_id: Type.String(),
    customer_id: Type.String(),
    feature_slug: Type.String(),
    horizonDays: Type.Integer({ minimum: 1, maximum: MAX_HORIZON_DAYS }),
    projectedUsage: Statistic('Projected usage over the horizon, today included, 2 decimals.'),
    observedDays: Type.Integer({ minimum: 0, description: 'Days with a usage value (difference of consecutive cumulative values).' }),
    baselineUsage: Statistic('Mean daily usage over the observed days, 2 decimals.'),
    trendPerDay: Statistic('Least-squares slope of daily usage over the day index, 2 decimals.'),
    periodKey: Type.Optional(Type.String()),
    exhaustsAt: Type.Optional(
      Type.Union([EpochMs(), Type.Null()], {
        description: 'The earliest of limit.exhaustsAt and budget.exhaustsAt, when the customer has a limit or a budget for the feature.',
      }),
    ),
    limit: Type.Optional(ForecastLimitSchema),
    budget: Type.Optional(ForecastLimitSchema),
    asOf: AsOf(),
    usageAsOf: UsageAsOf(
      "the customer's usage of the feature from the start of the 14 windows until now (today's events included, which the limit's `used` counts)",
    ),
  },
  { $id: 'UsageForecast', description: "A forecast of a customer's usage of a feature (spec 4.11)." },
)
export type UsageForecastResponse = Static<typeof UsageForecastResponseSchema>
