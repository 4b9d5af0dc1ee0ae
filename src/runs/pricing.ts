import { rate, toQuantityUnits } from '../billing/rating.js'
import type { Entitlement } from '../catalog/schemas.js'
import type { Issue } from '../kernel/errors.js'
import { UNITS_PER_ONE } from '../kernel/money.js'

/**
 * How a run prices one metered event (src/runs/README.md, "Pricing"), from the customer's
 * entitlement to the feature: the quantity from the feature's meter, the cost with the plan
 * feature's price (src/billing/rating.ts), exactly at ledger scale 8.
 */
export interface FeaturePricing {
  currency: string
  /** Unit and flat prices: an event's cost does not depend on what the run used before. */
  linear: boolean
  meter: Entitlement['featurePlanVersion']['meterConfig']
  /** Cost at ledger scale 8 of a quantity (units of 10^-8) from the first unit. */
  cost(quantity: bigint): bigint
}

export function pricingOf(e: Entitlement): FeaturePricing {
  const fpv = e.featurePlanVersion
  const config = fpv.config
  const price = config.price ?? config.tiers?.[0]?.unitPrice
  const linear = fpv.featureType === 'flat' || (fpv.featureType === 'usage' && config.usageMode === 'unit')
  return {
    currency: price?.dinero.currency.code ?? 'USD',
    linear,
    meter: fpv.meterConfig,
    cost: (quantity) => rate({ featureType: fpv.featureType, config, quantity }).amount,
  }
}

const DECIMAL = /^[0-9]+(\.[0-9]{1,8})?$/

/**
 * The quantity of one event under the feature's meter, in units of 10^-8: 1 for `count`, else
 * the event's `properties[aggregationField]` (a non-negative number or decimal string with at
 * most 8 fractional digits; `max` and `latest` meters are priced like `sum`, each event for its
 * own value). An Issue when the property is missing or not such a number.
 */
export function quantityOf(meter: FeaturePricing['meter'], properties: Record<string, unknown> | undefined): bigint | Issue {
  if (meter.aggregationMethod === 'count') return UNITS_PER_ONE
  const field = meter.aggregationField
  const value = properties?.[field]
  const text = typeof value === 'number' && Number.isFinite(value) && value >= 0 ? String(value) : typeof value === 'string' ? value : undefined
  if (text === undefined || !DECIMAL.test(text)) {
    return {
      path: `$.properties.${field}`,
      message: `the feature's meter sums properties.${field}: a non-negative number with at most 8 fractional digits is needed`,
    }
  }
  return toQuantityUnits(text)
}
