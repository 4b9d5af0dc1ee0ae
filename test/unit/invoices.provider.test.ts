// The provider boundary of invoices (src/invoices/README.md, "Rounding"): an invoice's amount_due,
// exact at ledger scale 8, becomes currency minor units once, half to even, when it is handed to
// a payment provider; nothing before rounds.
import { describe, expect, test } from 'vitest'
import { providerCharge } from '../../src/invoices/service.js'

const charge = (amount_due: string, currency = 'USD') => providerCharge({ amount_due, currency })

describe('providerCharge: amount_due (ledger scale 8) → minor units, half to even, once', () => {
  test.each([
    ['1300400000', 1300n], // $13.004 → 1300 cents
    ['246913578', 247n], // $2.46913578 → 247
    ['18200000000', 18200n], // $182 → 18200
    ['12500000', 12n], // $0.125: a tie → the even cent
    ['13500000', 14n], // $0.135: a tie → the even cent
    ['12500001', 13n], // just past the tie
    ['49999999', 50n],
    ['1', 0n], // 10^-8 of a dollar
    ['123456789012345678951234567', 123456789012345678951n], // past 2^53: exact
  ])('%s → %s cents', (due, cents) => {
    expect(charge(due)).toEqual({ amountMinor: cents, currency: 'USD', exponent: 2 })
  })

  test('EUR has 2 minor digits too; nothing due or a credit charges 0', () => {
    expect(charge('250000000', 'EUR')).toEqual({ amountMinor: 250n, currency: 'EUR', exponent: 2 })
    expect(charge('0').amountMinor).toBe(0n)
    expect(charge('-500000000').amountMinor).toBe(0n)
  })
})
