import { customerKey } from '../catalog/keys.js'
import { flagsOf } from '../catalog/keys.js'
import type { AccessFlags, CustomerView } from '../catalog/types.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { usageKey } from './keys.js'

/** Storage adapter of entitlement usage (src/entitlements/README.md): one round trip per function. */
const scripts = {
  read: new Script('readEntitlementUsage-2'),
}

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
