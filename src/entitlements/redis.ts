import { customerKey } from '../catalog/keys.js'
import { flagsOf } from '../catalog/redis.js'
import type { AccessFlags, CustomerView } from '../catalog/types.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { usageKey } from './keys.js'
import type { EntitlementUsageCall } from './usage.js'

/** Storage adapter of entitlement usage (src/entitlements/README.md): one round trip per function. */
const scripts = {
  read: new Script('readEntitlementUsage-2'),
  check: new Script('checkEntitlement-2'),
}
export const entitlementScripts: readonly Script[] = Object.values(scripts)

export interface CustomerWithUsage {
  view: CustomerView
  flags: AccessFlags
  /** The usage hash: field = feature slug, value = its stored counters. */
  usage: Record<string, string>
}

const toRecord = (flat: string[]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!
  return out
}

/**
 * A customer's read document, access flags and usage counters in one call
 * (lua/readEntitlementUsage-2.lua): one snapshot, one round trip. undefined: no such customer.
 */
export async function readCustomerWithUsage(redis: RedisClient, projectId: string, customerId: string): Promise<CustomerWithUsage | undefined> {
  const [customer, usage] = (await scripts.read.run(redis, [customerKey(projectId, customerId), usageKey(projectId, customerId)], [])) as [string[], string[]]
  const hash = toRecord(customer)
  if (hash.doc === undefined) return undefined
  return { view: JSON.parse(hash.doc) as CustomerView, flags: flagsOf(hash), usage: toRecord(usage) }
}

/** Read documents and access flags of some customers (no `src`), in one pipelined round trip. */
export async function readCustomerViews(redis: RedisClient, projectId: string, customerIds: string[]): Promise<Map<string, { view: CustomerView; flags: AccessFlags }>> {
  const out = new Map<string, { view: CustomerView; flags: AccessFlags }>()
  if (customerIds.length === 0) return out
  const pipeline = redis.pipeline()
  for (const id of customerIds) pipeline.hmget(customerKey(projectId, id), 'doc', 'customerDisabled', 'customerUsageLimitReached', 'subscriptionStatus')
  const replies = (await pipeline.exec()) ?? []
  replies.forEach(([error, value], i) => {
    if (error) throw error
    const [doc, customerDisabled, customerUsageLimitReached, subscriptionStatus] = value as (string | null)[]
    if (!doc) return
    const hash: Record<string, string> = {}
    if (customerDisabled) hash.customerDisabled = customerDisabled
    if (customerUsageLimitReached) hash.customerUsageLimitReached = customerUsageLimitReached
    if (subscriptionStatus) hash.subscriptionStatus = subscriptionStatus
    out.set(customerIds[i]!, { view: JSON.parse(doc) as CustomerView, flags: flagsOf(hash) })
  })
  return out
}

export interface EntitlementUsageResult {
  allowed: boolean
  reason: 'counted' | 'unchanged' | 'checked' | 'denied' | 'period_closed'
  /** Usage counted against the grants in effect, and their allowances, in units of 10^-8. */
  usedUnits: bigint
  limitUnits: bigint
  /** The period's end while the feature is denied after the call, else 0. */
  deniedUntilMs: number
}

/** Parses the reply of entitlementUsage (a script that returns it as is). */
export function entitlementUsageResult(reply: unknown[]): EntitlementUsageResult {
  const [allowed, reason, used, limit, until] = reply as [number, EntitlementUsageResult['reason'], string, string, number]
  return { allowed: allowed === 1, reason, usedUnits: BigInt(used), limitUnits: BigInt(limit), deniedUntilMs: Number(until) }
}

/** Checks, and in mode count counts, through lua/checkEntitlement-2.lua. */
export async function checkEntitlement(redis: RedisClient, call: EntitlementUsageCall): Promise<EntitlementUsageResult> {
  return entitlementUsageResult(await scripts.check.run(redis, [...call.keys], call.args))
}
