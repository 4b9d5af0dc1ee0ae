import type { FeatureConfig, FeatureType, Price, Tier } from '../catalog/schemas.js'
import { SCALE, UNITS_PER_ONE } from '../kernel/money.js'

/**
 * Rating: the exact price of a quantity for a period under a feature plan version's config
 * (README.md in this folder, with worked examples). BigInt throughout, never a float.
 *
 * - Quantities are counts of 10^-8 ("units", like the budgets' money): a decimal string is parsed
 *   exactly, a bigint is taken as units already.
 * - Prices are the catalog's dinero snapshots (amount · 10^-scale). Each line is computed exactly
 *   at an internal scale (8 for the quantity + the finest price scale, at least 8), the lines are
 *   summed exactly, and the total is rounded ONCE to ledger scale 8, half to even. A price with
 *   scale ≤ 8 times a whole quantity is exact at scale 8, so no rounding happens in that case.
 * - Lines show their own amount rounded the same way (half to even) for reading; `exact` keeps
 *   the value the total was summed from, so the lines' rounded amounts may differ from `amount`
 *   by at most half a 10^-8 per line. Nothing else ever rounds.
 * - toMinorUnits() is the provider boundary: ledger scale 8 → currency minor units, half to even.
 */

/** An exact decimal: units · 10^-scale. */
export interface Exact {
  units: bigint
  scale: number
}

export interface RatingLine {
  description: string
  /** Quantity of the line in units of 10^-8 (1 unit of the feature = 100000000). */
  quantity: bigint
  /** Price of one unit at ledger scale 8 (rounded half to even when the price is finer). */
  unitAmount: bigint
  /** Amount of the line at ledger scale 8 (rounded half to even from `exact`). */
  amount: bigint
  /** The line's exact amount, before any rounding. */
  exact: Exact
}

export interface Rating {
  /** Total at ledger scale 8: the exact sum of the lines rounded once, half to even. */
  amount: bigint
  /** The exact total before that rounding. */
  exact: Exact
  lines: RatingLine[]
}

export interface RateInput {
  featureType: FeatureType
  config: FeatureConfig
  /** Decimal string ("1500.5") or units at scale 8 (1500.5 → 150050000000n). */
  quantity: string | bigint
  /** Units given without charge, subtracted from the quantity before pricing (same forms). */
  includedUnits?: string | bigint
}

const QUANTITY = /^([0-9]+)(?:\.([0-9]{1,8}))?$/

/** A non-negative quantity in units of 10^-8: a decimal string (at most 8 fractional digits) or a bigint of units. Never a float. */
export function toQuantityUnits(value: string | bigint): bigint {
  if (typeof value === 'bigint') {
    if (value < 0n) throw new RangeError(`negative quantity: ${value}`)
    return value
  }
  const m = QUANTITY.exec(value)
  if (!m) throw new RangeError(`not a quantity (decimal, at most 8 fractional digits): ${JSON.stringify(value)}`)
  return BigInt(m[1]!) * UNITS_PER_ONE + BigInt((m[2] ?? '').padEnd(SCALE, '0'))
}

/** The exact value of a dinero snapshot. */
export function priceOf(price: Price): Exact {
  const { amount, scale } = price.dinero
  if (!Number.isSafeInteger(amount) || !Number.isInteger(scale) || scale < 0) throw new RangeError(`not an exact price: ${JSON.stringify(price.dinero)}`)
  return { units: BigInt(amount), scale }
}

/** A price at ledger scale 8: amount · 10^(8 − scale), exact when scale ≤ 8, else rounded half to even. */
export function toLedgerAmount(price: Price): bigint {
  return rescale(priceOf(price), SCALE)
}

/** Divides and rounds half to even (the quotient of n / d, d > 0). */
function divHalfEven(n: bigint, d: bigint): bigint {
  if (d <= 0n) throw new RangeError('divisor must be positive')
  const negative = n < 0n
  const a = negative ? -n : n
  let q = a / d
  const r2 = (a % d) * 2n
  if (r2 > d || (r2 === d && q % 2n === 1n)) q += 1n
  return negative ? -q : q
}

/** An exact value at another scale: exact when finer, rounded half to even when coarser. */
function rescale(value: Exact, scale: number): bigint {
  if (scale >= value.scale) return value.units * 10n ** BigInt(scale - value.scale)
  return divHalfEven(value.units, 10n ** BigInt(value.scale - scale))
}

/**
 * The provider boundary: a ledger amount (scale 8) in currency minor units (exponent 2 for USD:
 * cents), rounded half to even (banker's rounding: 0.125 → 12 cents, 0.135 → 14, 0.12500001 →
 * 13). The one place an amount is rounded to what a payment provider can charge.
 */
export function toMinorUnits(ledgerAmount: bigint, exponent: number): bigint {
  if (!Number.isInteger(exponent) || exponent < 0) throw new RangeError(`not a currency exponent: ${exponent}`)
  return rescale({ units: ledgerAmount, scale: SCALE }, exponent)
}

/** The amount of a quantity (units at scale 8) at a price, exactly: scale 8 + the price's scale. */
function times(quantity: bigint, price: Exact): Exact {
  return { units: quantity * price.units, scale: SCALE + price.scale }
}

function formatQuantity(units: bigint): string {
  const digits = units.toString().padStart(SCALE + 1, '0')
  const whole = digits.slice(0, -SCALE).replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  const fraction = digits.slice(-SCALE).replace(/0+$/, '')
  return fraction === '' ? whole : `${whole}.${fraction}`
}

function line(description: string, quantity: bigint, price: Price, exact: Exact): RatingLine {
  return { description, quantity, unitAmount: toLedgerAmount(price), amount: rescale(exact, SCALE), exact }
}

function perUnit(label: string, quantity: bigint, price: Price): RatingLine {
  return line(`${label}: ${formatQuantity(quantity)} × ${price.displayAmount}`, quantity, price, times(quantity, priceOf(price)))
}

function flatFee(label: string, price: Price): RatingLine {
  return line(`${label}: flat ${price.displayAmount}`, UNITS_PER_ONE, price, priceOf(price))
}

function need<T>(value: T | undefined | null, what: string): T {
  if (value === undefined || value === null) throw new RangeError(`pricing config without ${what}`)
  return value
}

function packageLines(config: FeatureConfig, quantity: bigint): RatingLine[] {
  const price = need(config.price, 'price')
  const size = need(config.units, 'units')
  if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`package units must be a positive integer: ${size}`)
  const perPackage = BigInt(size) * UNITS_PER_ONE
  const packages = (quantity + perPackage - 1n) / perPackage
  if (packages === 0n) return []
  const count = packages * UNITS_PER_ONE
  return [
    line(
      `${formatQuantity(packages * UNITS_PER_ONE)} package(s) of ${size} (${formatQuantity(quantity)} used) × ${price.displayAmount}`,
      count,
      price,
      times(count, priceOf(price)),
    ),
  ]
}

/** The tier's bounds in units: (start, end] with start = (firstUnit − 1) · 10^8, end null when open. */
function bounds(tier: Tier, last: boolean): { start: bigint; end: bigint | null } {
  if (!Number.isSafeInteger(tier.firstUnit) || tier.firstUnit < 1) throw new RangeError(`tier firstUnit must be a positive integer: ${tier.firstUnit}`)
  if (tier.lastUnit !== null && (!Number.isSafeInteger(tier.lastUnit) || tier.lastUnit < tier.firstUnit))
    throw new RangeError(`tier lastUnit out of order: ${tier.lastUnit}`)
  // The last tier takes every unit past it, even when it names a lastUnit (no quantity is unpriced).
  return { start: BigInt(tier.firstUnit - 1) * UNITS_PER_ONE, end: last || tier.lastUnit === null ? null : BigInt(tier.lastUnit) * UNITS_PER_ONE }
}

function tierLabel(tier: Tier, index: number): string {
  const range = `${tier.firstUnit}-${tier.lastUnit ?? '∞'}`
  return tier.label ? `Tier ${index + 1} (${tier.label}, ${range})` : `Tier ${index + 1} (${range})`
}

function tierLines(config: FeatureConfig, quantity: bigint): RatingLine[] {
  const tiers = need(config.tiers, 'tiers')
  const mode = need(config.tierMode, 'tierMode')
  if (tiers.length === 0) throw new RangeError('pricing config with no tiers')
  if (quantity === 0n) return []
  const lines: RatingLine[] = []
  if (mode === 'volume') {
    // Every unit at the tier the total falls in: start < quantity ≤ end.
    const index = tiers.findIndex((t, i) => {
      const b = bounds(t, i === tiers.length - 1)
      return quantity > b.start && (b.end === null || quantity <= b.end)
    })
    if (index < 0) throw new RangeError(`quantity ${formatQuantity(quantity)} falls in no tier (tiers start at 1, without gaps)`)
    const tier = tiers[index]!
    lines.push(perUnit(tierLabel(tier, index), quantity, tier.unitPrice))
    if (tier.flatPrice.dinero.amount !== 0) lines.push(flatFee(tierLabel(tier, index), tier.flatPrice))
    return lines
  }
  // graduated: each unit at its own tier; each touched tier adds its flat price once.
  let covered = 0n
  tiers.forEach((tier, index) => {
    const b = bounds(tier, index === tiers.length - 1)
    if (quantity <= b.start) return
    const upTo = b.end === null || quantity < b.end ? quantity : b.end
    const inTier = upTo - b.start
    covered = upTo
    lines.push(perUnit(tierLabel(tier, index), inTier, tier.unitPrice))
    if (tier.flatPrice.dinero.amount !== 0) lines.push(flatFee(tierLabel(tier, index), tier.flatPrice))
  })
  if (covered < quantity) throw new RangeError(`quantity ${formatQuantity(quantity)} is not covered by the tiers`)
  return lines
}

function linesOf(featureType: FeatureType, config: FeatureConfig, quantity: bigint): RatingLine[] {
  switch (featureType) {
    case 'flat':
      return quantity === 0n ? [] : [perUnit('Flat', quantity, need(config.price, 'price'))]
    case 'package':
      return packageLines(config, quantity)
    case 'tier':
      return tierLines(config, quantity)
    case 'usage':
      switch (need(config.usageMode, 'usageMode')) {
        case 'unit':
          return quantity === 0n ? [] : [perUnit('Usage', quantity, need(config.price, 'price'))]
        case 'package':
          return packageLines(config, quantity)
        case 'tier':
          return tierLines(config, quantity)
      }
  }
  throw new RangeError(`unknown pricing: ${String(featureType)}`)
}

/**
 * Rates a quantity against a feature plan version's `featureType` and `config`, included units
 * subtracted first (never below zero). The total is the exact sum of the lines rounded once to
 * ledger scale 8, half to even.
 */
export function rate(input: RateInput): Rating {
  const included = input.includedUnits === undefined ? 0n : toQuantityUnits(input.includedUnits)
  const gross = toQuantityUnits(input.quantity)
  const quantity = gross > included ? gross - included : 0n
  const lines = linesOf(input.featureType, input.config, quantity)
  const scale = Math.max(SCALE, ...lines.map((l) => l.exact.scale))
  const units = lines.reduce((sum, l) => sum + l.exact.units * 10n ** BigInt(scale - l.exact.scale), 0n)
  const exact = { units, scale }
  return { amount: rescale(exact, SCALE), exact, lines }
}
