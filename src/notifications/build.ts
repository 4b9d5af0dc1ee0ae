// The notifications built from the decisions that raise them (README.md, "What raises each
// type"). Pure: the ids are derived from what makes each notification unique, so the same
// decision reported twice is the same job.
import { createHash } from 'node:crypto'
import type { Blocked, LimitState } from '../budgets/types.js'
import type { LimitReachedDecision } from '../entitlements/usage.js'
import type { StoredInvoice, StoredLine } from '../invoices/types.js'
import { formatUnits } from '../kernel/money.js'
import type { BudgetExceeded, InvoiceCreated, InvoiceUpdated, LimitReached } from './types.js'

/** A notification id derived from a stable name (the same name, the same id). */
export function notificationIdOf(name: string): string {
  return 'ntf_' + createHash('sha256').update(name).digest('hex').slice(0, 32)
}

/** Which decision reached a limit: the ingest worker's claim, or a run's consume. */
export type LimitReachedSource = { kind: 'ingest' } | { kind: 'run'; runId: string }

/** limit.reached of one decision; its id names the project, customer, feature and period (one per period). */
export function limitReachedOf(projectId: string, d: LimitReachedDecision, source: LimitReachedSource): LimitReached {
  return {
    type: 'limit.reached',
    id: notificationIdOf(['limit.reached', projectId, d.customerId, d.featureSlug, d.periodStartMs].join('\0')),
    projectId,
    customerId: d.customerId,
    featureSlug: d.featureSlug,
    entitlementId: d.entitlementId,
    limit: Number(d.limit),
    used: Number(d.used),
    exact: { limit: d.limit, used: d.used },
    window: d.window,
    periodStartAt: d.periodStartMs,
    resetsAt: d.periodEndMs,
    denied: d.denied,
    overageStrategy: d.overageStrategy,
    source: source.kind,
    ...(source.kind === 'run' ? { runId: source.runId } : {}),
    at: d.atMs,
  }
}

/** budget.exceeded of a denial, under the given id (the dedup key's). */
export function budgetExceededOf(
  id: string,
  input: { projectId: string; budgetKey: string; operation: BudgetExceeded['operation']; amount: string; blocked: Blocked; limit: LimitState; at: number },
): BudgetExceeded {
  const { limit, blocked } = input
  return {
    type: 'budget.exceeded',
    id,
    projectId: input.projectId,
    budgetKey: input.budgetKey,
    operation: input.operation,
    amount: input.amount,
    blocked,
    limit: {
      id: limit.id,
      window: limit.window,
      amount: formatUnits(limit.amount),
      consumed: formatUnits(limit.consumed),
      held: blocked.held,
      resetsAt: limit.resetsAt,
    },
    at: input.at,
  }
}

const money = (ledger: string): string => formatUnits(BigInt(ledger))

/**
 * invoice.created of a finalized invoice, and invoice.updated of each earlier invoice its
 * adjustment lines adjust (late usage of that invoice's cycle), named by `invoiceOfCycle`.
 */
export function invoiceNotificationsOf(
  invoice: StoredInvoice,
  lines: readonly StoredLine[],
  invoiceOfCycle: (cycleStartAt: number) => string,
  at: number,
): (InvoiceCreated | InvoiceUpdated)[] {
  const created: InvoiceCreated = {
    type: 'invoice.created',
    id: notificationIdOf(`invoice.created\0${invoice.id}`),
    projectId: invoice.project_id,
    invoiceId: invoice.id,
    customerId: invoice.customer_id,
    subscriptionId: invoice.subscription_id,
    status: invoice.status,
    currency: invoice.currency,
    statementStartAt: invoice.statement_start_at,
    statementEndAt: invoice.statement_end_at,
    dueAt: invoice.due_at,
    pastDueAt: invoice.past_due_at,
    grossAmount: money(invoice.gross_amount),
    amountDue: money(invoice.amount_due),
    amountPaid: money(invoice.amount_paid),
    amountIncluded: money(invoice.amount_included),
    lineCount: lines.length,
    at,
  }
  const adjusted = new Map<number, StoredLine[]>()
  for (const line of lines) {
    if (line.kind === 'adjustment') adjusted.set(line.cycle_start_at, [...(adjusted.get(line.cycle_start_at) ?? []), line])
  }
  const updated = [...adjusted].map(([cycleStartAt, adjustments]): InvoiceUpdated => {
    const earlier = invoiceOfCycle(cycleStartAt)
    return {
      type: 'invoice.updated',
      id: notificationIdOf(`invoice.updated\0${earlier}\0${invoice.id}`),
      projectId: invoice.project_id,
      invoiceId: earlier,
      customerId: invoice.customer_id,
      subscriptionId: invoice.subscription_id,
      currency: invoice.currency,
      adjustedBy: invoice.id,
      adjustments: adjustments.map((l) => ({ featureSlug: l.feature_slug, quantity: l.quantity, amount: money(l.amount), description: l.description })),
      at,
    }
  })
  return [created, ...updated]
}
