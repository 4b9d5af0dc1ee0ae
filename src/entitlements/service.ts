import type { Clock } from '../kernel/clock.js'
import { failure, success, type Result } from '../kernel/errors.js'
import { parseAmount } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { entitlementStateKey } from './keys.js'
import { checkEntitlement, readCustomerViews, type EntitlementUsageResult } from './redis.js'
import { prepareEntitlementUsage, type EntitlementMode } from './usage.js'

/**
 * Entitlement checks on the hot path (src/entitlements/README.md). Usage of raw events is
 * counted by the ingest worker's claim (lua/claimEvents-N.lua); this service offers the
 * synchronous check-and-count (lua/checkEntitlement-2.lua, through the include a runs script
 * calls too) and the denied state the run paths read.
 */
export class EntitlementService {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
  ) {}

  /**
   * Checks `amount` (a decimal string) of a feature for a customer at now, and in mode `count`
   * counts it when the overage strategy allows it. 404 customer_not_found; 403 customer_disabled;
   * 404 entitlement_not_found when no entitlement to the feature is in effect; 400 for an amount
   * that is not a non-negative decimal.
   */
  async check(projectId: string, customerId: string, featureSlug: string, amount: string, mode: EntitlementMode = 'count'): Promise<Result<EntitlementUsageResult>> {
    const units = parseAmount(amount)
    if (units === undefined) return failure('invalid', 'invalid_request', 'amount must be a non-negative decimal with at most 8 fractional digits.')
    const now = this.clock()
    const customer = (await readCustomerViews(this.redis, projectId, [customerId])).get(customerId)
    if (!customer) return failure('not_found', 'customer_not_found', `Customer ${customerId} does not exist in this project.`)
    if (customer.flags.customerDisabled) return failure('forbidden', 'customer_disabled', `Customer ${customerId} is disabled (POST /v1/access/update).`)
    const call = prepareEntitlementUsage(projectId, customer, featureSlug, units, now, mode)
    if (!call) return failure('not_found', 'entitlement_not_found', `Customer ${customerId} has no entitlement to ${featureSlug} in effect now.`)
    return success(await checkEntitlement(this.redis, call))
  }

  /** Whether a feature is denied for a customer now: one HGET of the state hash (the contract the run paths use). */
  async isDenied(projectId: string, customerId: string, featureSlug: string): Promise<boolean> {
    const until = await this.redis.hget(entitlementStateKey(projectId, customerId), featureSlug)
    return until !== null && Number(until) > this.clock()
  }
}
