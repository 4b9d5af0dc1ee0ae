// The usage forecast (spec 4.11, DESIGN.md "Usage forecast"): the worked example exactly, the edge
// cases the issue names (no data, one day, gaps, decreasing cumulative values), trends, rounding,
// confidence thresholds, warnings and when a limit runs out at the projected rate.
import { describe, expect, test } from 'vitest'
import { DAY_MS, accumulateDaily, forecastUsage, forecastWindow, round2, type DailyCumulative } from '../../src/analytics/forecast.js'

/** 2026-11-22 03:00 UTC: today starts 2026-11-22, the windows are 2026-11-08 … 2026-11-21. */
const TODAY = Date.UTC(2026, 10, 22)
const NOW = TODAY + 3 * 3_600_000
const FIRST = TODAY - 14 * DAY_MS
const day = (index: number) => FIRST + index * DAY_MS

/** Cumulative values on window days 0, 1, … (undefined: no fact that day). */
function series(values: (number | undefined)[], firstIndex = 0): DailyCumulative[] {
  const out: DailyCumulative[] = []
  values.forEach((cumulative, k) => {
    if (cumulative !== undefined) out.push({ dayStartMs: day(firstIndex + k), cumulative })
  })
  return out
}

/** Cumulative values whose day-over-day differences are `deltas`, ending yesterday. */
function fromDeltas(deltas: number[], start = 100): DailyCumulative[] {
  const values = [start]
  for (const d of deltas) values.push((values[values.length - 1] as number) + d)
  return series(values, 14 - values.length)
}

describe('the worked example', () => {
  test('cumulative 10, 20, …, 140 → projected 140 (horizon 14), observed 13, baseline 10, trend 0', () => {
    const r = forecastUsage({ dailyCumulative: series([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140]), now: NOW, horizonDays: 14 })
    expect(r.projectedUsage).toBe(140)
    expect(r.observedDays).toBe(13)
    expect(r.baselineUsage).toBe(10)
    expect(r.trendPerDay).toBe(0)
    expect(r.horizonDays).toBe(14)
    expect(r.confidence).toBe('high')
    expect(r.warnings).toEqual([])
    expect(r.evidence).toHaveLength(14)
    expect(r.evidence[0]).toEqual({ id: 'day:2026-11-08', timestamp: FIRST })
    expect(r.evidence[13]).toEqual({ id: 'day:2026-11-21', timestamp: TODAY - DAY_MS })
    expect(r.freshness).toEqual({ generatedAt: NOW, dataFrom: FIRST, dataTo: TODAY })
    expect(r.answer).toContain('140')
    expect(r).not.toHaveProperty('periodKey')
    expect(r).not.toHaveProperty('exhaustsAt')
  })

  test('horizon defaults to 14 and scales the projection', () => {
    const data = series([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140])
    expect(forecastUsage({ dailyCumulative: data, now: NOW }).projectedUsage).toBe(140)
    expect(forecastUsage({ dailyCumulative: data, now: NOW, horizonDays: 1 }).projectedUsage).toBe(10)
    expect(forecastUsage({ dailyCumulative: data, now: NOW, horizonDays: 31 }).projectedUsage).toBe(310)
  })

  test('the same at any time of today; facts of today and before the windows are ignored', () => {
    const data = [
      { dayStartMs: day(-1), cumulative: 0 },
      ...series([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140]),
      { dayStartMs: TODAY, cumulative: 1_000 },
    ]
    for (const now of [TODAY, NOW, TODAY + DAY_MS - 1]) {
      const r = forecastUsage({ dailyCumulative: data, now })
      expect([r.projectedUsage, r.observedDays, r.baselineUsage, r.trendPerDay]).toEqual([140, 13, 10, 0])
      expect(r.evidence).toHaveLength(14)
    }
  })

  test('periodKey is echoed; factIds become the evidence', () => {
    const data = series([10, 20, 30]).map((d, k) => ({ ...d, factIds: [`f${k}a`, `f${k}b`] }))
    const r = forecastUsage({ dailyCumulative: data, now: NOW, periodKey: '2026-11' })
    expect(r.periodKey).toBe('2026-11')
    expect(r.evidence.map((e) => e.id)).toEqual(['f0a', 'f0b', 'f1a', 'f1b', 'f2a', 'f2b'])
    expect(r.evidence[2]?.timestamp).toBe(day(1))
  })
})

describe('the algorithm', () => {
  test('a rising trend: intercept is the fitted value of yesterday, horizon day i = 1 is today', () => {
    // Daily usage 1, 2, …, 13 on window days 1 … 13: slope 1, fitted 13 yesterday, 13 + i on day i.
    const r = forecastUsage({ dailyCumulative: fromDeltas([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]), now: NOW })
    expect(r.trendPerDay).toBe(1)
    expect(r.baselineUsage).toBe(7)
    expect(r.observedDays).toBe(13)
    expect(r.projectedUsage).toBe(14 * 13 + (14 * 15) / 2) // Σ_{i=1..14} (13 + i) = 287
    expect(r.answer).toMatch(/rising by 1 a day/)
  })

  test('a falling trend is clipped at zero per day', () => {
    // Daily usage 19, 18, …, 7 on days 1 … 13: slope −1, fitted 7 yesterday; Σ max(0, 7 − i) = 21.
    const r = forecastUsage({ dailyCumulative: fromDeltas([19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7]), now: NOW })
    expect(r.trendPerDay).toBe(-1)
    expect(r.baselineUsage).toBe(13)
    expect(r.projectedUsage).toBe(21)
    expect(r.answer).toMatch(/falling by 1 a day/)
  })

  test('the regression uses the day index, so a gap shifts the x of later days', () => {
    // Deltas 10 on days 1-4, missing day 5-6, 20 on days 8-13 (day 7's delta spans the gap: not counted).
    const values = [0, 10, 20, 30, 40, undefined, undefined, 100, 120, 140, 160, 180, 200, 220]
    const r = forecastUsage({ dailyCumulative: series(values), now: NOW })
    expect(r.observedDays).toBe(10)
    expect(r.baselineUsage).toBe(16)
    // Least squares over x = 1,2,3,4,8,…,13 with y = 10×4, 20×6.
    const xs = [1, 2, 3, 4, 8, 9, 10, 11, 12, 13]
    const ys = [10, 10, 10, 10, 20, 20, 20, 20, 20, 20]
    const mx = xs.reduce((a, b) => a + b) / 10
    const my = ys.reduce((a, b) => a + b) / 10
    const slope = xs.reduce((s, x, k) => s + (x - mx) * ((ys[k] as number) - my), 0) / xs.reduce((s, x) => s + (x - mx) ** 2, 0)
    const intercept = my + slope * (13 - mx)
    let projected = 0
    for (let i = 1; i <= 14; i++) projected += Math.max(0, intercept + slope * i)
    expect(r.trendPerDay).toBe(round2(slope))
    expect(r.projectedUsage).toBe(round2(projected))
  })

  test('values are rounded to 2 decimals', () => {
    // Daily usage 3, 3, 4 on days 11-13: mean 3.333…, slope 0.5, fitted 3.8333… yesterday.
    const r = forecastUsage({ dailyCumulative: fromDeltas([3, 3, 4]), now: NOW, horizonDays: 3 })
    expect(r.baselineUsage).toBe(3.33)
    expect(r.trendPerDay).toBe(0.5)
    // Σ_{i=1..3} (3.8333 + 0.5 i) = 11.5 + 3 = 14.5
    expect(r.projectedUsage).toBe(14.5)
    const r2 = forecastUsage({ dailyCumulative: fromDeltas([1, 0, 0]), now: NOW, horizonDays: 1 })
    expect(r2.baselineUsage).toBe(0.33)
    expect(r2.trendPerDay).toBe(-0.5)
    expect(r2.projectedUsage).toBe(0)
  })

  test('round2 rounds half away from zero on the printed decimal and never answers -0', () => {
    expect(round2(1.005)).toBe(1.01)
    expect(round2(-1.005)).toBe(-1.01)
    expect(round2(2.675)).toBe(2.68)
    expect(round2(1.004999)).toBe(1)
    expect(Object.is(round2(-0.001), 0)).toBe(true)
    expect(round2(1e-7)).toBe(0)
    expect(round2(123456.789)).toBe(123456.79)
    expect(round2(Number.NaN)).toBe(0)
  })

  test('several facts on one day: the largest value, every id as evidence', () => {
    const data = [
      { dayStartMs: day(12), cumulative: 5, factIds: ['a'] },
      { dayStartMs: day(12) + 3_600_000, cumulative: 8, factIds: ['b'] },
      { dayStartMs: day(13), cumulative: 18, factIds: ['c'] },
    ]
    const r = forecastUsage({ dailyCumulative: data, now: NOW, horizonDays: 2 })
    expect(r.baselineUsage).toBe(10)
    expect(r.evidence).toEqual([
      { id: 'a', timestamp: day(12) },
      { id: 'b', timestamp: day(12) },
      { id: 'c', timestamp: day(13) },
    ])
  })

  test('horizonDays outside 1..31 is refused', () => {
    for (const horizonDays of [0, 32, 1.5, -1]) expect(() => forecastUsage({ dailyCumulative: [], now: NOW, horizonDays })).toThrow(RangeError)
  })

  test('forecastWindow: the 14 days before today', () => {
    expect(forecastWindow(NOW)).toEqual({ from: FIRST, to: TODAY, days: 14 })
  })
})

describe('edge cases', () => {
  test('no data', () => {
    const r = forecastUsage({ dailyCumulative: [], now: NOW })
    expect([r.projectedUsage, r.observedDays, r.baselineUsage, r.trendPerDay]).toEqual([0, 0, 0, 0])
    expect(r.confidence).toBe('low')
    expect(r.evidence).toEqual([])
    expect(r.freshness).toEqual({ generatedAt: NOW, dataFrom: FIRST, dataTo: FIRST })
    expect(r.warnings).toHaveLength(1)
    expect(r.warnings[0]).toMatch(/No usage data in the 14 days/)
    expect(r.nextActions.length).toBeGreaterThan(0)
    expect(r.answer).toMatch(/projected at 0/)
  })

  test('one day: nothing to difference', () => {
    const r = forecastUsage({ dailyCumulative: series([50], 13), now: NOW })
    expect([r.projectedUsage, r.observedDays, r.baselineUsage, r.trendPerDay]).toEqual([0, 0, 0, 0])
    expect(r.confidence).toBe('low')
    expect(r.evidence).toEqual([])
    expect(r.freshness).toEqual({ generatedAt: NOW, dataFrom: day(13), dataTo: TODAY })
    expect(r.warnings.some((w) => w.startsWith('Sparse data: 0 observed days'))).toBe(true)
    expect(r.answer).toMatch(/Not enough data/)
  })

  test('two days: one observed day, slope 0', () => {
    const r = forecastUsage({ dailyCumulative: series([50, 57], 12), now: NOW, horizonDays: 10 })
    expect([r.projectedUsage, r.observedDays, r.baselineUsage, r.trendPerDay]).toEqual([70, 1, 7, 0])
    expect(r.confidence).toBe('low')
  })

  test('gaps: differences across a missing day are not counted, and the gap is named', () => {
    const values = [10, 20, 30, 40, 50, 60, undefined, undefined, 90, 100, 110, 120, 130, 140]
    const r = forecastUsage({ dailyCumulative: series(values), now: NOW })
    expect(r.observedDays).toBe(10)
    expect(r.baselineUsage).toBe(10)
    expect(r.projectedUsage).toBe(140)
    expect(r.evidence).toHaveLength(12)
    expect(r.warnings).toEqual(['Gaps: no data on 2 days (2026-11-14, 2026-11-15); differences across a gap are not counted.'])
  })

  test('decreasing cumulative values: the negative difference is dropped, not clamped', () => {
    const values = [10, 20, 30, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 125]
    const r = forecastUsage({ dailyCumulative: series(values), now: NOW })
    expect(r.observedDays).toBe(12)
    expect(r.baselineUsage).toBe(10)
    expect(r.trendPerDay).toBe(0)
    expect(r.projectedUsage).toBe(140)
    expect(r.warnings).toEqual(["Decreasing cumulative usage on 1 day (2026-11-11): those days' differences were dropped."])
  })

  test('zero usage days count as observed', () => {
    const r = forecastUsage({ dailyCumulative: series(new Array(14).fill(7)), now: NOW })
    expect([r.projectedUsage, r.observedDays, r.baselineUsage, r.trendPerDay]).toEqual([0, 13, 0, 0])
    expect(r.confidence).toBe('high')
  })

  test('non-numeric facts are ignored with a warning', () => {
    const data = [...series([10, 20, 30], 11), { dayStartMs: day(5), cumulative: Number.NaN }]
    const r = forecastUsage({ dailyCumulative: data, now: NOW })
    expect(r.observedDays).toBe(2)
    expect(r.warnings).toContain('1 fact with a non-numeric day or value ignored.')
  })
})

describe('confidence and warnings', () => {
  test.each([
    [1, 'low'],
    [4, 'low'],
    [5, 'medium'],
    [9, 'medium'],
    [10, 'high'],
    [13, 'high'],
  ] as const)('%i observed days → %s', (n, confidence) => {
    const r = forecastUsage({ dailyCumulative: fromDeltas(new Array(n).fill(2)), now: NOW })
    expect(r.observedDays).toBe(n)
    expect(r.confidence).toBe(confidence)
    expect(r.warnings.some((w) => w.startsWith('Sparse data'))).toBe(n < 5)
    expect(r.nextActions.some((a) => a.includes('rough estimate'))).toBe(n < 10)
  })

  test('stale: no fact on either of the 2 days before today', () => {
    const upTo = (last: number) => series(new Array(last + 1).fill(0).map((_, k) => 10 * k))
    const stale = forecastUsage({ dailyCumulative: upTo(11), now: NOW })
    expect(stale.warnings).toEqual(['Stale data: no usage fact in the last 2 days; the latest is from 2026-11-19.'])
    expect(stale.nextActions.some((a) => a.includes('still being ingested'))).toBe(true)
    expect(stale.freshness.dataTo).toBe(day(12))
    const fresh = forecastUsage({ dailyCumulative: upTo(12), now: NOW })
    expect(fresh.warnings).toEqual([])
  })
})

describe('limit exhaustion', () => {
  const flat = series([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140])

  test('at 10 a day, 60 left at the start of today runs out in 6 days', () => {
    const r = forecastUsage({ dailyCumulative: flat, now: TODAY, limit: { amount: 200, kind: 'entitlement', window: 'month' } })
    expect(r.exhaustsAt).toBe(TODAY + 6 * DAY_MS)
    expect(r.limit).toEqual({
      kind: 'entitlement',
      window: 'month',
      amount: 200,
      used: 140,
      remaining: 60,
      exhaustsAt: TODAY + 6 * DAY_MS,
      exhaustsWithinHorizon: true,
    })
    expect(r.answer).toContain('2026-11-28T00:00:00Z')
    expect(r.nextActions.some((a) => a.includes('before 2026-11-28T00:00:00Z'))).toBe(true)
  })

  test('from the middle of today, only the rest of today counts', () => {
    // 03:00: 21/24 of today's 10 = 8.75, then 10 a day: 51.25 left after today → 5 days and 3 h.
    const r = forecastUsage({ dailyCumulative: flat, now: NOW, limit: { amount: 200, kind: 'budget' } })
    expect(r.exhaustsAt).toBe(TODAY + 6 * DAY_MS + 3 * 3_600_000)
  })

  test('`used` overrides the latest cumulative value', () => {
    const r = forecastUsage({ dailyCumulative: flat, now: TODAY, limit: { amount: 200, used: 190, kind: 'budget', id: 'daily-cap' } })
    expect(r.exhaustsAt).toBe(TODAY + DAY_MS)
    expect(r.limit?.remaining).toBe(10)
    expect(r.answer).toMatch(/budget limit daily-cap of 200/)
  })

  test('beyond the horizon: reported, not within it', () => {
    const r = forecastUsage({ dailyCumulative: flat, now: TODAY, horizonDays: 7, limit: { amount: 1140, kind: 'entitlement' } })
    expect(r.exhaustsAt).toBe(TODAY + 100 * DAY_MS)
    expect(r.limit?.exhaustsWithinHorizon).toBe(false)
    expect(r.nextActions).toEqual([])
  })

  test('already used up: now', () => {
    const r = forecastUsage({ dailyCumulative: flat, now: NOW, limit: { amount: 100, kind: 'budget' } })
    expect(r.exhaustsAt).toBe(NOW)
    expect(r.limit?.remaining).toBe(-40)
    expect(r.answer).toMatch(/already used up/)
  })

  test('the window resets first: null', () => {
    const r = forecastUsage({ dailyCumulative: flat, now: TODAY, limit: { amount: 200, kind: 'budget', resetsAt: TODAY + 3 * DAY_MS } })
    expect(r.exhaustsAt).toBeNull()
    expect(r.answer).toMatch(/resets at 2026-11-25T00:00:00Z before it is used up/)
  })

  test('a falling trend that reaches zero never uses it up', () => {
    // Fitted 7 yesterday, −1 a day: 21 more in all.
    const data = fromDeltas([19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7])
    const last = data[data.length - 1]?.cumulative as number
    expect(forecastUsage({ dailyCumulative: data, now: TODAY, limit: { amount: last + 21.5, kind: 'entitlement' } }).exhaustsAt).toBeNull()
    // 6 + 5 + 4 = 15 in three days: 15 left runs out at the end of the third.
    expect(forecastUsage({ dailyCumulative: data, now: TODAY, limit: { amount: last + 15, kind: 'entitlement' } }).exhaustsAt).toBe(TODAY + 3 * DAY_MS)
  })

  test('no data: cannot be estimated', () => {
    const r = forecastUsage({ dailyCumulative: [], now: NOW, limit: { amount: 10, kind: 'entitlement' } })
    expect(r.exhaustsAt).toBeNull()
    expect(r.limit?.used).toBe(0)
    expect(r.answer).toMatch(/cannot be estimated/)
  })
})

describe('accumulateDaily', () => {
  test('daily sums → cumulative, internal gaps carried forward as zero-usage days', () => {
    const rows = [
      { dayStartMs: day(12), usage: 5, factIds: ['x'] },
      { dayStartMs: day(10), usage: 3 },
      { dayStartMs: day(10) + 1000, usage: 2 },
    ]
    expect(accumulateDaily(rows, 100)).toEqual([
      { dayStartMs: day(10), cumulative: 105 },
      { dayStartMs: day(11), cumulative: 105 },
      { dayStartMs: day(12), cumulative: 110, factIds: ['x'] },
    ])
    expect(accumulateDaily([])).toEqual([])
    const r = forecastUsage({ dailyCumulative: accumulateDaily(rows), now: NOW, horizonDays: 2 })
    expect([r.observedDays, r.baselineUsage]).toEqual([2, 2.5])
  })
})
