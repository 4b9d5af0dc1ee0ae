// Wallet amounts (src/wallet/README.md, "Balance"): the spec's Amount of a ledger integer at
// scale 8, exact on both sides of 2^53, and the display form for people.
import { describe, expect, it } from 'vitest'
import { quantityOf } from '../../src/runs/pricing.js'
import { displayAmount, toAmount } from '../../src/wallet/service.js'

describe('toAmount', () => {
  it.each([
    [0n, 'USD', { ledger_amount: 0, amount: '0', currency: 'USD', display_amount: '$0.00' }],
    [1_250_000_000n, 'USD', { ledger_amount: 1_250_000_000, amount: '12.5', currency: 'USD', display_amount: '$12.50' }],
    [1n, 'EUR', { ledger_amount: 1, amount: '0.00000001', currency: 'EUR', display_amount: '€0.00000001' }],
    [123_456_700_000_000n, 'USD', { ledger_amount: 123_456_700_000_000, amount: '1234567', currency: 'USD', display_amount: '$1,234,567.00' }],
    // 2^53 − 1 is the last exact JSON number; one more is a string of digits.
    [
      9_007_199_254_740_991n,
      'USD',
      { ledger_amount: 9_007_199_254_740_991, amount: '90071992.54740991', currency: 'USD', display_amount: '$90,071,992.54740991' },
    ],
    [
      9_007_199_254_740_992n,
      'USD',
      { ledger_amount: '9007199254740992', amount: '90071992.54740992', currency: 'USD', display_amount: '$90,071,992.54740992' },
    ],
    [-150_000_000n, 'USD', { ledger_amount: -150_000_000, amount: '-1.5', currency: 'USD', display_amount: '-$1.50' }],
  ])('%s %s', (ledger, currency, expected) => {
    expect(toAmount(ledger, currency)).toEqual(expected)
  })

  it('shows every digit the amount has, and at least the minor ones', () => {
    expect(displayAmount(100_000n, 'USD')).toBe('$0.001')
    expect(displayAmount(100_000_000n, 'EUR')).toBe('€1.00')
  })
})

describe('quantityOf (a run event under its meter)', () => {
  const meter = (aggregationMethod: 'count' | 'sum' | 'max' | 'latest') => ({
    eventId: 'e',
    eventSlug: 's',
    aggregationMethod,
    aggregationField: 'n',
    filters: {},
    groupBy: [],
    windowSize: 'MINUTE' as const,
  })
  it('count → 1; sum → the property, number or decimal text, exactly', () => {
    expect(quantityOf(meter('count'), undefined)).toBe(100_000_000n)
    expect(quantityOf(meter('sum'), { n: 2.5 })).toBe(250_000_000n)
    expect(quantityOf(meter('max'), { n: '0.00000001' })).toBe(1n)
    expect(quantityOf(meter('latest'), { n: 0 })).toBe(0n)
  })
  it.each([[{}], [{ n: -1 }], [{ n: '1e3' }], [{ n: '0.000000001' }], [{ n: Number.NaN }], [{ n: true }]])(
    'refuses %j with the property path',
    (properties) => {
      expect(quantityOf(meter('sum'), properties)).toEqual({ path: '$.properties.n', message: expect.any(String) })
    },
  )
})
