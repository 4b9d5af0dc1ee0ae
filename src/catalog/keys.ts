import { PREFIX, projectTag } from '../infra/redis/keys.js'
import type { SubscriptionStatus } from './schemas.js'
import type { AccessFlags } from './types.js'

/**
 * Every Redis key of a project's catalog, built in one place. All carry the hash tag
 * `{cat:<projectId>}`, so the keys of one project sit in one Cluster slot and one script can
 * apply a whole document atomically, unchanged on a Cluster.
 */
/** The catalog hash: `version`, `catalog` (features, plans, plan versions) and `index` (JSON). */
export function catalogKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:catalog`
}

/** One customer's hash: `src` and `doc` (JSON) and the access flags. */
export function customerKey(projectId: string, customerId: string): string {
  return `${PREFIX}${projectTag(projectId)}:c:${customerId}`
}

/** The access flags stored in a customer's hash (absent fields: not set). */
export function flagsOf(hash: Record<string, string>): AccessFlags {
  return {
    customerDisabled: hash.customerDisabled === '1',
    customerUsageLimitReached: hash.customerUsageLimitReached === '1',
    subscriptionStatus: (hash.subscriptionStatus as SubscriptionStatus | undefined) ?? null,
  }
}
