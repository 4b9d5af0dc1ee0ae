import type { Logger } from 'pino'
import type { AnalyticsService } from '../analytics/service.js'
import type { Clock } from '../kernel/clock.js'
import type { UsageEventRow } from '../events/types.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { limitReachedKey } from './keys.js'
import { notificationIdOf, type LimitReached } from './queue.js'

/** How long a dedup key outlives its period's end (and how long one of a period that never ends lives). */
const KEEP_AFTER_PERIOD_MS = 7 * 86_400_000
const FOREVER_TTL_MS = 400 * 86_400_000
const CHECKS_IN_FLIGHT = 16

export interface LimitCheckerDeps {
  redis: RedisClient
  analytics: AnalyticsService
  /** Queues the notification (Notifications.limitReached). */
  queue(event: LimitReached): Promise<void>
  clock: Clock
  logger: Logger
}

/**
 * limit.reached: after the ingest worker inserted a batch, each (project, customer, feature)
 * of it is compared with the customer's entitlement limit for the feature, through the same
 * AnalyticsService.entitlementLimit the forecast uses (the limit in effect, its reset period
 * and the usage of that period from ClickHouse). Usage at or above the limit queues one
 * notification per (customer, feature, entitlement, period): `SET NX` of a key named by the
 * period's end decides which check sends it, so retried batches, replays, concurrent workers
 * and restarts never send it twice. The key is set before the job is queued; a failure to
 * queue deletes it again (the next batch retries). A crash between the two loses that one
 * notification rather than sending it twice.
 */
export class LimitChecker {
  constructor(private readonly deps: LimitCheckerDeps) {}

  /** Checks every (project, customer, feature) of the inserted rows; never throws (a failed check is logged). */
  async afterInsert(rows: readonly UsageEventRow[]): Promise<number> {
    const latest = new Map<string, { projectId: string; customerId: string; featureSlug: string; tsMs: number }>()
    for (const row of rows) {
      const key = JSON.stringify([row.project_id, row.customer_id, row.feature_slug])
      const seen = latest.get(key)
      if (!seen || seen.tsMs < row.ts_ms)
        latest.set(key, { projectId: row.project_id, customerId: row.customer_id, featureSlug: row.feature_slug, tsMs: row.ts_ms })
    }
    // A batch may hold thousands of customers: up to CHECKS_IN_FLIGHT checks at once.
    const targets = [...latest.values()]
    let queued = 0
    let next = 0
    const lane = async () => {
      while (next < targets.length) {
        const target = targets[next++]!
        try {
          if (await this.check(target.projectId, target.customerId, target.featureSlug, target.tsMs)) queued++
        } catch (err) {
          this.deps.logger.error({ err, ...target }, 'limit check failed (the next batch of this customer and feature checks again)')
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(CHECKS_IN_FLIGHT, targets.length) }, lane))
    return queued
  }

  /**
   * One check; true when it queued the notification. The period is the one holding `now` or
   * the batch's latest event, whichever is later (events may be stamped up to 5 minutes ahead),
   * and counts usage up to that instant inclusive.
   */
  async check(projectId: string, customerId: string, featureSlug: string, latestTsMs: number): Promise<boolean> {
    const { redis, analytics, clock } = this.deps
    const now = Math.max(clock(), latestTsMs + 1)
    const limit = await analytics.entitlementLimit(projectId, customerId, featureSlug, now)
    if (!limit || limit.used < limit.amount) return false
    const period = limit.resetsAt === null ? 'forever' : String(limit.resetsAt)
    const key = limitReachedKey(projectId, customerId, featureSlug, limit.id, period)
    const ttlMs = limit.resetsAt === null ? FOREVER_TTL_MS : Math.max(1000, limit.resetsAt - now + KEEP_AFTER_PERIOD_MS)
    const won = await redis.set(key, String(now), 'PX', ttlMs, 'NX')
    if (won !== 'OK') return false
    const event: LimitReached = {
      type: 'limit.reached',
      id: notificationIdOf(key),
      projectId,
      customerId,
      featureSlug,
      entitlementId: limit.id,
      limit: limit.amount,
      used: limit.used,
      window: limit.window,
      resetsAt: limit.resetsAt,
      at: now,
    }
    try {
      await this.deps.queue(event)
    } catch (err) {
      await redis.del(key).catch(() => undefined)
      throw err
    }
    return true
  }
}
