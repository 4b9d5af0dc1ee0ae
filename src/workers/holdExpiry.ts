import type { BudgetService } from '../budgets/service.js'
import { SWEEP_PATTERNS, tagOfIndexKey } from '../budgets/keys.js'
import { scanMasters } from '../infra/redis/scan.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { every } from './every.js'

/**
 * The background sweep of expired holds. Budgets apply expiry lazily whenever they are
 * touched; this settles holds of budgets nobody touches, so their usage shows and their
 * retention ends. It scans for budgets that have open holds or closed holds to forget (on a
 * Cluster, every master), then runs one expireHolds script per budget.
 */
export async function sweepExpiredHolds(redis: RedisClient, budgets: BudgetService): Promise<{ budgets: number; expired: number; purged: number }> {
  const tags = new Set<string>()
  for (const key of await scanMasters(redis, SWEEP_PATTERNS)) {
    const tag = tagOfIndexKey(key)
    if (tag) tags.add(tag)
  }
  let expired = 0
  let purged = 0
  for (const tag of tags) {
    const step = await budgets.expire(tag)
    expired += step.expired
    purged += step.purged
  }
  return { budgets: tags.size, expired, purged }
}

/** Runs the sweep every `intervalMs` until stopped; one sweep at a time. */
export function startHoldExpiry(redis: RedisClient, budgets: BudgetService, intervalMs: number, onError: (err: unknown) => void): () => void {
  return every(intervalMs, () => sweepExpiredHolds(redis, budgets), onError)
}
