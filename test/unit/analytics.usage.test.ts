// Get usage (spec 4.7, 2.7): range windows, shaping aggregated rows into Usage rows, spending from
// the caller's pricing callback (exact decimals), and the analytics request/response schemas.
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { describe, expect, test } from 'vitest'
import { forecastUsage } from '../../src/analytics/forecast.js'
import { UsageForecastRequest, UsageForecastResponseSchema, UsageGetRequest, UsageGetResponseSchema, horizonDaysOf } from '../../src/analytics/schemas.js'
import {
  USAGE_RANGES,
  addDecimals,
  canonicalDecimal,
  displayAmount,
  isUsageRange,
  shapeUsageRows,
  usageWindow,
  type UsageRange,
} from '../../src/analytics/usage.js'

const NOW = Date.UTC(2026, 10, 22, 3, 17, 5, 123)
const H = 3_600_000

describe('range windows', () => {
  test.each([
    ['24h', 24 * H],
    ['7d', 7 * 24 * H],
    ['30d', 30 * 24 * H],
    ['90d', 90 * 24 * H],
  ] as const)('%s → [now − span, now)', (range, span) => {
    expect(usageWindow(range, NOW)).toEqual({ from: NOW - span, to: NOW })
  })

  test('the ranges and their guard', () => {
    expect(USAGE_RANGES).toEqual(['24h', '7d', '30d', '90d'])
    expect(isUsageRange('7d')).toBe(true)
    expect(isUsageRange('1y')).toBe(false)
    expect(isUsageRange(7)).toBe(false)
    expect(() => usageWindow('1y' as UsageRange, NOW)).toThrow(RangeError)
  })
})

describe('shaping usage rows', () => {
  test('one row per feature, summed, sorted; zero USD spending without a price', () => {
    const rows = shapeUsageRows({
      projectId: 'p1',
      customerId: 'c1',
      rows: [
        { feature_slug: 'tokens', usage: '1500' },
        { feature_slug: 'api-calls', usage: 3 },
        { feature_slug: 'tokens', usage: 500 },
      ],
    })
    expect(rows).toEqual([
      {
        project_id: 'p1',
        feature_slug: 'api-calls',
        usage: 3,
        refused: 0,
        spending: { amount: '0', currency: 'USD', display_amount: '$0' },
        customer_id: 'c1',
      },
      {
        project_id: 'p1',
        feature_slug: 'tokens',
        usage: 2000,
        refused: 0,
        spending: { amount: '0', currency: 'USD', display_amount: '$0' },
        customer_id: 'c1',
      },
    ])
    expect(shapeUsageRows({ projectId: 'p1', customerId: 'c1', rows: [] })).toEqual([])
  })

  test('refused usage is summed apart and never priced', () => {
    const seen: string[] = []
    const rows = shapeUsageRows({
      projectId: 'p1',
      customerId: 'c1',
      rows: [
        { feature_slug: 'api', usage: '8', refused: '5' },
        { feature_slug: 'api', usage: '2', refused: '0.25' },
        { feature_slug: 'other', usage: '0', refused: '3' },
      ],
      price: ({ exact }) => {
        seen.push(exact)
        return { amount: exact, currency: 'USD' }
      },
    })
    expect(rows.map((r) => [r.feature_slug, r.usage, r.refused, r.spending.amount])).toEqual([
      ['api', 10, 5.25, '10'],
      ['other', 0, 3, '0'],
    ])
    expect(seen).toEqual(['10', '0'])
  })

  test('fractional usage is summed exactly and the callback gets the exact decimal, not the float sum', () => {
    const seen: { exact: string; usage: number }[] = []
    shapeUsageRows({
      projectId: 'p1',
      customerId: 'c1',
      rows: [
        { feature_slug: 'gb', usage: '0.1' },
        { feature_slug: 'gb', usage: '0.2' },
      ],
      price: (row) => {
        seen.push(row)
        return null
      },
    })
    // 0.1 + 0.2 as floats is 0.30000000000000004; the exact sum is 0.3.
    expect(seen[0]!.exact).toBe('0.3')
    expect(seen[0]!.usage).toBe(0.3)
  })

  test('the pricing callback gets the summed usage; its amount is canonicalized and displayed', () => {
    const seen: unknown[] = []
    const rows = shapeUsageRows({
      projectId: 'p1',
      customerId: 'c1',
      rows: [
        { feature_slug: 'tokens', usage: 1_234_567 },
        { feature_slug: 'seats', usage: 3 },
        { feature_slug: 'free', usage: 9 },
        { feature_slug: 'euro', usage: 1 },
        { feature_slug: 'custom', usage: 1 },
      ],
      price: (row) => {
        seen.push(row)
        switch (row.feature_slug) {
          case 'tokens':
            return { amount: '2469.134000', currency: 'USD' } // 1,234,567 × 0.002
          case 'seats':
            return { amount: '60', currency: 'USD', display_amount: 'USD 60 (3 seats)' }
          case 'euro':
            return { amount: '0.0025', currency: 'EUR' }
          case 'custom':
            return { amount: '1.5', currency: 'GBP' }
          default:
            return null
        }
      },
    })
    expect(seen).toContainEqual({ feature_slug: 'tokens', usage: 1_234_567, exact: '1234567' })
    const bySlug = Object.fromEntries(rows.map((r) => [r.feature_slug, r.spending]))
    expect(bySlug).toEqual({
      custom: { amount: '1.5', currency: 'GBP', display_amount: '1.5 GBP' },
      euro: { amount: '0.0025', currency: 'EUR', display_amount: '€0.0025' },
      free: { amount: '0', currency: 'USD', display_amount: '$0' },
      seats: { amount: '60', currency: 'USD', display_amount: 'USD 60 (3 seats)' },
      tokens: { amount: '2469.134', currency: 'USD', display_amount: '$2,469.134' },
    })
  })

  test('bad input is refused rather than guessed', () => {
    expect(() => shapeUsageRows({ projectId: 'p', customerId: 'c', rows: [{ feature_slug: 'x', usage: 'lots' }] })).toThrow(RangeError)
    expect(() =>
      shapeUsageRows({ projectId: 'p', customerId: 'c', rows: [{ feature_slug: 'x', usage: 1 }], price: () => ({ amount: '1e3', currency: 'USD' }) }),
    ).toThrow(RangeError)
  })
})

describe('exact decimals', () => {
  test('canonical text', () => {
    expect(canonicalDecimal('012.50')).toBe('12.5')
    expect(canonicalDecimal('0.000')).toBe('0')
    expect(canonicalDecimal('-0.0')).toBe('0')
    expect(canonicalDecimal('-3.10')).toBe('-3.1')
    expect(canonicalDecimal('12345678901234567890.123456789')).toBe('12345678901234567890.123456789')
  })

  test('sums without floats', () => {
    expect(addDecimals('0.1', '0.2')).toBe('0.3')
    expect(addDecimals('99999999999999999999.99', '0.01')).toBe('100000000000000000000')
    expect(addDecimals('5', '-7.25')).toBe('-2.25')
  })

  test('display amounts', () => {
    expect(displayAmount('0', 'USD')).toBe('$0')
    expect(displayAmount('1234.5', 'USD')).toBe('$1,234.50')
    expect(displayAmount('1234567', 'USD')).toBe('$1,234,567')
    expect(displayAmount('0.002', 'USD')).toBe('$0.002')
    expect(displayAmount('-3', 'USD')).toBe('-$3')
    expect(displayAmount('7.1', 'EUR')).toBe('€7.10')
    expect(displayAmount('7.1', 'JPY')).toBe('7.1 JPY')
  })
})

describe('schemas', () => {
  const getReq = TypeCompiler.Compile(UsageGetRequest)
  const forecastReq = TypeCompiler.Compile(UsageForecastRequest)

  test('get usage: range enum, customer_id required, project_id optional, strict', () => {
    for (const range of USAGE_RANGES) expect(getReq.Check({ range, customer_id: 'c1' })).toBe(true)
    expect(getReq.Check({ range: '7d', customer_id: 'c1', project_id: 'p1' })).toBe(true)
    expect(getReq.Check({ range: '1y', customer_id: 'c1' })).toBe(false)
    expect(getReq.Check({ range: '7d' })).toBe(false)
    expect(getReq.Check({ customer_id: 'c1' })).toBe(false)
    expect(getReq.Check({ range: '7d', customer_id: '' })).toBe(false)
    expect(getReq.Check({ range: '7d', customer_id: 'x'.repeat(37) })).toBe(false)
    expect(getReq.Check({ range: '7d', customer_id: 'c1', extra: true })).toBe(false)
    expect(getReq.Check({ range: '7d', customerId: 'c1' })).toBe(false)
  })

  test('forecast: customer_id and feature_slug required, horizon_days integer 1..31 default 14, strict', () => {
    expect(forecastReq.Check({ customer_id: 'c1', feature_slug: 'tokens' })).toBe(true)
    expect(forecastReq.Check({ customer_id: 'c1', feature_slug: 'tokens', period_key: '2026-11', horizon_days: 1 })).toBe(true)
    expect(forecastReq.Check({ customer_id: 'c1', feature_slug: 'tokens', horizon_days: 31 })).toBe(true)
    for (const horizon_days of [0, 32, 1.5, '14', null]) {
      expect(forecastReq.Check({ customer_id: 'c1', feature_slug: 'tokens', horizon_days })).toBe(false)
    }
    expect(forecastReq.Check({ feature_slug: 'tokens' })).toBe(false)
    expect(forecastReq.Check({ customer_id: 'c1' })).toBe(false)
    expect(forecastReq.Check({ customer_id: 'c1', feature_slug: 'tokens', horizonDays: 7 })).toBe(false)
    expect(UsageForecastRequest.properties.horizon_days.default).toBe(14)
    expect(horizonDaysOf({ customer_id: 'c1', feature_slug: 'tokens' })).toBe(14)
    expect(horizonDaysOf({ customer_id: 'c1', feature_slug: 'tokens', horizon_days: 3 })).toBe(3)
  })

  test('answers match the response schemas', () => {
    const usage = shapeUsageRows({ projectId: 'p1', customerId: 'c1', rows: [{ feature_slug: 'tokens', usage: 5 }] })
    const asOf = { asOf: NOW, usageAsOf: NOW - 1000 }
    const get = TypeCompiler.Compile(UsageGetResponseSchema)
    expect(get.Check({ usage, ...asOf })).toBe(true)
    expect(get.Check({ usage: [], asOf: NOW, usageAsOf: null })).toBe(true)
    expect(get.Check({ usage })).toBe(false)
    expect(get.Check({ usage, asOf: NOW })).toBe(false)
    expect(get.Check({ usage: [{ ...usage[0], spending: { amount: 0, currency: 'USD', display_amount: '$0' } }], ...asOf })).toBe(false)

    const response = TypeCompiler.Compile(UsageForecastResponseSchema)
    const day = Date.UTC(2026, 10, 21)
    const identity = { project_id: 'p1', customer_id: 'c1', feature_slug: 'tokens', asOf: NOW, usageAsOf: null }
    const withLimit = forecastUsage({
      dailyCumulative: [
        { dayStartMs: day - 86_400_000, cumulative: 1 },
        { dayStartMs: day, cumulative: 3 },
      ],
      now: NOW,
      periodKey: '2026-11',
      limit: { amount: 10, kind: 'budget', resetsAt: null },
    })
    expect(response.Check({ ...identity, ...withLimit })).toBe(true)
    expect(response.Check({ ...identity, ...forecastUsage({ dailyCumulative: [], now: NOW }) })).toBe(true)
    const { answer: _answer, ...missing } = withLimit
    expect(response.Check({ ...identity, ...missing })).toBe(false)
    expect(response.Check({ ...withLimit })).toBe(false)
    const { asOf: _asOf, ...noAsOf } = identity
    expect(response.Check({ ...noAsOf, ...withLimit })).toBe(false)
  })
})
