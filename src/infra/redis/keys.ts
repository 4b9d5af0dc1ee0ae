/**
 * What every Redis key of ours is built from. Each domain builds its own keys (its keys.ts) from
 * these two, so one Redis can hold other data beside ours and a script's keys share a slot.
 */

/** The prefix of every key this service writes. */
export const PREFIX = 'mg:'

/**
 * The hash tag of everything a project owns that is not a budget (catalog, customers, ingestion
 * claims, entitlement counters, wallets, runs, invoices, its journal outbox): one Cluster slot
 * per project, so one script can touch any of them atomically. Budgets keep a slot of their own
 * (`{<project>/<key>}`, src/budgets/keys.ts), so the hot path spreads per budget.
 */
export function projectTag(projectId: string): string {
  return `{cat:${projectId}}`
}
