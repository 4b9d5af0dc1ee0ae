import { customerKey } from '../catalog/keys.js'
import { entitlementStateKey, usageKey } from '../entitlements/keys.js'
import type { EventCount } from '../entitlements/usage.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { claimDayKey, dedupBucketKey, dedupShard } from './keys.js'

/** Storage adapter of the dedup window: one script per function, one round trip each. */
const scripts = {
  admit: new Script('admitEvents-N'),
  mark: new Script('markEventsSeen-N'),
  claim: new Script('claimEvents-N'),
}

const ADMISSIONS = ['new', 'duplicate', 'customer_disabled'] as const
export type Verdict = (typeof ADMISSIONS)[number]

/**
 * For events of one project: whether each is new, a duplicate within the window, or from a
 * disabled customer (lua/admitEvents-N.lua). `key` is the event's idempotencyKey ?? id.
 * KEYS are built once per customer and per shard, not per event: this runs for every event.
 */
export async function admitEvents(
  redis: RedisClient,
  projectId: string,
  events: { customerId: string; key: string | undefined }[],
  nowMs: number,
  windowMs: number,
): Promise<Verdict[]> {
  const keys: string[] = []
  const customers = new Map<string, number>()
  const current: number[] = []
  const previous: number[] = []
  const bucket = Math.floor(nowMs / windowMs)
  const args: (string | number)[] = [nowMs]
  for (const event of events) {
    let customer = customers.get(event.customerId)
    if (customer === undefined) {
      customer = keys.push(customerKey(projectId, event.customerId))
      customers.set(event.customerId, customer)
    }
    if (event.key === undefined) {
      args.push(customer, 0, 0, '')
    } else {
      const shard = dedupShard(event.key)
      let now = current[shard]
      if (now === undefined) {
        now = current[shard] = keys.push(dedupBucketKey(projectId, bucket, shard))
        previous[shard] = keys.push(dedupBucketKey(projectId, bucket - 1, shard))
      }
      args.push(customer, now, previous[shard]!, event.key)
    }
  }
  const codes = (await scripts.admit.run(redis, keys, args)) as number[]
  return codes.map((code) => ADMISSIONS[code]!)
}

/** Remembers the keys as accepted until `nowMs + windowMs` (lua/markEventsSeen-N.lua). */
export async function markEventsSeen(redis: RedisClient, projectId: string, eventKeys: string[], nowMs: number, windowMs: number): Promise<void> {
  if (eventKeys.length === 0) return
  const keys: string[] = []
  const byShard: number[] = []
  const bucket = Math.floor(nowMs / windowMs)
  const args: (string | number)[] = [nowMs + windowMs, 2 * windowMs]
  for (const key of eventKeys) {
    const shard = dedupShard(key)
    byShard[shard] ??= keys.push(dedupBucketKey(projectId, bucket, shard))
    const at = byShard[shard]!
    args.push(at, key)
  }
  await scripts.mark.run(redis, keys, args)
}

const DAY_MS = 86_400_000
/** Claims live three days: two days of lookups and a margin. */
const CLAIM_TTL_S = 3 * 86_400

/** What one claim decided (lua/claimEvents-N.lua). */
export interface ClaimResult {
  /**
   * The events this batch owns, the only ones it may insert: event id → the slugs of the features
   * whose entitlement refused the event's usage (empty: nothing refused). The decision was made
   * when the event was first claimed and is kept with the claim, so a retry reads the same.
   */
  owned: Map<string, ReadonlySet<string>>
  /**
   * The counts of this call that took a customer's usage of a feature to its limit for the first
   * time in the period (limit.reached), with the script's exact figures (units of 10^-8).
   */
  reached: { count: EventCount; usedUnits: string; limitUnits: string; deniedUntilMs: number }[]
}

const NONE: ReadonlySet<string> = new Set()

/**
 * Claims a batch's events of one project for the ClickHouse insert (lua/claimEvents-N.lua).
 * `counts` are the entitlement usage counts of the events (src/entitlements/usage.ts
 * countsOfEvents): the script applies an event's counts only when this call is the first to
 * claim it, so usage is counted exactly once per event id, and answers what they decided.
 */
export async function claimEvents(
  redis: RedisClient,
  projectId: string,
  batchId: string,
  eventIds: string[],
  nowMs: number,
  counts: readonly EventCount[] = [],
): Promise<ClaimResult> {
  const day = Math.floor(nowMs / DAY_MS)
  const keys = [claimDayKey(projectId, day), claimDayKey(projectId, day - 1)]
  const args: (string | number)[] = [batchId, CLAIM_TTL_S, eventIds.length, ...eventIds]
  const customers = new Map<string, number>()
  for (const count of counts) {
    let at = customers.get(count.customerId)
    if (at === undefined) {
      at = keys.push(usageKey(projectId, count.customerId), entitlementStateKey(projectId, count.customerId)) - 1
      customers.set(count.customerId, at)
    }
    args.push(count.event + 1, at, at + 1, ...count.args)
  }
  const [verdicts, reached] = (await scripts.claim.run(redis, keys, args)) as [(number | string)[], [number, string, string, number][]]
  const owned = new Map<string, ReadonlySet<string>>()
  eventIds.forEach((id, i) => {
    const verdict = verdicts[i]
    if (verdict === 1) owned.set(id, NONE)
    else if (typeof verdict === 'string') owned.set(id, new Set(verdict.split(',')))
  })
  return {
    owned,
    reached: reached.map(([number, usedUnits, limitUnits, deniedUntilMs]) => ({
      count: counts[number - 1]!,
      usedUnits: String(usedUnits),
      limitUnits: String(limitUnits),
      deniedUntilMs: Number(deniedUntilMs),
    })),
  }
}
