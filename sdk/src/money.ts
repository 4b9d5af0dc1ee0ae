// Amounts are decimal strings on the wire and BigInt units of 10^-8 inside: never a float.

const SCALE = 8
const DECIMAL = /^[0-9]{1,19}(\.[0-9]{1,8})?$/

/** Whether `amount` is what the gateway takes: 1 to 19 digits, optionally a dot and 1 to 8 fractional digits. */
export function isAmount(amount: unknown): amount is string {
  return typeof amount === 'string' && DECIMAL.test(amount)
}

/** A decimal amount in units of 10^-8. */
export function toUnits(amount: string): bigint {
  if (!isAmount(amount)) throw new TypeError(`not a decimal amount: ${JSON.stringify(amount)} (1 to 19 digits, optionally a dot and 1 to 8 fractional digits)`)
  const [whole, fraction = ''] = amount.split('.')
  return BigInt(whole!) * 10n ** BigInt(SCALE) + BigInt(fraction.padEnd(SCALE, '0'))
}

/** Units of 10^-8 as the shortest decimal string ("1.5", "0.00000001", "3"). */
export function fromUnits(units: bigint): string {
  const sign = units < 0n ? '-' : ''
  const abs = units < 0n ? -units : units
  const base = 10n ** BigInt(SCALE)
  const whole = abs / base
  const fraction = (abs % base).toString().padStart(SCALE, '0').replace(/0+$/, '')
  return `${sign}${whole}${fraction ? `.${fraction}` : ''}`
}
