import { journalKey } from '../journal/keys.js'
import { PREFIX, splitKey } from '../infra/redis/keys.js'

/**
 * Every Redis key of a budget, built in one place. All carry the hash tag `{project/budget}`,
 * so each script's keys sit in one Cluster slot and the scripts run unchanged on a Cluster.
 */
export interface BudgetKeys {
  /** The budget hash: configuration, counters and hold records. */
  budget: string
  /** Open holds by expiresAt. */
  open: string
  /** Hash fields (closed holds, idempotency records) by the time they may be forgotten. */
  purge: string
  /** The journal outbox list of the budget's movements (src/journal/README.md). */
  journal: string
}

export function budgetTag(projectId: string, budgetKey: string): string {
  return `{${projectId}/${budgetKey}}`
}

export function budgetKeys(tag: string): BudgetKeys {
  return { budget: `${PREFIX}${tag}:b`, open: `${PREFIX}${tag}:x`, purge: `${PREFIX}${tag}:d`, journal: journalKey(tag) }
}

/** Patterns the expiry sweep scans for: budgets with open holds, or closed holds to purge. */
export const SWEEP_PATTERNS = [`${PREFIX}{*}:x`, `${PREFIX}{*}:d`]

/** The hash tag of a sweep-index key, or undefined for a key that is not one. */
export function tagOfIndexKey(key: string): string | undefined {
  const split = splitKey(key)
  return split && (split.suffix === 'x' || split.suffix === 'd') ? split.tag : undefined
}
