// lua/authorizeHold-4.lua decides most authorizes on a fast path (no table per limit, no queue of
// writes) and leaves the rest to the general path (touchBudget, saveBudget, budgetReply). Both
// must answer and store the same. Each case runs one authorize on two budgets (same key, two
// projects) with the same configuration and history, except that one ("general") has a stale
// next-expiry bound: a hold
// of 1 ms, released at once, leaves nexp in the past, and a budget whose nexp has passed takes
// the general path (expireDue), which finds nothing due and ends with the same nexp. The other
// ("fast") never had a hold, so nothing is due and no window rolls: the fast path.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Redis } from 'ioredis'
import { BudgetService, type UpsertInput } from '../../src/budgets/service.js'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { manualClock } from '../../src/kernel/clock.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

let redis: Redis
beforeAll(() => {
  redis = testRedis()
})
afterAll(async () => {
  await redis.quit()
})

const T0 = Date.UTC(2025, 4, 1, 12)
const LIMITS: UpsertInput['limits'] = [
  { id: 'day', window: 'day', enforce: 'hard', amount: '10' },
  { id: 'month', window: 'month', enforce: 'soft', amount: '3' },
  { id: 'ever', window: 'never', enforce: 'hard', amount: '12.5' },
]

/** st's doubles (includes/budget.lua): seq, held hi, held lo, nexp, then 4 per limit. */
async function counters(project: string, key: string): Promise<number[]> {
  const st = await redis.hgetBuffer(budgetKeys(budgetTag(project, key)).budget, 'st')
  if (!st) throw new Error(`no st for ${key}`)
  return Array.from({ length: st.length / 8 }, (_, i) => st.readDoubleLE(i * 8))
}

/** What an authorize stores: counters, the hold record, the idempotency record, the open-hold index entry. */
async function stored(project: string, key: string, holdNumber: string | undefined, idem: string) {
  const k = budgetKeys(budgetTag(project, key))
  const all = await counters(project, key)
  return {
    // seq: "general" took a hold number more (its stale hold); a new hold takes the same on both.
    counters: holdNumber === undefined ? all.slice(1) : all,
    hold: holdNumber === undefined ? null : await redis.hgetBuffer(k.budget, `h${holdNumber}`),
    idem: await redis.hgetBuffer(k.budget, `i:${idem}`),
    indexed: holdNumber === undefined ? null : await redis.zscore(k.open, holdNumber),
  }
}

interface Case {
  input: Omit<UpsertInput, 'key'>
  /** Calls made on both budgets before the compared authorize, at T0. */
  before?: (service: BudgetService, project: string, key: string) => Promise<void>
  request: { amount: string; ttlMs?: number }
  expected: string
}

const CASES: Record<string, Case> = {
  'ok, the default ttl': { input: { limits: LIMITS }, request: { amount: '2.5' }, expected: 'ok' },
  'ok, a ttl of its own, on top of usage and holds': {
    input: { limits: LIMITS, holds: { defaultTtlMs: 1_000, maxTtlMs: 90_000 } },
    before: async (service, project, key) => {
      expect((await service.record(project, { key, amount: '4.00000001', idempotencyKey: 'r' })).ok).toBe(true)
    },
    request: { amount: '0.99999999', ttlMs: 90_000 },
    expected: 'ok',
  },
  'budget_exceeded (the day limit)': { input: { limits: LIMITS }, request: { amount: '10.00000001' }, expected: 'budget_exceeded' },
  ttl_exceeds_max: {
    input: { limits: LIMITS, holds: { defaultTtlMs: 1_000, maxTtlMs: 5_000 } },
    request: { amount: '1', ttlMs: 5_001 },
    expected: 'invalid_request',
  },
  budget_closed: { input: { limits: LIMITS, closesAt: T0 + 5 }, request: { amount: '1' }, expected: 'budget_closed' },
  'amount_overflow (soft limits only, totals near the exact range)': {
    input: { limits: [{ id: 'soft', window: 'never', enforce: 'soft', amount: '1' }] },
    before: async (service, project, key) => {
      // 900 of the largest amounts fit the exact range (about 9·10^21 of the unit); one more does not.
      const big = '9999999999999999999.99999999'
      for (let i = 0; i < 900; i += 50) {
        const batch = Array.from({ length: 50 }, (_, j) => service.record(project, { key, amount: big, idempotencyKey: `r${i + j}` }))
        for (const answer of await Promise.all(batch)) expect(answer.ok).toBe(true)
      }
    },
    request: { amount: '9999999999999999999' },
    expected: 'amount_overflow',
  },
}

describe('the authorize fast path answers and stores what the general path does', () => {
  test.each(Object.entries(CASES))('%s', async (_name, c) => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    const fast = uniquePrefix()
    const general = uniquePrefix()
    for (const project of [fast, general]) {
      await service.upsert(project, { key: 'k', ...c.input })
      await c.before?.(service, project, 'k')
    }
    const stale = await service.authorize(general, { key: 'k', amount: '0', ttlMs: 1, idempotencyKey: 'stale' })
    expect(stale.ok).toBe(true)
    if (stale.ok) expect((await service.release(general, { key: 'k', holdId: stale.value.holdId })).ok).toBe(true)
    clock.advance(10)
    // The paths' conditions: nothing due on "fast" (no hold ever), a passed bound on "general".
    expect((await counters(fast, 'k'))[3]).toBe(-1)
    expect((await counters(general, 'k'))[3]).toBe(T0 + 1)

    const a = await service.authorize(fast, { key: 'k', ...c.request, idempotencyKey: 'compared' })
    const b = await service.authorize(general, { key: 'k', ...c.request, idempotencyKey: 'compared' })
    expect(a).toEqual(b)
    expect(a.ok ? 'ok' : a.reason).toBe(c.expected)
    const hold = a.ok ? a.value.holdId.slice(2) : undefined
    expect(await stored(fast, 'k', hold, 'compared')).toEqual(await stored(general, 'k', hold, 'compared'))

    // And the stored state reads back the same on both, through the general path.
    clock.advance(1)
    expect(await service.get(fast, 'k')).toEqual(await service.get(general, 'k'))
  })

  test('a replay on the fast path is left to the general path and answers the first hold', async () => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    const project = uniquePrefix()
    await service.upsert(project, { key: 'k', limits: LIMITS })
    const first = await service.authorize(project, { key: 'k', amount: '1', idempotencyKey: 'same' })
    clock.advance(5)
    const again = await service.authorize(project, { key: 'k', amount: '1', idempotencyKey: 'same' })
    expect(first.ok && again.ok).toBe(true)
    if (first.ok && again.ok) {
      expect(again.value).toEqual({ ...first.value, replayed: true, balance: { ...first.value.balance, asOf: T0 + 5 } })
    }
    const conflict = await service.authorize(project, { key: 'k', amount: '2', idempotencyKey: 'same' })
    expect(!conflict.ok && conflict.reason).toBe('idempotency_conflict')
  })
})
