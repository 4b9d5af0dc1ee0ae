import type { Cluster, Redis } from 'ioredis'
import type { RedisClient } from './connection.js'

/** The nodes that hold data: every master of a Cluster, or the one server. */
export function masters(redis: RedisClient): Redis[] {
  return (redis as Cluster).isCluster ? (redis as Cluster).nodes('master') : [redis as Redis]
}

/**
 * Every key matching the globs, on every master of a Cluster (one node otherwise): what the
 * background sweeps (holds, runs, journal lists, invoice cycles) iterate over. SCAN may return a
 * key twice; the answer has each once.
 */
export async function scanMasters(redis: RedisClient, patterns: readonly string[]): Promise<string[]> {
  const found = new Set<string>()
  for (const node of masters(redis)) {
    for (const pattern of patterns) {
      let cursor = '0'
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
        cursor = next
        for (const key of keys) found.add(key)
      } while (cursor !== '0')
    }
  }
  return [...found]
}
