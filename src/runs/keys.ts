import { catalogKey, customerKey } from '../catalog/keys.js'
import { entitlementStateKey } from '../entitlements/keys.js'
import { walletKeys } from '../wallet/keys.js'
import { PREFIX, projectOfTag, projectTag, splitKey } from '../infra/redis/keys.js'

/**
 * Every Redis key of runs, built in one place. All carry the project's hash tag `{cat:<projectId>}`
 * (src/catalog/keys.ts): a customer's runs sit in one hash beside its wallet, its catalog record
 * and its entitlement state, so one script starts a child run from its parent, prices against the
 * customer's access and settles a root run at the wallet atomically, on a Cluster too.
 */
export interface RunKeys {
  /** The customer's runs: one hash, fields `<runId>:<name>` (lua/includes/runs.lua). */
  runs: string
  wallet: string
  credits: string
  journal: string
  /** The project's running runs by deadline: a sorted set of `<customerId>\t<runId>`. */
  deadlines: string
  /** The project's ended root runs by the time their tree may be forgotten: `<customerId>\t<runId>`. */
  purges: string
  /**
   * The project's lease settlements to make: ended roots that leased from a budget, as a hash
   * `<customerId>\t<runId>` → `<lease number>|<consumed minor>|<x>|<budgetKey>` (the gateway settles
   * each at its budget, another slot, then deletes the field).
   */
  leases: string
}

export function runKeys(projectId: string, customerId: string): RunKeys {
  const w = walletKeys(projectId, customerId)
  return {
    runs: `${PREFIX}${projectTag(projectId)}:rn:${customerId}`,
    wallet: w.wallet,
    credits: w.credits,
    journal: w.journal,
    deadlines: deadlinesKey(projectId),
    purges: purgesKey(projectId),
    leases: leaseSettlementsKey(projectId),
  }
}

/** runId → customerId, for the project. */
export function runIndexKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:ri`
}

export function deadlinesKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:rx`
}

export function purgesKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:rp`
}

export function leaseSettlementsKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:rl`
}

/** A run's data: what its consumes wrote (cost and quantity so far per feature, consume records). */
export function runDataKey(projectId: string, runId: string): string {
  return `${PREFIX}${projectTag(projectId)}:rd:${runId}`
}

/** The keys consume reads besides the run's: the customer's access flags, the catalog version, the entitlement state. */
export function consumeKeys(projectId: string, customerId: string): string[] {
  return [customerKey(projectId, customerId), catalogKey(projectId), entitlementStateKey(projectId, customerId)]
}

/** What the sweep scans for: every project's deadlines and purges. */
export const DEADLINES_PATTERN = `${PREFIX}${projectTag('*')}:rx`
export const PURGES_PATTERN = `${PREFIX}${projectTag('*')}:rp`
export const LEASE_SETTLEMENTS_PATTERN = `${PREFIX}${projectTag('*')}:rl`

/** The project of a deadlines (or purges, or lease settlements) key, or undefined for a key that is not one. */
export function projectOfDeadlinesKey(key: string): string | undefined {
  const split = splitKey(key)
  return split && /^r[xpl]$/.test(split.suffix) ? projectOfTag(split.tag) : undefined
}
