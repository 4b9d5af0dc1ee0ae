// forecastUsage with budgetLimits (src/analytics/README.md "Budgets"): the tightest budget limit is
// named as `budget`, and exhaustsAt is the earliest of the entitlement's and the budget's.
import { describe, expect, it } from 'vitest'
import { DAY_MS, forecastUsage, type ForecastLimit } from '../../src/analytics/forecast.js'

const T = Date.UTC(2026, 10, 22) // start of today
const NOW = T + 6 * 3_600_000
/** Cumulative 10, 20, …, 140 on the 14 window days: 10 a day, flat. */
const dailyCumulative = Array.from({ length: 14 }, (_, d) => ({ dayStartMs: T - (14 - d) * DAY_MS, cumulative: 10 * (d + 1) }))
const budget = (id: string, amount: number, used: number, resetsAt: number | null = null): ForecastLimit => ({
  kind: 'budget',
  budgetKey: 'acme/tokens',
  id,
  window: 'never',
  amount,
  used,
  resetsAt,
})

describe('forecastUsage with budget limits', () => {
  it('names the limit used up first and reports the earliest exhaustion overall', () => {
    const r = forecastUsage({
      dailyCumulative,
      now: NOW,
      limit: { kind: 'entitlement', id: 'ent', amount: 240, used: 140, window: 'month', resetsAt: null }, // 100 left: 10 days
      budgetLimits: [budget('big', 1000, 920), budget('small', 100, 70), budget('later', 500, 400)], // 80, 30, 100 left
    })
    expect(r.budget).toMatchObject({ id: 'small', budgetKey: 'acme/tokens', remaining: 30, exhaustsWithinHorizon: true })
    expect(Math.abs((r.budget!.exhaustsAt as number) - (NOW + 3 * DAY_MS))).toBeLessThan(1000)
    expect(Math.abs((r.limit!.exhaustsAt as number) - (NOW + 10 * DAY_MS))).toBeLessThan(1000)
    expect(r.exhaustsAt).toBe(r.budget!.exhaustsAt)
    expect(r.answer).toMatch(/entitlement limit ent .* budget acme\/tokens limit small \(never\) of 100 \(30 left\)/)
  })

  it("puts a limit that resets first (never used up) last, and keeps the entitlement's exhaustion", () => {
    const r = forecastUsage({
      dailyCumulative,
      now: NOW,
      limit: { kind: 'entitlement', amount: 240, used: 140 },
      budgetLimits: [budget('resets', 100, 90, NOW + 3_600_000), budget('slow', 300, 0)],
    })
    expect(r.budget).toMatchObject({ id: 'slow', exhaustsWithinHorizon: false })
    expect(r.exhaustsAt).toBe(r.limit!.exhaustsAt)
  })

  it("with a budget alone, exhaustsAt is the budget's; without any, there is none", () => {
    const alone = forecastUsage({ dailyCumulative, now: NOW, budgetLimits: [budget('done', 50, 60)] })
    expect(alone.budget).toMatchObject({ id: 'done', remaining: -10, exhaustsAt: NOW })
    expect(alone.exhaustsAt).toBe(NOW)
    expect(alone.limit).toBeUndefined()
    const none = forecastUsage({ dailyCumulative, now: NOW, budgetLimits: [] })
    expect(none.exhaustsAt).toBeUndefined()
    expect(none.budget).toBeUndefined()
  })
})
