import { PREFIX, projectTag } from '../infra/redis/keys.js'

/**
 * Every Redis key of entitlement usage, built in one place. All carry the project's catalog hash
 * tag `{cat:<projectId>}`: a script counts usage, reads the customer and (runs) moves wallet
 * money in one Cluster slot, atomically.
 */
/**
 * A customer's usage counters: field `<featureSlug>` = the feature's counters in its current
 * reset period (the encoding is in lua/includes/entitlementUsage.lua).
 */
export function usageKey(projectId: string, customerId: string): string {
  return `${PREFIX}${projectTag(projectId)}:eu:${customerId}`
}

/**
 * A customer's entitlement state: field `<featureSlug>` = `<deniedUntilMs>` (the end of the reset
 * period) while the feature is denied; absent otherwise. Readers (runs) HGET one field and treat
 * the feature as denied when the value exists and is greater than now.
 */
export function entitlementStateKey(projectId: string, customerId: string): string {
  return `${PREFIX}${projectTag(projectId)}:es:${customerId}`
}
