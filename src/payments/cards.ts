/**
 * Test cards the sandbox accepts: the well-known test numbers the big providers publish. Any
 * other number is refused, so a real card number is never typed into (or stored by) the sandbox.
 */
export const TEST_CARD_NUMBERS: ReadonlySet<string> = new Set([
  '4242424242424242',
  '4000056655665556',
  '4111111111111111',
  '4012888888881881',
  '5555555555554444',
  '2223003122003222',
  '5200828282828210',
  '5105105105105100',
  '378282246310005',
  '371449635398431',
  '6011111111111117',
  '6011000990139424',
  '3056930009020004',
  '36227206271667',
  '3566002020360505',
  '6200000000000005',
])

/** The brand a card number's prefix names (IIN ranges); 'unknown' when none matches. */
export function brandOf(number: string): string {
  const two = Number(number.slice(0, 2))
  const four = Number(number.slice(0, 4))
  if (number.startsWith('4')) return 'visa'
  if ((two >= 51 && two <= 55) || (four >= 2221 && four <= 2720)) return 'mastercard'
  if (two === 34 || two === 37) return 'amex'
  if (number.startsWith('6011') || number.startsWith('65') || (four >= 6440 && four <= 6499)) return 'discover'
  if (two === 30 || two === 36 || two === 38 || two === 39) return 'diners'
  if (two === 35) return 'jcb'
  if (two === 62) return 'unionpay'
  return 'unknown'
}

export function luhnValid(number: string): boolean {
  let sum = 0
  for (let i = 0; i < number.length; i++) {
    let digit = number.charCodeAt(number.length - 1 - i) - 48
    if (i % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2
    sum += digit
  }
  return sum % 10 === 0
}

export interface CardForm {
  name: string
  number: string
  expMonth: string
  expYear: string
  cvc: string
}

export interface Card {
  name: string
  last4: string
  brand: string
  expMonth: number
  expYear: number
}

/** A card from the submitted form, or the problems to show next to the form (by field). */
export function checkCard(form: CardForm, now: number): { ok: true; card: Card } | { ok: false; errors: Partial<Record<keyof CardForm, string>> } {
  const errors: Partial<Record<keyof CardForm, string>> = {}
  const name = form.name.trim()
  if (name === '') errors.name = 'Enter the name on the card.'
  else if (name.length > 100) errors.name = 'The name is longer than 100 characters.'
  const number = form.number.replace(/[\s-]/g, '')
  if (!/^\d{12,19}$/.test(number) || !luhnValid(number)) errors.number = 'Enter a valid card number.'
  else if (!TEST_CARD_NUMBERS.has(number)) errors.number = 'The sandbox accepts only test card numbers, such as 4242 4242 4242 4242.'
  const month = /^\d{1,2}$/.test(form.expMonth.trim()) ? Number(form.expMonth) : NaN
  if (!(month >= 1 && month <= 12)) errors.expMonth = 'Enter the expiry month (1–12).'
  const yearText = form.expYear.trim()
  const year = /^\d{2}$/.test(yearText) ? 2000 + Number(yearText) : /^\d{4}$/.test(yearText) ? Number(yearText) : NaN
  const today = new Date(now)
  const thisYear = today.getUTCFullYear()
  if (!(year >= thisYear && year <= thisYear + 20)) errors.expYear = `Enter the expiry year (${thisYear}–${thisYear + 20}).`
  else if (!errors.expMonth && year === thisYear && month < today.getUTCMonth() + 1) errors.expMonth = 'The card has expired.'
  const brand = brandOf(number)
  const cvcLength = brand === 'amex' ? 4 : 3
  if (!new RegExp(`^\\d{${cvcLength}}$`).test(form.cvc.trim())) errors.cvc = `Enter the ${cvcLength}-digit security code.`
  if (Object.keys(errors).length > 0) return { ok: false, errors }
  return { ok: true, card: { name, last4: number.slice(-4), brand, expMonth: month, expYear: year } }
}
