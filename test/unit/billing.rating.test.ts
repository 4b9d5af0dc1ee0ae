// Rating (src/billing/rating.ts, README.md beside it): the worked examples of the README for each
// price type and tier mode, to the last 10^-8 (ledger scale 8 integers), the rounding rules, and
// properties over random tiers and quantities.
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { rate, toLedgerAmount, toMinorUnits, toQuantityUnits } from '../../src/billing/rating.js'
import { toPrice } from '../../src/catalog/pricing.js'
import type { FeatureConfig, Price, Tier } from '../../src/catalog/schemas.js'

function usd(text: string): Price {
  const price = toPrice(text, 'USD')
  if (!price) throw new Error(`bad price ${text}`)
  return price
}

function tier(firstUnit: number, lastUnit: number | null, unit: string, flat = '0', label = ''): Tier {
  return { firstUnit, lastUnit, unitPrice: usd(unit), flatPrice: usd(flat), label }
}

/** README's tiers: 1–1,000 at $0.01; 1,001–10,000 at $0.008 (+$5 flat); 10,001+ at $0.005 (+$20 flat). */
const TIERS = [tier(1, 1000, '0.01'), tier(1001, 10000, '0.008', '5'), tier(10001, null, '0.005', '20')]
const volume: FeatureConfig = { tiers: TIERS, tierMode: 'volume' }
const graduated: FeatureConfig = { tiers: TIERS, tierMode: 'graduated' }

describe('quantities and prices in exact units', () => {
  test('decimal strings and bigints at scale 8; more than 8 fractional digits is refused', () => {
    expect(toQuantityUnits('2500.5')).toBe(250_050_000_000n)
    expect(toQuantityUnits('0.00000001')).toBe(1n)
    expect(toQuantityUnits(7n)).toBe(7n)
    expect(() => toQuantityUnits('0.000000001')).toThrow(RangeError)
    expect(() => toQuantityUnits('-1')).toThrow(RangeError)
  })

  test('dinero snapshots at ledger scale 8: amount · 10^(8 − scale); finer than 8 rounded half to even', () => {
    expect(toLedgerAmount(usd('20'))).toBe(2_000_000_000n)
    expect(usd('0.002').dinero).toMatchObject({ amount: 2, scale: 3 })
    expect(toLedgerAmount(usd('0.002'))).toBe(200_000n)
    const fine = (amount: number, scale: number): Price => ({ dinero: { amount, scale, currency: { code: 'USD', base: 10, exponent: 2 } }, displayAmount: '' })
    expect(toLedgerAmount(fine(123456789, 10))).toBe(1_234_568n) // 0.0123456789 → 0.01234568
    expect(toLedgerAmount(fine(5, 9))).toBe(0n) // 0.000000005: a tie, to even (0)
    expect(toLedgerAmount(fine(15, 9))).toBe(2n) // 0.000000015: a tie, to even (2)
  })
})

describe('worked examples (README.md), to the last 10^-8', () => {
  test('flat: $20 a seat × 3 seats = $60', () => {
    const r = rate({ featureType: 'flat', config: { price: usd('20') }, quantity: '3' })
    expect(r.amount).toBe(6_000_000_000n)
    expect(r.lines).toEqual([expect.objectContaining({ quantity: 300_000_000n, unitAmount: 2_000_000_000n, amount: 6_000_000_000n })])
  })

  test('package: $5 per 1,000; 2,500.5 used → 3 packages = $15; exactly 2,000 → 2 packages; 0 → nothing', () => {
    const config: FeatureConfig = { price: usd('5'), units: 1000 }
    const r = rate({ featureType: 'package', config, quantity: '2500.5' })
    expect(r.amount).toBe(1_500_000_000n)
    expect(r.lines).toEqual([expect.objectContaining({ quantity: 300_000_000n, unitAmount: 500_000_000n, amount: 1_500_000_000n })])
    expect(rate({ featureType: 'usage', config: { ...config, usageMode: 'package' }, quantity: '2000' }).amount).toBe(1_000_000_000n)
    expect(rate({ featureType: 'package', config, quantity: '0' })).toMatchObject({ amount: 0n, lines: [] })
  })

  test('unit at $0.002 (scale 3): 1,234.56789012 → 2.46913578|024 → $2.46913578', () => {
    const r = rate({ featureType: 'usage', config: { usageMode: 'unit', price: usd('0.002') }, quantity: '1234.56789012' })
    expect(r.exact).toEqual({ units: 246_913_578_024n, scale: 11 })
    expect(r.amount).toBe(246_913_578n)
    expect(r.lines[0]).toMatchObject({ quantity: 123_456_789_012n, unitAmount: 200_000n, amount: 246_913_578n })
  })

  test('unit: ties below 10^-8 round half to even, once', () => {
    const config: FeatureConfig = { usageMode: 'unit', price: usd('0.02') }
    expect(rate({ featureType: 'usage', config, quantity: '0.00000025' }).amount).toBe(0n) // 0.5·10^-8 → 0
    expect(rate({ featureType: 'usage', config, quantity: '0.00000075' }).amount).toBe(2n) // 1.5·10^-8 → 2
    expect(rate({ featureType: 'usage', config, quantity: '0.00000076' }).amount).toBe(2n) // 1.52·10^-8 → 2
  })

  test('a price finer than 8 digits stays exact until the total: 7 × $0.0123456789 = $0.0864197523 → $0.08641975', () => {
    const price: Price = { dinero: { amount: 123456789, scale: 10, currency: { code: 'USD', base: 10, exponent: 2 } }, displayAmount: '$0.0123456789' }
    const r = rate({ featureType: 'usage', config: { usageMode: 'unit', price }, quantity: '7' })
    expect(r.amount).toBe(8_641_975n) // not 7 × 1,234,568 = 8,641,976
    expect(r.lines[0]?.unitAmount).toBe(1_234_568n)
  })

  test('included units are subtracted first: 1,500 with 1,000 included at $0.01 → $5; 800 with 1,000 included → $0', () => {
    const config: FeatureConfig = { usageMode: 'unit', price: usd('0.01') }
    expect(rate({ featureType: 'usage', config, quantity: '1500', includedUnits: 100_000_000_000n }).amount).toBe(500_000_000n)
    expect(rate({ featureType: 'usage', config, quantity: 150_000_000_000n, includedUnits: '1000' }).amount).toBe(500_000_000n)
    expect(rate({ featureType: 'usage', config, quantity: '800', includedUnits: '1000' })).toMatchObject({ amount: 0n, lines: [] })
  })

  test('tier volume: exactly 1,000 (a boundary) → $10; 1,000.5 → 1,000.5 × $0.008 + $5 = $13.004; 25,000 (open last tier) → $125 + $20 = $145', () => {
    expect(rate({ featureType: 'tier', config: volume, quantity: '1000' })).toMatchObject({
      amount: 1_000_000_000n,
      lines: [expect.objectContaining({ amount: 1_000_000_000n })],
    })
    const mid = rate({ featureType: 'tier', config: volume, quantity: '1000.5' })
    expect(mid.amount).toBe(1_300_400_000n)
    expect(mid.lines.map((l) => [l.quantity, l.unitAmount, l.amount])).toEqual([
      [100_050_000_000n, 800_000n, 800_400_000n],
      [100_000_000n, 500_000_000n, 500_000_000n],
    ])
    const top = rate({ featureType: 'usage', config: { ...volume, usageMode: 'tier' }, quantity: '25000' })
    expect(top.amount).toBe(14_500_000_000n)
    expect(top.lines.map((l) => l.amount)).toEqual([12_500_000_000n, 2_000_000_000n])
    expect(rate({ featureType: 'tier', config: volume, quantity: '10001' }).amount).toBe(7_000_500_000n) // 50.005 + 20
  })

  test('tier graduated: 1,000 → $10; 1,000.5 → $10 + $0.004 + $5 = $15.004; 25,000 across three tiers → $182', () => {
    expect(rate({ featureType: 'tier', config: graduated, quantity: '1000' }).amount).toBe(1_000_000_000n)
    expect(rate({ featureType: 'tier', config: graduated, quantity: '1000.5' }).amount).toBe(1_500_400_000n)
    const r = rate({ featureType: 'usage', config: { ...graduated, usageMode: 'tier' }, quantity: '25000' })
    expect(r.amount).toBe(18_200_000_000n)
    expect(r.lines.map((l) => [l.quantity, l.unitAmount, l.amount])).toEqual([
      [100_000_000_000n, 1_000_000n, 1_000_000_000n], // 1,000 × $0.01
      [900_000_000_000n, 800_000n, 7_200_000_000n], // 9,000 × $0.008
      [100_000_000n, 500_000_000n, 500_000_000n], // + $5 flat
      [1_500_000_000_000n, 500_000n, 7_500_000_000n], // 15,000 × $0.005
      [100_000_000n, 2_000_000_000n, 2_000_000_000n], // + $20 flat
    ])
    expect(rate({ featureType: 'tier', config: graduated, quantity: '0' })).toMatchObject({ amount: 0n, lines: [] })
  })

  test('a closed last tier takes the units past it', () => {
    const closed: FeatureConfig = { tiers: [tier(1, 10, '1'), tier(11, 20, '0.5')], tierMode: 'graduated' }
    expect(rate({ featureType: 'tier', config: closed, quantity: '25' }).amount).toBe(1_750_000_000n) // 10 + 15 × 0.5
    expect(rate({ featureType: 'tier', config: { ...closed, tierMode: 'volume' }, quantity: '25' }).amount).toBe(1_250_000_000n)
  })
})

describe('toMinorUnits: the provider boundary, half to even', () => {
  test('ledger scale 8 → cents', () => {
    expect(toMinorUnits(1_300_400_000n, 2)).toBe(1300n) // $13.004 → 1300
    expect(toMinorUnits(246_913_578n, 2)).toBe(247n) // $2.46913578 → 247
    expect(toMinorUnits(12_500_000n, 2)).toBe(12n) // $0.125 → 12 (tie, to even)
    expect(toMinorUnits(13_500_000n, 2)).toBe(14n) // $0.135 → 14 (tie, to even)
    expect(toMinorUnits(12_500_001n, 2)).toBe(13n) // past the tie
    expect(toMinorUnits(-12_500_001n, 2)).toBe(-13n) // symmetric for credits
    expect(toMinorUnits(18_200_000_000n, 2)).toBe(18_200n)
    expect(toMinorUnits(123n, 8)).toBe(123n)
    expect(toMinorUnits(150_000_000n, 0)).toBe(2n) // ¥: 1.5 → 2
  })
})

describe('properties', () => {
  /** Contiguous tiers from 1 with non-increasing unit prices (scale ≤ 4 here), no flat prices, the last open. */
  const decreasingTiers = fc
    .array(fc.tuple(fc.integer({ min: 1, max: 500 }), fc.integer({ min: 0, max: 10_000 })), { minLength: 1, maxLength: 5 })
    .map((specs) => {
      const prices = specs.map(([, p]) => p).sort((a, b) => b - a)
      let first = 1
      return specs.map(([width], i) => {
        const last = i === specs.length - 1 ? null : first + width - 1
        const t = tier(first, last, `${Math.trunc(prices[i]! / 10_000)}.${String(prices[i]! % 10_000).padStart(4, '0')}`)
        first += width
        return t
      })
    })
  const quantityArb = fc.bigInt({ min: 0n, max: 3_000n * 100_000_000n })

  test('graduated ≤ every unit at the top (first, dearest) tier, and ≥ volume, for non-increasing tier prices', () => {
    fc.assert(
      fc.property(decreasingTiers, quantityArb, (tiers, quantity) => {
        const grad = rate({ featureType: 'tier', config: { tiers, tierMode: 'graduated' }, quantity }).exact
        const vol = rate({ featureType: 'tier', config: { tiers, tierMode: 'volume' }, quantity }).exact
        const top = rate({ featureType: 'usage', config: { usageMode: 'unit', price: tiers[0]!.unitPrice }, quantity }).exact
        const at = (e: { units: bigint; scale: number }) => e.units * 10n ** BigInt(20 - e.scale)
        expect(at(grad)).toBeLessThanOrEqual(at(top))
        expect(at(vol)).toBeLessThanOrEqual(at(grad))
      }),
      { numRuns: 300 },
    )
  })

  test('unit pricing is additive: rate(a) + rate(b) = rate(a + b) exactly, and within 10^-8 after rounding', () => {
    const priceArb = fc
      .tuple(fc.integer({ min: 0, max: 1_000_000_000 }), fc.integer({ min: 0, max: 12 }))
      .map(([amount, scale]): Price => ({ dinero: { amount, scale, currency: { code: 'USD', base: 10, exponent: 2 } }, displayAmount: '' }))
    fc.assert(
      fc.property(priceArb, quantityArb, quantityArb, (price, a, b) => {
        const config: FeatureConfig = { usageMode: 'unit', price }
        const ra = rate({ featureType: 'usage', config, quantity: a })
        const rb = rate({ featureType: 'usage', config, quantity: b })
        const rab = rate({ featureType: 'usage', config, quantity: a + b })
        const scale = 8 + price.dinero.scale
        const at = (e: { units: bigint; scale: number }) => e.units * 10n ** BigInt(scale - e.scale)
        expect(at(ra.exact) + at(rb.exact)).toBe(at(rab.exact))
        const diff = ra.amount + rb.amount - rab.amount
        expect(diff >= -1n && diff <= 1n).toBe(true)
        if (price.dinero.scale === 0) expect(diff).toBe(0n)
      }),
      { numRuns: 300 },
    )
  })
})
