/**
 * Get usage (spec 4.7, 2.7): the range's time window and the shaping of the store's aggregated
 * rows into Usage rows. Pure: the caller queries the store and prices the usage (a callback, so
 * this module knows nothing of the catalog). Money stays a decimal string (BigInt inside).
 */

export const USAGE_RANGES = ['24h', '7d', '30d', '90d'] as const
export type UsageRange = (typeof USAGE_RANGES)[number]

const HOUR_MS = 3_600_000
export const RANGE_MS: Record<UsageRange, number> = {
  '24h': 24 * HOUR_MS,
  '7d': 7 * 24 * HOUR_MS,
  '30d': 30 * 24 * HOUR_MS,
  '90d': 90 * 24 * HOUR_MS,
}

export function isUsageRange(value: unknown): value is UsageRange {
  return typeof value === 'string' && (USAGE_RANGES as readonly string[]).includes(value)
}

/** The range as a half-open window [from, to) ending at `now` (epoch ms): events with from ≤ ts < to. */
export function usageWindow(range: UsageRange, now: number): { from: number; to: number } {
  const span = RANGE_MS[range]
  if (span === undefined) throw new RangeError(`unknown usage range: ${String(range)}`)
  return { from: now - span, to: now }
}

export interface Spending {
  /** Canonical decimal string: no leading zeros, no trailing fractional zeros ("12.5", "0"). */
  amount: string
  currency: string
  display_amount: string
}

export interface UsageRow {
  project_id: string
  feature_slug: string
  /** Accepted usage: what is billed and priced. */
  usage: number
  /** Usage an entitlement refused in the range (stored, never billed); 0 when none. */
  refused: number
  spending: Spending
  customer_id: string
}

/** What the pricing callback answers: the amount as a decimal string; display computed when absent. */
export interface PricedUsage {
  amount: string
  currency: string
  display_amount?: string
}

/** A row as the store aggregates it. ClickHouse answers 64-bit numbers as strings; both are taken. */
export interface AggregatedUsage {
  feature_slug: string
  usage: number | string
  /** Refused usage (src/events/README.md); none when absent. */
  refused?: number | string
}

/** `exact` is the usage as an exact decimal string (money is rated from it, never from the number). */
export type PriceUsage = (row: { feature_slug: string; usage: number; exact: string }) => PricedUsage | null | undefined

export const ZERO_SPENDING: Readonly<Spending> = Object.freeze({ amount: '0', currency: 'USD', display_amount: '$0' })

const DECIMAL = /^(-)?([0-9]+)(?:\.([0-9]+))?$/

/** An exact decimal: digits · 10^-scale. */
interface Exact {
  units: bigint
  scale: number
}

export function parseDecimal(text: string): Exact {
  const m = DECIMAL.exec(text)
  if (!m) throw new RangeError(`not a decimal string: ${JSON.stringify(text)}`)
  const fraction = (m[3] ?? '').replace(/0+$/, '')
  const units = BigInt((m[2] ?? '0') + fraction)
  return { units: m[1] ? -units : units, scale: fraction.length }
}

/** Canonical text of a decimal: "012.50" → "12.5", "-0.0" → "0". */
export function canonicalDecimal(text: string): string {
  return formatExact(parseDecimal(text))
}

function formatExact({ units, scale }: Exact): string {
  const negative = units < 0n
  const digits = (negative ? -units : units).toString().padStart(scale + 1, '0')
  const whole = digits.slice(0, digits.length - scale)
  const fraction = digits.slice(digits.length - scale).replace(/0+$/, '')
  const text = fraction === '' ? whole : `${whole}.${fraction}`
  return negative && text !== '0' ? `-${text}` : text
}

/** Sum of decimal strings, exactly. */
export function addDecimals(a: string, b: string): string {
  const x = parseDecimal(a)
  const y = parseDecimal(b)
  const scale = Math.max(x.scale, y.scale)
  const units = x.units * 10n ** BigInt(scale - x.scale) + y.units * 10n ** BigInt(scale - y.scale)
  return formatExact({ units, scale })
}

const CURRENCIES: Record<string, { symbol: string; exponent: number }> = {
  USD: { symbol: '$', exponent: 2 },
  EUR: { symbol: '€', exponent: 2 },
}

/**
 * "$1,234.50", "$0", "$0.002" (finer than cents kept), "-$3"; unknown currencies as "12.5 GBP".
 * Like the catalog's prices: whole amounts without decimals, otherwise at least the currency's
 * exponent.
 */
export function displayAmount(amount: string, currency: string): string {
  const canonical = canonicalDecimal(amount)
  const negative = canonical.startsWith('-')
  const [whole = '0', fraction = ''] = (negative ? canonical.slice(1) : canonical).split('.')
  const known = CURRENCIES[currency]
  if (!known) return `${canonical} ${currency}`
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  const frac = fraction === '' ? '' : `.${fraction.padEnd(known.exponent, '0')}`
  return `${negative ? '-' : ''}${known.symbol}${grouped}${frac}`
}

function toUsageNumber(value: number | string, slug: string): number {
  const n = typeof value === 'number' ? value : Number(value)
  if (!Number.isFinite(n)) throw new RangeError(`usage of ${slug} is not a number: ${String(value)}`)
  return n
}

function spendingOf(priced: PricedUsage | null | undefined): Spending {
  if (!priced) return { ...ZERO_SPENDING }
  const amount = canonicalDecimal(priced.amount)
  return { amount, currency: priced.currency, display_amount: priced.display_amount ?? displayAmount(amount, priced.currency) }
}

/**
 * Aggregated rows → Usage rows (2.7), one per feature (rows of the same feature are summed, the
 * refused usage apart and never priced), sorted by feature slug. `price` gives the spending of a feature's usage; without it, or when
 * it answers null, spending is zero in USD.
 */
export function shapeUsageRows(input: { projectId: string; customerId: string; rows: AggregatedUsage[]; price?: PriceUsage }): UsageRow[] {
  // Summed exactly as decimal strings: the number the spec's row carries is made from the total.
  const totals = new Map<string, { exact: string; refused: string }>()
  for (const row of input.rows) {
    toUsageNumber(row.usage, row.feature_slug)
    const refused = row.refused ?? '0'
    toUsageNumber(refused, row.feature_slug)
    const total = totals.get(row.feature_slug) ?? { exact: '0', refused: '0' }
    totals.set(row.feature_slug, { exact: addDecimals(total.exact, String(row.usage)), refused: addDecimals(total.refused, String(refused)) })
  }
  return [...totals]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([feature_slug, { exact, refused }]) => {
      const usage = Number(exact)
      return {
        project_id: input.projectId,
        feature_slug,
        usage,
        refused: Number(refused),
        spending: spendingOf(input.price?.({ feature_slug, usage, exact })),
        customer_id: input.customerId,
      }
    })
}
