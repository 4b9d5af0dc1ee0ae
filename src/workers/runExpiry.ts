import { scanMasters } from '../infra/redis/scan.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { DEADLINES_PATTERN, LEASE_SETTLEMENTS_PATTERN, PURGES_PATTERN, projectOfDeadlinesKey } from '../runs/keys.js'
import type { RunService } from '../runs/service.js'
import { every } from './every.js'

/** Runs expired per script call, and entries read per project per round. */
const BATCH = 500

/**
 * The background sweep of runs (src/runs/README.md, "Expiry" and "Retention"). Runs expire
 * lazily whenever they are touched; this ends those nobody touches, so their reservation goes
 * back to the parent or the wallet, and forgets ended run trees whose retention is over. It scans
 * every master for the projects' deadline sets (`mg:{cat:<p>}:rx`) and purge sets (`:rp`), reads
 * the entries due on the service's clock, and runs one expireRuns script per customer, one
 * purgeRuns per tree. Then it settles at their budgets the leases of ended leasing roots (`:rl`:
 * left by this sweep's expiries, or by a gateway that could not settle them). `match` narrows the
 * scan to the given deadline keys (tests: one project's `mg:{cat:<p>}:rx`; its purge set and lease
 * settlements are swept with it).
 */
export async function sweepExpiredRuns(redis: RedisClient, runs: RunService, match?: string): Promise<{ projects: number; expired: number; purged: number }> {
  const patterns =
    match === undefined ? [DEADLINES_PATTERN, PURGES_PATTERN, LEASE_SETTLEMENTS_PATTERN] : [match, match.replace(/:rx$/, ':rp'), match.replace(/:rx$/, ':rl')]
  const keys = await scanMasters(redis, patterns)
  let expired = 0
  let purged = 0
  const projects = new Set<string>()
  const settling = new Set<string>()
  for (const key of keys) {
    const projectId = projectOfDeadlinesKey(key)
    if (projectId === undefined) continue
    projects.add(projectId)
    if (key.endsWith(':rl')) {
      settling.add(projectId)
      continue
    }
    const purging = key.endsWith(':rp')
    for (;;) {
      const due = await redis.zrangebyscore(key, '-inf', runs.now(), 'LIMIT', 0, BATCH)
      if (due.length === 0) break
      const byCustomer = new Map<string, string[]>()
      for (const member of due) {
        const tab = member.indexOf('\t')
        const customerId = member.slice(0, tab)
        ;(byCustomer.get(customerId) ?? byCustomer.set(customerId, []).get(customerId)!).push(member.slice(tab + 1))
      }
      for (const [customerId, runIds] of byCustomer) {
        if (purging) for (const runId of runIds) purged += await runs.purge(projectId, customerId, runId)
        else {
          const ended = await runs.expire(projectId, customerId, runIds)
          if (ended > 0) settling.add(projectId)
          expired += ended
        }
      }
      if (due.length < BATCH) break
    }
  }
  for (const projectId of settling) await runs.settleLeases(projectId)
  return { projects: projects.size, expired, purged }
}

/** Runs the sweep every `intervalMs` until stopped; one sweep at a time. */
export function startRunExpiry(redis: RedisClient, runs: RunService, intervalMs: number, onError: (err: unknown) => void): () => void {
  return every(intervalMs, () => sweepExpiredRuns(redis, runs), onError)
}
