// The notifications' shapes: what each type's job carries (the webhook body's `data` is all of it
// but type, id, projectId and at; src/notifications/delivery.ts payloadOf). Their JSON Schemas, as
// the OpenAPI document publishes them, are in schemas.ts.
import type { Blocked, Crossed } from '../budgets/types.js'

export const NOTIFICATION_TYPES = ['limit.reached', 'limit.crossed', 'budget.exceeded', 'invoice.created', 'invoice.updated'] as const
export type NotificationType = (typeof NOTIFICATION_TYPES)[number]

/** A budget limit crossed by a movement (BudgetService onCrossed). */
export interface LimitCrossed {
  type: 'limit.crossed'
  /** `ntf_…`; absent on jobs queued before ids existed (the worker then derives one from the job id). */
  id?: string
  projectId: string
  budgetKey: string
  crossed: Crossed[]
  at: number
}

/**
 * A customer's usage of a feature reached its entitlement limit for the period: raised by the
 * script whose count took it there (the ingest claim, a run's consume), with that script's
 * figures. Once per customer, feature and period.
 */
export interface LimitReached {
  type: 'limit.reached'
  id: string
  projectId: string
  customerId: string
  featureSlug: string
  entitlementId: string
  /** The limit of the period, in the feature's units (a number; `exact.limit` is the decimal text). */
  limit: number
  /** The usage counted against it when the decision reached it (a number; `exact.used` is the decimal text). */
  used: number
  exact: { limit: string; used: string }
  /** The reset interval (month, day, …). */
  window: string
  periodStartAt: number
  /** When the period ends and usage starts again (epoch ms), or null when it never resets. */
  resetsAt: number | null
  /** Whether usage is denied until resetsAt (overage strategy none or last-call). */
  denied: boolean
  overageStrategy: string
  /** Which decision reached it: the ingest worker's claim of a recorded event, or a run's consume. */
  source: 'ingest' | 'run'
  /** The run whose consume reached it (source run). */
  runId?: string
  at: number
}

/** A hard limit of a budget denied an authorize, a charge or a run's lease (402 BUDGET_EXCEEDED); once per limit, amount and period. */
export interface BudgetExceeded {
  type: 'budget.exceeded'
  id: string
  projectId: string
  budgetKey: string
  operation: 'authorize' | 'charge' | 'lease'
  /** What the operation asked for, decimal text in the budget's unit. */
  amount: string
  /** The 402's `details.blocked`. */
  blocked: Blocked
  /** The blocked limit as the budget stood. */
  limit: { id: string; window: string; amount: string; consumed: string; held: string; resetsAt: number | null }
  at: number
}

/** An invoice the invoice worker finalized for a closed billing cycle. Money: decimal text in the invoice's currency. */
export interface InvoiceCreated {
  type: 'invoice.created'
  id: string
  projectId: string
  invoiceId: string
  customerId: string
  subscriptionId: string
  status: string
  currency: string
  statementStartAt: number
  statementEndAt: number
  dueAt: number
  pastDueAt: number
  grossAmount: string
  amountDue: string
  amountPaid: string
  amountIncluded: string
  lineCount: number
  at: number
}

/** An earlier invoice whose cycle's usage changed (late usage), adjusted by lines of a newer invoice. */
export interface InvoiceUpdated {
  type: 'invoice.updated'
  id: string
  projectId: string
  invoiceId: string
  customerId: string
  subscriptionId: string
  currency: string
  /** The invoice carrying the adjustment lines. */
  adjustedBy: string
  adjustments: { featureSlug: string; quantity: string; amount: string; description: string }[]
  at: number
}

export type Notification = LimitCrossed | LimitReached | BudgetExceeded | InvoiceCreated | InvoiceUpdated
