import type { Currency, Price } from './schemas.js'

/**
 * Prices as the catalog keeps them: dinero.js snapshots (an integer amount and a scale), built
 * from the document's decimal strings without ever going through a float.
 */

export const CURRENCIES: Record<Currency, { symbol: string; exponent: number }> = {
  USD: { symbol: '$', exponent: 2 },
  EUR: { symbol: '€', exponent: 2 },
}

/** The exact value of a price: an integer count of 10^-scale. */
interface Exact {
  amount: bigint
  scale: number
}

function parseDecimal(text: string): Exact {
  const [whole, fraction = ''] = text.split('.') as [string, string?]
  const trimmed = fraction.replace(/0+$/, '')
  return { amount: BigInt(whole + trimmed), scale: trimmed.length }
}

function rescale(value: Exact, scale: number): bigint {
  return value.amount * 10n ** BigInt(scale - value.scale)
}

/**
 * The dinero snapshot of a decimal price, at the currency's exponent or finer when the price has
 * more digits ("0.002" USD: amount 2, scale 3). undefined when the amount does not fit a JSON
 * number exactly (2^53).
 */
export function toPrice(text: string, currency: Currency): Price | undefined {
  const { exponent } = CURRENCIES[currency]
  const parsed = parseDecimal(text)
  const scale = Math.max(exponent, parsed.scale)
  const amount = rescale(parsed, scale)
  if (amount > BigInt(Number.MAX_SAFE_INTEGER)) return undefined
  return {
    dinero: { amount: Number(amount), currency: { code: currency, base: 10, exponent }, scale },
    displayAmount: formatMoney({ amount, scale }, currency),
  }
}

/** "$1,234.5" → "$1,234.50"; whole amounts without decimals ("$49"). For people: descriptions, flatPrice. */
function formatMoney(value: Exact, currency: Currency): string {
  const { whole, fraction } = decimalParts(value, CURRENCIES[currency].exponent)
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  return `${CURRENCIES[currency].symbol}${fraction === '' ? grouped : `${grouped}.${fraction}`}`
}

/** The digits of a value: whole amounts without a fraction, else at least `exponent` fractional digits. */
function decimalParts(value: Exact, exponent: number): { whole: string; fraction: string } {
  const digits = value.amount.toString().padStart(value.scale + 1, '0')
  const whole = digits.slice(0, digits.length - value.scale)
  let fraction = digits.slice(digits.length - value.scale).replace(/0+$/, '')
  if (fraction !== '' && fraction.length < exponent) fraction = fraction.padEnd(exponent, '0')
  return { whole, fraction }
}

/**
 * A price as answered (README.md, "Shapes"): `displayAmount` is the plain decimal of its dinero
 * snapshot, as the peer API sends it ("20", "0.002", "20.50"), with no symbol or grouping. The
 * catalog keeps the formatted text ("$20") for invoice line descriptions and displayFeatureText.
 */
export function priceAnswer(price: Price): Price {
  const { amount, scale, currency } = price.dinero
  const { whole, fraction } = decimalParts({ amount: BigInt(amount), scale }, currency.exponent)
  return { dinero: price.dinero, displayAmount: fraction === '' ? whole : `${whole}.${fraction}` }
}

/** Sum of prices, each times a quantity, formatted in the currency ("$0" for none). */
export function formatSum(terms: { price: Price; quantity: number }[], currency: Currency): string {
  const scale = Math.max(CURRENCIES[currency].exponent, ...terms.map((t) => t.price.dinero.scale))
  let amount = 0n
  for (const { price, quantity } of terms) amount += rescale({ amount: BigInt(price.dinero.amount), scale: price.dinero.scale }, scale) * BigInt(quantity)
  return formatMoney({ amount, scale }, currency)
}
