/**
 * Exact decimal money for budgets.
 *
 * Amounts travel as decimal strings ("12.5"), live in TypeScript as BigInt counts of 10^-8
 * ("units"), and reach Lua as two exact doubles: hi = units / 10^14 and lo = units % 10^14.
 * Redis Lua numbers are doubles, so neither half may reach 2^53: the spec's largest amount
 * (19 integer digits, 8 fractional) is below 10^27 units, so hi stays below 10^13 and sums of
 * up to 900 such amounts are still exact; a budget refuses a sum past that (amount_overflow,
 * src/budgets/README.md) rather than round it. Lua adds and compares the pairs with a carry
 * (lua/includes/money.lua); it never multiplies or divides them.
 */

export const SCALE = 8
export const UNITS_PER_ONE = 10n ** BigInt(SCALE)
/** The split point between the two halves that Lua sees. */
export const LO_BASE = 10n ** 14n

/** The spec's amount grammar: 1 to 19 digits, optionally a dot and 1 to 8 fractional digits. */
export const AMOUNT_PATTERN = '^[0-9]{1,19}(\\.[0-9]{1,8})?$'
const amountRe = new RegExp(AMOUNT_PATTERN)

/** Parses a non-negative amount in the spec's grammar; undefined when it does not match. */
export function parseAmount(text: string): bigint | undefined {
  if (!amountRe.test(text)) return undefined
  const dot = text.indexOf('.')
  if (dot < 0) return BigInt(text) * UNITS_PER_ONE
  const fraction = text.slice(dot + 1).padEnd(SCALE, '0')
  return BigInt(text.slice(0, dot)) * UNITS_PER_ONE + BigInt(fraction)
}

/** Canonical decimal string: no leading zeros, no trailing fractional zeros, "-" when negative. */
export function formatUnits(units: bigint): string {
  // String work instead of BigInt division: a balance formats a dozen amounts per answer.
  const negative = units < 0n
  const digits = (negative ? -units : units).toString().padStart(SCALE + 1, '0')
  const whole = digits.slice(0, -SCALE)
  let end = digits.length
  while (end > whole.length && digits.charCodeAt(end - 1) === 48) end--
  const text = end > whole.length ? `${whole}.${digits.slice(whole.length, end)}` : whole
  return negative ? '-' + text : text
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * A ledger integer (scale 8) as the spec's JSON integer: a number while it is exact as one
 * (|x| ≤ 2^53 − 1, about 90 million currency units), past that the same integer as a string of
 * digits, so an amount is never rounded on its way out. Wallet and invoice amounts both use it.
 */
export function ledgerJson(units: bigint): number | string {
  const abs = units < 0n ? -units : units
  return abs <= MAX_SAFE ? Number(units) : units.toString()
}

/** The two halves Lua works with. Both are exact doubles for any non-negative units below 2^53·10^14. */
export function toPair(units: bigint): [hi: number, lo: number] {
  if (units < 0n) throw new RangeError('money pairs are non-negative')
  return [Number(units / LO_BASE), Number(units % LO_BASE)]
}

/** Reassembles a pair read back from Redis (integers, possibly as strings). */
export function fromPair(hi: number | string, lo: number | string): bigint {
  return BigInt(hi) * LO_BASE + BigInt(lo)
}
