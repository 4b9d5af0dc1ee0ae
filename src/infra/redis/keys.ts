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

/** The project id of a project tag (`{cat:<projectId>}`), or undefined for another tag. */
export function projectOfTag(tag: string): string | undefined {
  return tag.startsWith('{cat:') && tag.endsWith('}') ? tag.slice(5, -1) : undefined
}

/**
 * A scanned key split at its hash tag: `mg:<tag>:<suffix>` → { tag, suffix }, or undefined for a
 * key that is not ours or has no tag. The tag is the first `{…}` (greedy within the key, as a
 * project id may hold any character but `}`).
 */
export function splitKey(key: string): { tag: string; suffix: string } | undefined {
  if (!key.startsWith(PREFIX) || key[PREFIX.length] !== '{') return undefined
  const close = key.indexOf('}:', PREFIX.length)
  if (close < 0) return undefined
  return { tag: key.slice(PREFIX.length, close + 1), suffix: key.slice(close + 2) }
}

/** The BullMQ prefix of every queue: one hash tag, so each queue's keys share a Cluster slot. */
export const QUEUE_PREFIX = '{mg-queue}'
