import { Type, type TSchema } from '@sinclair/typebox'
import { CrossedSchema, WindowSchema } from '../budgets/schemas.js'
import { EpochMs, SignedAmount } from '../kernel/schema.js'
import { NOTIFICATION_TYPES, type NotificationType } from './types.js'

export const WebhookId = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$',
  description: "The endpoint's id: the caller's name, or `wh_…` generated on create.",
})
export const EventType = Type.Union(
  NOTIFICATION_TYPES.map((t) => Type.Literal(t)),
  { $id: 'WebhookEventType', description: 'A notification type a webhook endpoint may subscribe to.' },
)

export const WebhookViewSchema = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(EventType),
    enabled: Type.Boolean(),
    createdAt: Type.Integer(),
    updatedAt: Type.Integer(),
  },
  { $id: 'Webhook', description: 'A webhook endpoint of the project (without its secret).' },
)

// ---------------------------------------------------------------------------------------------
// What a receiver gets: one JSON body per delivery (delivery.ts payloadOf), by type. The OpenAPI
// document publishes them under `webhooks` (src/http/openapi.ts). Bodies may grow: no
// additionalProperties: false.

const Decimal = (description: string) => Type.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description })
const Money = (description: string) => Decimal(`${description} Decimal text in the invoice's currency, exact (never a float).`)

/** The envelope every delivery has, with the type's `data`. */
function payload<T extends TSchema>(type: NotificationType, name: string, description: string, data: T) {
  return Type.Object(
    {
      id: Type.String({ pattern: '^ntf_', description: 'The notification: the same for every endpoint and every attempt.' }),
      type: Type.Literal(type),
      projectId: Type.String(),
      createdAt: EpochMs,
      data,
    },
    { $id: name, description },
  )
}

export const LimitReachedPayload = payload(
  'limit.reached',
  'LimitReachedWebhook',
  "A customer's usage of a feature reached its entitlement limit for the period: sent by the decision that took it there (the ingest worker's count of a recorded event, or a run's consume), once per customer, feature and period. createdAt is that decision's instant.",
  Type.Object({
    customerId: Type.String(),
    featureSlug: Type.String(),
    entitlementId: Type.String(),
    limit: Type.Number({ description: "The period's limit in the feature's units (exact.limit is the decimal text)." }),
    used: Type.Number({ description: 'The usage counted against it by that decision (exact.used is the decimal text).' }),
    exact: Type.Object({ limit: Decimal('The limit, exact.'), used: Decimal('The usage, exact.') }),
    window: Type.String({ description: 'The reset interval: day, month, year, onetime, …' }),
    periodStartAt: EpochMs,
    resetsAt: Type.Union([EpochMs, Type.Null()], { description: 'When the period ends and usage starts again; null when it never resets.' }),
    denied: Type.Boolean({
      description: 'Whether usage is refused until resetsAt (overage strategy none or last-call); false for always (usage goes on as overage).',
    }),
    overageStrategy: Type.Union([Type.Literal('none'), Type.Literal('last-call'), Type.Literal('always')]),
    source: Type.Union([Type.Literal('ingest'), Type.Literal('run')], { description: 'ingest: a recorded usage event; run: a consume of runId.' }),
    runId: Type.Optional(Type.String()),
  }),
)

export const LimitCrossedPayload = payload(
  'limit.crossed',
  'LimitCrossedWebhook',
  "A budget movement took limits' consumed past their amount (the `crossed` of the operation's answer).",
  Type.Object({ budgetKey: Type.String(), crossed: CrossedSchema }),
)

export const BudgetExceededPayload = payload(
  'budget.exceeded',
  'BudgetExceededWebhook',
  "A budget's hard limit denied an authorize, a charge or a run's lease (402 BUDGET_EXCEEDED): once per budget, limit, limit amount and period (the first denial).",
  Type.Object({
    budgetKey: Type.String(),
    operation: Type.Union([Type.Literal('authorize'), Type.Literal('charge'), Type.Literal('lease')]),
    amount: SignedAmount,
    blocked: Type.Object(
      {
        limitId: Type.String(),
        window: WindowSchema,
        remaining: SignedAmount,
        held: SignedAmount,
        resetsAt: Type.Union([EpochMs, Type.Null()]),
        remedy: Type.Union([Type.Literal('release_holds'), Type.Literal('wait_for_reset'), Type.Literal('raise_limit')]),
      },
      { description: "The 402's details.blocked." },
    ),
    limit: Type.Object(
      {
        id: Type.String(),
        window: WindowSchema,
        amount: SignedAmount,
        consumed: SignedAmount,
        held: SignedAmount,
        resetsAt: Type.Union([EpochMs, Type.Null()]),
      },
      { description: 'The blocked limit as the budget stood at the denial.' },
    ),
  }),
)

export const InvoiceCreatedPayload = payload(
  'invoice.created',
  'InvoiceCreatedWebhook',
  'The invoice worker (or POST /v1/invoices/close) finalized the invoice of a closed billing cycle; GET /v1/invoices/get/{invoiceId} has its lines.',
  Type.Object({
    invoiceId: Type.String(),
    customerId: Type.String(),
    subscriptionId: Type.String(),
    status: Type.String({ description: 'unpaid, paid, …' }),
    currency: Type.String(),
    statementStartAt: EpochMs,
    statementEndAt: EpochMs,
    dueAt: EpochMs,
    pastDueAt: EpochMs,
    grossAmount: Money('Sum of the lines.'),
    amountDue: Money('What is left to pay.'),
    amountPaid: Money('Paid by wallet credits.'),
    amountIncluded: Money('Included by the plan or the trial.'),
    lineCount: Type.Integer({ minimum: 0 }),
  }),
)

export const InvoiceUpdatedPayload = payload(
  'invoice.updated',
  'InvoiceUpdatedWebhook',
  'Usage of an invoiced cycle changed after its invoice (late events): the difference is billed as adjustment lines on a newer invoice, adjustedBy. The earlier invoice itself is not rewritten.',
  Type.Object({
    invoiceId: Type.String({ description: 'The earlier invoice whose cycle the adjustments are for.' }),
    customerId: Type.String(),
    subscriptionId: Type.String(),
    currency: Type.String(),
    adjustedBy: Type.String({ description: 'The invoice carrying the adjustment lines.' }),
    adjustments: Type.Array(
      Type.Object({
        featureSlug: Type.String(),
        quantity: Decimal('The change of quantity (may be negative).'),
        amount: Money('The rated difference (may be negative).'),
        description: Type.String(),
      }),
    ),
  }),
)

/** The payload schema of each notification type (OpenAPI `webhooks`, the tests' checks). */
export const WEBHOOK_PAYLOADS = {
  'limit.reached': LimitReachedPayload,
  'limit.crossed': LimitCrossedPayload,
  'budget.exceeded': BudgetExceededPayload,
  'invoice.created': InvoiceCreatedPayload,
  'invoice.updated': InvoiceUpdatedPayload,
} as const satisfies Record<NotificationType, TSchema>
