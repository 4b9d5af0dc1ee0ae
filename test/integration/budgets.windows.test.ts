// Window boundaries of budget limits (src/budgets/README.md "Limits and windows", spec 2.1
// Limit.window / resetsAt), observed through BudgetService.get() / record() while the injected
// manual clock moves forward. Expected instants are computed here with Date.UTC, independently
// of lua/includes/window.lua: literal Date.UTC values for the hand-picked boundaries, and a
// small JS reference (refPeriod below) for the randomized checks.

import { afterAll, describe, expect, it } from 'vitest'
import { BudgetService, type UpsertInput } from '../../src/budgets/service.js'
import type { Limit, Window } from '../../src/budgets/types.js'
import { manualClock } from '../../src/kernel/clock.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { prng } from '../support/prng.js'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const WEEK = 7 * DAY

type LimitIn = UpsertInput['limits'][number]
const BIG = '1000000000'
const limit = (id: string, window: Window, anchor?: number): LimitIn =>
  anchor === undefined ? { id, window, enforce: 'soft', amount: BIG } : { id, window, enforce: 'soft', amount: BIG, anchor }

const redis = testRedis()
afterAll(async () => {
  await redis.quit()
})

/** A fresh budget (random project) on the shared standalone server, with its own clock. */
async function budget(limits: LimitIn[], startMs: number) {
  const clock = manualClock(startMs)
  const service = new BudgetService(redis, clock)
  const projectId = uniquePrefix()
  let records = 0
  const byId = (limits: Limit[]) => Object.fromEntries(limits.map((l) => [l.id, l]))
  const b = {
    clock,
    async upsert(ls: LimitIn[], key = 'w') {
      const r = await service.upsert(projectId, { key, limits: ls })
      if (!r.ok) throw new Error(`upsert: ${JSON.stringify(r)}`)
      return byId(r.value.balance.limits)
    },
    async get(key = 'w') {
      const r = await service.get(projectId, key)
      if (!r.ok) throw new Error(`get: ${JSON.stringify(r)}`)
      return byId(r.value.balance.limits)
    },
    async record(amount = '1', key = 'w') {
      const r = await service.record(projectId, { key, amount, idempotencyKey: `r${++records}` })
      if (!r.ok) throw new Error(`record: ${JSON.stringify(r)}`)
      return byId(r.value.balance.limits)
    },
    /** Moves the clock to t and reads the one limit `id`. */
    async at(t: number, id = 'L') {
      clock.set(t)
      return (await b.get())[id]!
    },
  }
  await b.upsert(limits)
  return b
}

const iso = (t: number | null | undefined) => (typeof t === 'number' ? new Date(t).toISOString() : String(t))

// ---------------------------------------------------------------------------------------------
// Hand-picked boundaries: [start, end) is a period, `next` the end of the one after it.
// ---------------------------------------------------------------------------------------------
interface BoundaryCase {
  name: string
  window: Window
  anchor?: number
  start: number
  end: number
  next: number
  /** More instants inside [start, end) that must still count the period's usage. */
  inside?: number[]
  /** Sanity checks of the case itself (weekday of the boundaries, etc.). */
  weekday?: number
}

const A = Date.UTC(2025, 0, 10, 7, 13) // an odd anchor: Friday 2025-01-10 07:13 UTC

const CASES: BoundaryCase[] = [
  // calendar periods (UTC)
  {
    name: 'hour',
    window: 'hour',
    start: Date.UTC(2025, 2, 12, 10),
    end: Date.UTC(2025, 2, 12, 11),
    next: Date.UTC(2025, 2, 12, 12),
    inside: [Date.UTC(2025, 2, 12, 10, 59, 59)],
  },
  { name: 'hour across midnight', window: 'hour', start: Date.UTC(2025, 2, 12, 23), end: Date.UTC(2025, 2, 13, 0), next: Date.UTC(2025, 2, 13, 1) },
  { name: 'day', window: 'day', start: Date.UTC(2025, 2, 12), end: Date.UTC(2025, 2, 13), next: Date.UTC(2025, 2, 14), inside: [Date.UTC(2025, 2, 12, 12)] },
  { name: 'day across the year end', window: 'day', start: Date.UTC(2025, 11, 31), end: Date.UTC(2026, 0, 1), next: Date.UTC(2026, 0, 2) },
  { name: 'day Feb 28 -> Feb 29 (2024)', window: 'day', start: Date.UTC(2024, 1, 28), end: Date.UTC(2024, 1, 29), next: Date.UTC(2024, 2, 1) },
  {
    name: 'week: ISO, Sunday 23:59:59.999 vs Monday 00:00',
    window: 'week',
    start: Date.UTC(2025, 2, 10),
    end: Date.UTC(2025, 2, 17),
    next: Date.UTC(2025, 2, 24),
    weekday: 1,
    inside: [Date.UTC(2025, 2, 13, 12), Date.UTC(2025, 2, 16), Date.UTC(2025, 2, 16, 23, 59, 59)],
  },
  {
    name: 'week across the year end (Mon 2024-12-30)',
    window: 'week',
    start: Date.UTC(2024, 11, 30),
    end: Date.UTC(2025, 0, 6),
    next: Date.UTC(2025, 0, 13),
    weekday: 1,
    inside: [Date.UTC(2025, 0, 1), Date.UTC(2025, 0, 5, 23)],
  },
  {
    name: 'month Jan 31 -> Feb 1',
    window: 'month',
    start: Date.UTC(2025, 0, 1),
    end: Date.UTC(2025, 1, 1),
    next: Date.UTC(2025, 2, 1),
    inside: [Date.UTC(2025, 0, 31), Date.UTC(2025, 0, 31, 12)],
  },
  {
    name: 'month Feb 2024 (leap): Feb 28 -> Feb 29 same period -> Mar 1',
    window: 'month',
    start: Date.UTC(2024, 1, 1),
    end: Date.UTC(2024, 2, 1),
    next: Date.UTC(2024, 3, 1),
    inside: [Date.UTC(2024, 1, 28, 23, 59, 59, 999), Date.UTC(2024, 1, 29), Date.UTC(2024, 1, 29, 12)],
  },
  {
    name: 'month Feb 2025 (not leap): Feb 28 -> Mar 1',
    window: 'month',
    start: Date.UTC(2025, 1, 1),
    end: Date.UTC(2025, 2, 1),
    next: Date.UTC(2025, 3, 1),
    inside: [Date.UTC(2025, 1, 28, 12)],
  },
  {
    name: 'month Dec 31 -> Jan 1 (year rollover)',
    window: 'month',
    start: Date.UTC(2025, 11, 1),
    end: Date.UTC(2026, 0, 1),
    next: Date.UTC(2026, 1, 1),
    inside: [Date.UTC(2025, 11, 31, 12)],
  },
  {
    name: 'month Feb 2100 (century, not leap)',
    window: 'month',
    start: Date.UTC(2100, 1, 1),
    end: Date.UTC(2100, 2, 1),
    next: Date.UTC(2100, 3, 1),
    inside: [Date.UTC(2100, 1, 28, 23)],
  },
  {
    name: 'month Feb 2000 (400-year leap)',
    window: 'month',
    start: Date.UTC(2000, 1, 1),
    end: Date.UTC(2000, 2, 1),
    next: Date.UTC(2000, 3, 1),
    inside: [Date.UTC(2000, 1, 29, 12)],
  },

  // anchored periods: [anchor + k·length)
  {
    name: 'hour anchored at 2025-01-10T07:13Z',
    window: 'hour',
    anchor: A,
    start: Date.UTC(2025, 2, 12, 9, 13),
    end: Date.UTC(2025, 2, 12, 10, 13),
    next: Date.UTC(2025, 2, 12, 11, 13),
    inside: [Date.UTC(2025, 2, 12, 10)],
  },
  {
    name: 'day anchored at 2025-01-10T07:13Z',
    window: 'day',
    anchor: A,
    start: Date.UTC(2025, 2, 12, 7, 13),
    end: Date.UTC(2025, 2, 13, 7, 13),
    next: Date.UTC(2025, 2, 14, 7, 13),
    inside: [Date.UTC(2025, 2, 13)],
  },
  {
    name: 'week anchored at 2025-01-10T07:13Z (Fridays)',
    window: 'week',
    anchor: A,
    start: Date.UTC(2025, 2, 7, 7, 13),
    end: Date.UTC(2025, 2, 14, 7, 13),
    next: Date.UTC(2025, 2, 21, 7, 13),
    weekday: 5,
    inside: [Date.UTC(2025, 2, 10)],
  },
  {
    name: 'month anchored on Jan 31 10:00 (2025): Jan 31 -> Feb 28',
    window: 'month',
    anchor: Date.UTC(2025, 0, 31, 10),
    start: Date.UTC(2025, 0, 31, 10),
    end: Date.UTC(2025, 1, 28, 10),
    next: Date.UTC(2025, 2, 31, 10),
    inside: [Date.UTC(2025, 1, 1), Date.UTC(2025, 1, 28, 9)],
  },
  {
    name: 'month anchored on the 31st (2025): Feb 28 10:00 -> Mar 31 10:00',
    window: 'month',
    anchor: Date.UTC(2025, 0, 31, 10),
    start: Date.UTC(2025, 1, 28, 10),
    end: Date.UTC(2025, 2, 31, 10),
    next: Date.UTC(2025, 3, 30, 10),
    inside: [Date.UTC(2025, 2, 1), Date.UTC(2025, 2, 30, 10), Date.UTC(2025, 2, 31, 9, 59)],
  },
  {
    name: 'month anchored on the 31st (2025): Mar 31 10:00 -> Apr 30 10:00 -> May 31 10:00',
    window: 'month',
    anchor: Date.UTC(2025, 0, 31, 10),
    start: Date.UTC(2025, 2, 31, 10),
    end: Date.UTC(2025, 3, 30, 10),
    next: Date.UTC(2025, 4, 31, 10),
    inside: [Date.UTC(2025, 3, 1)],
  },
  {
    name: 'month anchored on the 31st (2024, leap): Jan 31 -> Feb 29 10:00',
    window: 'month',
    anchor: Date.UTC(2024, 0, 31, 10),
    start: Date.UTC(2024, 0, 31, 10),
    end: Date.UTC(2024, 1, 29, 10),
    next: Date.UTC(2024, 2, 31, 10),
    inside: [Date.UTC(2024, 1, 28, 10), Date.UTC(2024, 1, 29, 9, 59)],
  },
  {
    name: 'month anchored on the 31st (2024, leap): Feb 29 10:00 -> Mar 31 10:00',
    window: 'month',
    anchor: Date.UTC(2024, 0, 31, 10),
    start: Date.UTC(2024, 1, 29, 10),
    end: Date.UTC(2024, 2, 31, 10),
    next: Date.UTC(2024, 3, 30, 10),
  },
  {
    name: 'month anchored on the 30th: Feb 28 -> Mar 30',
    window: 'month',
    anchor: Date.UTC(2025, 0, 30, 10),
    start: Date.UTC(2025, 1, 28, 10),
    end: Date.UTC(2025, 2, 30, 10),
    next: Date.UTC(2025, 3, 30, 10),
  },
  {
    name: 'month anchored on Dec 31 23:00: year rollover',
    window: 'month',
    anchor: Date.UTC(2024, 11, 31, 23),
    start: Date.UTC(2025, 11, 31, 23),
    end: Date.UTC(2026, 0, 31, 23),
    next: Date.UTC(2026, 1, 28, 23),
    inside: [Date.UTC(2026, 0, 1)],
  },

  // anchors in the future relative to now
  {
    name: 'hour anchored in the future (2031-06-06T05:13Z)',
    window: 'hour',
    anchor: Date.UTC(2031, 5, 6, 5, 13),
    start: Date.UTC(2025, 2, 12, 9, 13),
    end: Date.UTC(2025, 2, 12, 10, 13),
    next: Date.UTC(2025, 2, 12, 11, 13),
  },
  {
    name: 'day anchored in the future (2026-01-01T07:13Z)',
    window: 'day',
    anchor: Date.UTC(2026, 0, 1, 7, 13),
    start: Date.UTC(2025, 2, 12, 7, 13),
    end: Date.UTC(2025, 2, 13, 7, 13),
    next: Date.UTC(2025, 2, 14, 7, 13),
  },
  {
    name: 'week anchored in the future (Friday 2030-01-04T07:13Z)',
    window: 'week',
    anchor: Date.UTC(2030, 0, 4, 7, 13),
    start: Date.UTC(2025, 2, 7, 7, 13),
    end: Date.UTC(2025, 2, 14, 7, 13),
    next: Date.UTC(2025, 2, 21, 7, 13),
    weekday: 5,
  },
  {
    name: 'month anchored in the future (2030-05-31T10:00Z)',
    window: 'month',
    anchor: Date.UTC(2030, 4, 31, 10),
    start: Date.UTC(2025, 1, 28, 10),
    end: Date.UTC(2025, 2, 31, 10),
    next: Date.UTC(2025, 3, 30, 10),
  },
]

describe('window boundaries: consumed resets exactly at the boundary, resetsAt is the period end', () => {
  it.each(CASES)('$name', async (c) => {
    // the case itself is what it says
    expect(c.start < c.end && c.end < c.next).toBe(true)
    if (c.weekday !== undefined) for (const t of [c.start, c.end, c.next]) expect(new Date(t).getUTCDay(), iso(t)).toBe(c.weekday)
    if (c.window === 'week' && c.anchor === undefined) {
      for (const t of [c.start, c.end, c.next]) expect(t % DAY, `${iso(t)} is midnight`).toBe(0)
    }

    const b = await budget([limit('L', c.window, c.anchor)], c.start - 1)
    // the last instant of the period before
    let l = (await b.record('5')).L!
    expect([l.consumed, iso(l.resetsAt)]).toEqual(['5', iso(c.start)])

    // the first instant of this period: the earlier usage is gone
    l = await b.at(c.start)
    expect([l.consumed, iso(l.resetsAt)], `at start ${iso(c.start)}`).toEqual(['0', iso(c.end)])
    l = (await b.record('1')).L!
    expect([l.consumed, iso(l.resetsAt)]).toEqual(['1', iso(c.end)])

    for (const t of c.inside ?? []) {
      expect(t > c.start && t < c.end, `inside ${iso(t)}`).toBe(true)
      l = await b.at(t)
      expect([l.consumed, iso(l.resetsAt)], `inside at ${iso(t)}`).toEqual(['1', iso(c.end)])
    }

    // 1 ms before the boundary: still counted
    l = await b.at(c.end - 1)
    expect([l.consumed, iso(l.resetsAt)], `at end - 1 ms ${iso(c.end - 1)}`).toEqual(['1', iso(c.end)])
    // at the boundary: a new period
    l = await b.at(c.end)
    expect([l.consumed, iso(l.resetsAt)], `at end ${iso(c.end)}`).toEqual(['0', iso(c.next)])
    l = (await b.record('2')).L!
    expect([l.consumed, iso(l.resetsAt)]).toEqual(['2', iso(c.next)])
    l = await b.at(c.next - 1)
    expect(l.consumed).toBe('2')
    l = await b.at(c.next)
    expect(l.consumed).toBe('0')
    expect(l.resetsAt! > c.next).toBe(true)
  })

  it('never: one period for the life of the budget (resetsAt null, consumed never resets)', async () => {
    const b = await budget([limit('L', 'never'), limit('M', 'month')], Date.UTC(2025, 2, 12, 10))
    let all = await b.record('3')
    expect(all.L).toMatchObject({ consumed: '3', resetsAt: null })
    for (const t of [Date.UTC(2025, 3, 1), Date.UTC(2026, 0, 1), Date.UTC(2100, 2, 1), Date.UTC(2199, 11, 31, 23, 59, 59, 999)]) {
      b.clock.set(t)
      all = await b.get()
      expect(all.L, iso(t)).toMatchObject({ consumed: '3', resetsAt: null, remaining: String(Number(BIG) - 3) })
      expect(all.M!.consumed, iso(t)).toBe('0')
    }
    all = await b.record('4')
    expect(all.L).toMatchObject({ consumed: '7', resetsAt: null })
  })

  it('several windows of one budget each reset on their own boundary', async () => {
    // Sunday 2025-03-30 23:59:59.999 -> Monday 2025-03-31: hour, day and week reset; month does not
    const before = Date.UTC(2025, 2, 30, 23, 59, 59, 999)
    const b = await budget([limit('h', 'hour'), limit('d', 'day'), limit('w', 'week'), limit('m', 'month'), limit('n', 'never')], before)
    let all = await b.record('1')
    b.clock.set(before + 1)
    all = await b.get()
    expect(Object.fromEntries(Object.values(all).map((l) => [l.id, [l.consumed, iso(l.resetsAt)]]))).toEqual({
      h: ['0', iso(Date.UTC(2025, 2, 31, 1))],
      d: ['0', iso(Date.UTC(2025, 3, 1))],
      w: ['0', iso(Date.UTC(2025, 3, 7))],
      m: ['1', iso(Date.UTC(2025, 3, 1))],
      n: ['1', 'null'],
    })
    // one more day: the month resets too, the week does not
    b.clock.set(Date.UTC(2025, 3, 1))
    all = await b.get()
    expect(all.m!.consumed).toBe('0')
    expect(all.w!.consumed).toBe('0')
    expect(all.n!.consumed).toBe('1')
  })
})

// ---------------------------------------------------------------------------------------------
// Changing an anchor with an upsert (DESIGN.md / README: usage already counted is kept for limits
// whose id and window are unchanged).
// ---------------------------------------------------------------------------------------------
describe('an upsert that moves a limit anchor', () => {
  const now = Date.UTC(2025, 2, 12, 10) // Wed 10:00 UTC

  it.each([
    // the new current period starts before the old one did (Mar 11 11:00 < Mar 12 00:00)
    {
      name: 'day: calendar -> anchored at 11:00 (new period began earlier)',
      window: 'day' as const,
      anchor: Date.UTC(2025, 0, 10, 11),
      resetsAt: Date.UTC(2025, 2, 12, 11),
    },
    // ...and after it (Mar 12 07:13 > Mar 12 00:00)
    { name: 'day: calendar -> anchored at 07:13 (new period began later)', window: 'day' as const, anchor: A, resetsAt: Date.UTC(2025, 2, 13, 7, 13) },
    { name: 'month: calendar -> anchored on the 20th', window: 'month' as const, anchor: Date.UTC(2025, 0, 20), resetsAt: Date.UTC(2025, 2, 20) },
    { name: 'month: calendar -> anchored on the 5th', window: 'month' as const, anchor: Date.UTC(2025, 0, 5), resetsAt: Date.UTC(2025, 3, 5) },
    { name: 'week: calendar -> anchored on Fridays 07:13', window: 'week' as const, anchor: A, resetsAt: Date.UTC(2025, 2, 14, 7, 13) },
  ])('$name: resetsAt is the end of the new current period', async (c) => {
    const b = await budget([limit('L', c.window)], now)
    await b.record('3')
    const up = (await b.upsert([limit('L', c.window, c.anchor)])).L!
    expect(iso(up.resetsAt), 'upsert answer').toBe(iso(c.resetsAt))
    expect(iso((await b.get()).L!.resetsAt), 'get').toBe(iso(c.resetsAt))
    expect(refPeriod(c.window, now, c.anchor).end).toBe(c.resetsAt) // the expectation agrees with the reference
    // and the new boundary is where consumed resets
    const l = await b.at(c.resetsAt)
    expect([l.consumed, iso(l.resetsAt)]).toEqual(['0', iso(refPeriod(c.window, c.resetsAt, c.anchor).end!)])
  })

  it('keeps consumed (id and window unchanged) when only the anchor moves', async () => {
    const b = await budget([limit('L', 'day')], now)
    await b.record('3')
    const up = (await b.upsert([limit('L', 'day', A)])).L!
    expect(up.consumed).toBe('3')
  })
})

// ---------------------------------------------------------------------------------------------
// Randomized: the returned resetsAt and consumed agree with an independent JS reference.
// ---------------------------------------------------------------------------------------------

/** The period [start, end) containing t; end null for `never`. Calendar weeks from Monday. */
function refPeriod(window: Window, t: number, anchor?: number): { start: number; end: number | null } {
  const fixed = (a: number, len: number) => {
    const k = Math.floor((t - a) / len)
    return { start: a + k * len, end: a + (k + 1) * len }
  }
  switch (window) {
    case 'never':
      return { start: 0, end: null }
    case 'hour':
      return fixed(anchor ?? 0, HOUR)
    case 'day':
      return fixed(anchor ?? 0, DAY)
    case 'week': {
      if (anchor !== undefined) return fixed(anchor, WEEK)
      const d = new Date(t)
      const back = (d.getUTCDay() + 6) % 7 // days since Monday
      return {
        start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - back),
        end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - back + 7),
      }
    }
    case 'month': {
      const a = new Date(anchor ?? Date.UTC(1970, 0, 1))
      const day = a.getUTCDate()
      const timeOfDay = a.getTime() - Date.UTC(a.getUTCFullYear(), a.getUTCMonth(), day)
      // Date.UTC normalizes month -1 and 12 into the neighbouring years
      const startOf = (y: number, m: number) => {
        const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate()
        return Date.UTC(y, m, Math.min(day, lastDay)) + timeOfDay
      }
      const d = new Date(t)
      const y = d.getUTCFullYear()
      let m = d.getUTCMonth()
      if (startOf(y, m) > t) m -= 1
      return { start: startOf(y, m), end: startOf(y, m + 1) }
    }
  }
}

/** The seeded PRNG of test/support/prng.ts, so a failure can be replayed with WINDOWS_SEED. */
function rng(seed: number) {
  const next = prng(seed)
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo)), pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]! }
}

const SEED = Number(process.env.WINDOWS_SEED ?? 20250312)
const FROM = Date.UTC(1970, 0, 1)
const TO = Date.UTC(2200, 0, 1)
const CALENDAR: readonly Window[] = ['hour', 'day', 'week', 'month']

describe(`windows against a JS reference (seed ${SEED})`, () => {
  it('reference sanity: the hand-picked cases agree with refPeriod', () => {
    for (const c of CASES) {
      expect(refPeriod(c.window, c.start, c.anchor), c.name).toEqual({ start: c.start, end: c.end })
      expect(refPeriod(c.window, c.end - 1, c.anchor), c.name).toEqual({ start: c.start, end: c.end })
      expect(refPeriod(c.window, c.end, c.anchor), c.name).toEqual({ start: c.end, end: c.next })
    }
  })

  it('calendar windows: resetsAt and consumed over random instants 1970..2200 (and their boundaries)', async () => {
    const r = rng(SEED)
    const instants = new Set<number>([FROM, Date.UTC(1970, 0, 4, 23, 59, 59, 999), Date.UTC(1970, 0, 5), TO - 1])
    for (let i = 0; i < 300; i++) {
      const t = r.int(FROM, TO)
      instants.add(t)
      if (i % 2 === 0) {
        // probe a boundary of one window: its last instant and the first of the next period
        const end = refPeriod(r.pick(CALENDAR), t).end!
        instants.add(end - 1)
        if (end < TO) instants.add(end)
      }
    }
    // and runs of instants close together, so periods hold several records
    for (let i = 0; i < 20; i++) {
      let t = r.int(FROM, TO)
      for (let j = 0; j < 10; j++) {
        t += r.int(1, 2 * DAY)
        instants.add(t)
      }
    }
    const sorted = [...instants].filter((t) => t >= FROM && t < TO).sort((x, y) => x - y)

    const b = await budget([...CALENDAR.map((w) => limit(w, w)), limit('never', 'never')], sorted[0]!)
    const model = new Map<string, { start: number; count: number }>()
    let total = 0
    const mismatches: string[] = []
    for (const t of sorted) {
      b.clock.set(t)
      const got = await b.record('1')
      total++
      for (const w of CALENDAR) {
        const ref = refPeriod(w, t)
        const m = model.get(w)
        const count = m && m.start === ref.start ? m.count + 1 : 1
        model.set(w, { start: ref.start, count })
        const l = got[w]!
        if (l.resetsAt !== ref.end || l.consumed !== String(count)) {
          mismatches.push(`${w} at ${iso(t)}: resetsAt ${iso(l.resetsAt)} consumed ${l.consumed}, want ${iso(ref.end)} / ${count}`)
        }
      }
      if (got.never!.resetsAt !== null || got.never!.consumed !== String(total)) mismatches.push(`never at ${iso(t)}: ${JSON.stringify(got.never)}`)
      if (mismatches.length >= 10) break
    }
    expect(mismatches, `seed ${SEED}`).toEqual([])
    expect(sorted.length).toBeGreaterThan(400)
  })

  it('anchored windows: resetsAt for random anchors (day 28..31 favoured) and random instants', async () => {
    const r = rng(SEED + 1)
    const projectBudget = await budget([limit('x', 'day')], FROM)
    const mismatches: string[] = []
    for (let i = 0; i < 250; i++) {
      let anchor = r.int(0, TO)
      if (r.next() < 0.5) {
        // an anchor at the end of a month: the clamping cases
        const a = new Date(anchor)
        const y = a.getUTCFullYear()
        const m = a.getUTCMonth()
        const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate()
        anchor = Date.UTC(y, m, Math.min(r.int(28, 32), lastDay)) + r.int(0, DAY)
      }
      let t = r.int(FROM, TO)
      const probe = r.next()
      if (probe < 0.5) {
        const p = refPeriod(r.pick(CALENDAR), t, anchor)
        t = probe < 0.25 ? p.start : p.end! - 1
      }
      if (t < 0) continue
      projectBudget.clock.set(t)
      const got = await projectBudget.upsert(
        CALENDAR.map((w) => limit(w, w, anchor)),
        `a${i}`,
      )
      for (const w of CALENDAR) {
        const want = refPeriod(w, t, anchor).end
        if (got[w]!.resetsAt !== want) mismatches.push(`${w} anchor ${iso(anchor)} at ${iso(t)}: ${iso(got[w]!.resetsAt)}, want ${iso(want)}`)
      }
      if (mismatches.length >= 10) break
    }
    expect(mismatches, `seed ${SEED + 1}`).toEqual([])
  })
})
