import type { Entitlement, EntitlementReduced } from '../catalog/schemas.js'
import { customerDisabled, customerNotFound } from '../catalog/service.js'
import { entitlementsAt, reduceEntitlement } from '../catalog/views.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import type { Clock } from '../kernel/clock.js'
import { success, type Result } from '../kernel/errors.js'
import { entitlementStateKey } from './keys.js'
import { readCustomerWithUsage } from './redis.js'
import { withUsage } from './usage.js'

/**
 * What a customer is entitled to now, with the usage counted against each entitlement and grant
 * (src/entitlements/README.md). Usage of raw events is counted by the ingest worker's claim
 * (lua/claimEvents-N.lua) and of runs by the consume script, both through the include
 * lua/includes/entitlementUsage.lua; this service reads what they counted.
 */
export class EntitlementService {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
  ) {}

  /** POST /v1/access/entitlements/list: the customer and its usage counters in one call. */
  async listEntitlements(projectId: string, customerId: string): Promise<Result<Entitlement[]>> {
    const customer = await readCustomerWithUsage(this.redis, projectId, customerId)
    if (!customer) return customerNotFound(customerId)
    if (customer.flags.customerDisabled) return customerDisabled(customerId)
    const now = this.clock()
    return success(withUsage(entitlementsAt(customer.view, customer.flags, now), customer.usage, customer.view, now))
  }

  /** POST /v1/entitlements/get: the same entitlements, reduced. */
  async getEntitlements(projectId: string, customerId: string): Promise<Result<EntitlementReduced[]>> {
    const listed = await this.listEntitlements(projectId, customerId)
    return listed.ok ? success(listed.value.map(reduceEntitlement)) : listed
  }

  /** Whether a feature is denied for a customer now: one HGET of the state hash (the contract the run paths use). */
  async isDenied(projectId: string, customerId: string, featureSlug: string): Promise<boolean> {
    const until = await this.redis.hget(entitlementStateKey(projectId, customerId), featureSlug)
    return until !== null && Number(until) > this.clock()
  }
}
