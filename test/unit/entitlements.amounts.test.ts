// What an event counts for under a meter (src/entitlements/README.md, "Counting"): exact units of
// 10^-8, and the values that are not counted; and the stored counters' text form.
import { describe, expect, test } from 'vitest'
import type { MeterConfig } from '../../src/catalog/schemas.js'
import { entitlementUsageArgs, meterAmount, parseStoredUsage, quantityUnitsOf } from '../../src/entitlements/usage.js'

const meter = (m: Partial<MeterConfig>): MeterConfig => ({
  eventId: 'ev_x',
  eventSlug: 'llm.completion',
  aggregationMethod: 'sum',
  aggregationField: 'tokens',
  filters: {},
  groupBy: [],
  windowSize: 'MINUTE',
  ...m,
})

describe('quantityUnitsOf', () => {
  test.each([
    [0, 0n],
    [1, 100_000_000n],
    [1.5, 150_000_000n],
    ['2.5', 250_000_000n],
    ['0.00000001', 1n],
    ['12345678901234567890.12345678', 1234567890123456789012345678n],
    [Number.MAX_SAFE_INTEGER, 900_719_925_474_099_100_000_000n],
    [0.1 + 0.2, 30_000_000n],
  ])('%s → %s units', (value, units) => {
    expect(quantityUnitsOf(value)).toBe(units)
  })
  test.each([
    [-1],
    ['-1'],
    ['1e3'],
    ['1.123456789'],
    ['123456789012345678901'],
    [1e20],
    [1e300],
    [''],
    ['abc'],
    [Number.NaN],
    [Number.POSITIVE_INFINITY],
    [true],
    [null],
    [undefined],
    [{}],
    [[1]],
  ])('%s is not counted', (value) => {
    expect(quantityUnitsOf(value)).toBeUndefined()
  })
})

describe('meterAmount', () => {
  test('count is 1 per event of its slug, whatever the properties', () => {
    expect(meterAmount(meter({ aggregationMethod: 'count', aggregationField: '' }), { eventSlug: 'llm.completion' })).toBe(100_000_000n)
    expect(meterAmount(meter({ aggregationMethod: 'count' }), { eventSlug: 'other' })).toBeUndefined()
  })
  test('sum, max and latest take the aggregation field; not a number → not counted', () => {
    for (const aggregationMethod of ['sum', 'max', 'latest'] as const) {
      expect(meterAmount(meter({ aggregationMethod }), { eventSlug: 'llm.completion', properties: { tokens: '12.5' } })).toBe(1_250_000_000n)
      expect(meterAmount(meter({ aggregationMethod }), { eventSlug: 'llm.completion', properties: { tokens: 'many' } })).toBeUndefined()
      expect(meterAmount(meter({ aggregationMethod }), { eventSlug: 'llm.completion', properties: {} })).toBeUndefined()
    }
  })
  test('filters must all match', () => {
    const m = meter({ filters: { model: 'large', cached: false } })
    expect(meterAmount(m, { eventSlug: 'llm.completion', properties: { tokens: 3, model: 'large', cached: false } })).toBe(300_000_000n)
    expect(meterAmount(m, { eventSlug: 'llm.completion', properties: { tokens: 3, model: 'small', cached: false } })).toBeUndefined()
    expect(meterAmount(m, { eventSlug: 'llm.completion', properties: { tokens: 3, model: 'large' } })).toBeUndefined()
  })
})

test("the include's arguments carry amounts and allowances as exact (hi, lo) pairs", () => {
  const args = entitlementUsageArgs({
    featureSlug: 'tokens',
    nowMs: 5,
    period: { startMs: 1, endMs: 10 },
    strategy: 'none',
    method: 'sum',
    amountUnits: 123_456_789_012_345_678n,
    eventTsMs: 4,
    grants: [
      { id: 'promo', allowanceUnits: 80 },
      { id: 'gr_1', allowanceUnits: Number.MAX_SAFE_INTEGER },
    ] as never,
    mode: 'count',
  })
  expect(args).toEqual(['tokens', '5', '1', '10', 'none', 'sum', '1234', '56789012345678', '4', 'promo=0:8000000000,gr_1=9007199254:74099100000000', 'count'])
})

test('stored counters parse back exactly', () => {
  const stored = parseStoredUsage('100;200;1:5;0:0;0:7;-1;promo=0:8000000000,gr_1=1:5')!
  expect(stored).toMatchObject({ periodStartMs: 100, periodEndMs: 200, usage: 100_000_000_000_005n, overage: 0n, refused: 7n })
  expect([...stored.consumed]).toEqual([
    ['promo', 8_000_000_000n],
    ['gr_1', 100_000_000_000_005n],
  ])
  expect(parseStoredUsage(undefined)).toBeUndefined()
})

test('countedAt (usageAsOf) is the last field; fields written before it or before the reached marker read without it', () => {
  const grants = 'promo=0:8000000000'
  expect(parseStoredUsage(`100;200;1:5;0:0;0:7;-1;${grants};1;150`)).toMatchObject({ usage: 100_000_000_000_005n, countedAtMs: 150 })
  expect(parseStoredUsage(`100;200;1:5;0:0;0:7;-1;${grants};;150`)!.countedAtMs).toBe(150)
  for (const old of [`100;200;1:5;0:0;0:7;-1;${grants}`, `100;200;1:5;0:0;0:7;-1;${grants};1`, `100;200;1:5;0:0;0:7;-1;${grants};`]) {
    const stored = parseStoredUsage(old)!
    expect(stored.countedAtMs).toBeUndefined()
    expect([...stored.consumed]).toEqual([['promo', 8_000_000_000n]])
  }
})
