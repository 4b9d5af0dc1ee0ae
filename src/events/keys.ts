import { PREFIX, projectTag } from '../infra/redis/keys.js'

/**
 * Every Redis key of raw-event ingestion, built in one place. Dedup keys carry the project's
 * catalog hash tag `{cat:<projectId>}` on purpose: the admit script of a batch reads the
 * customers' access flags (catalog keys) and the dedup hashes of one project in one call, so
 * all must sit in one Cluster slot.
 */
/**
 * The dedup window is kept in hashes: field = the event's idempotencyKey ?? id, value = the
 * epoch ms its window ends. An event marked at `t` goes to bucket `floor(t / window)`, so one
 * still in its window at `now` is in bucket `floor(now / window)` or the one before: two
 * lookups find it. Each bucket is split in DEDUP_SHARDS hashes so that none grows huge (Redis
 * frees an expired hash in one go).
 */
export const DEDUP_SHARDS = 16

export function dedupBucketKey(projectId: string, bucket: number, shard: number): string {
  return `${PREFIX}${projectTag(projectId)}:evd:${bucket}:${shard}`
}

/** The shard of a dedup key (FNV-1a of its UTF-16 units). */
export function dedupShard(key: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return (h >>> 0) % DEDUP_SHARDS
}

/**
 * Which batch owns an event's insert into ClickHouse (lua/claimEvents-N.lua): field = event id,
 * value = batchId, one hash per project and UTC day of processing; an event is looked up in
 * its day's hash and the day before.
 */
export function claimDayKey(projectId: string, day: number): string {
  return `${PREFIX}${projectTag(projectId)}:evc:${day}`
}
