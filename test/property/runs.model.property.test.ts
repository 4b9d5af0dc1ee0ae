// Random operation sequences against an in-memory reference model of one customer's wallet and
// runs (TigerBeetle's Auditor idea). The model is written from src/runs/README.md and
// src/wallet/README.md, not from the Lua: cash and credits (priority order), root runs holding
// from the wallet, child runs to any depth holding from their parent, consumes priced per run
// and feature with the cost rounded up to cents once per run (graduated tokens: 1–1,000 at $0.01,
// then $0.001 plus a $1 flat fee), duplicates, ends that end descendants first, lazy expiry on
// every touch and the sweep. Every operation runs against both; the answers and the wallet must
// agree after every step. Seeded: a failure names its seed.
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { deadlinesKey } from '../../src/runs/keys.js'
import { RunService } from '../../src/runs/service.js'
import type { Run } from '../../src/runs/types.js'
import { WalletService } from '../../src/wallet/service.js'
import { sweepExpiredRuns } from '../../src/workers/runExpiry.js'
import { prng } from '../support/prng.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

const CENT = 1_000_000n // ledger units per cent

interface MCredit {
  id: string
  priority: number
  seq: number
  avail: bigint
  held: bigint
}
interface MRun {
  id: string
  parent: string | null
  budget: number
  consumed: number
  childHeld: number
  deadline: number
  status: string
  endedAt: number
  kids: string[]
  tokens: number
  records: Map<string, number>
  alloc: { credit: MCredit | null; amount: bigint }[]
}

/** Cost in cents of a run's tokens so far, rounded up: 1–1,000 at 1 cent, then 0.1 cent plus 100 cents once. */
function tokenCents(q: number): number {
  return q <= 1000 ? q : 1100 + Math.ceil((q - 1000) / 10)
}

class Model {
  cash = 0n
  heldCash = 0n
  funded = false
  credits: MCredit[] = []
  runs = new Map<string, MRun>()
  seq = 0

  order(): MCredit[] {
    return [...this.credits].sort((a, b) => b.priority - a.priority || a.seq - b.seq)
  }
  available(): bigint {
    return this.cash + this.credits.reduce((s, c) => s + c.avail, 0n)
  }
  held(): bigint {
    return this.heldCash + this.credits.reduce((s, c) => s + c.held, 0n)
  }

  end(r: MRun, status: string, now: number): void {
    for (const k of r.kids) {
      const kid = this.runs.get(k)!
      if (kid.status === 'running') this.end(kid, kid.deadline <= now ? 'expired' : 'canceled', now)
    }
    r.status = status
    r.endedAt = now
    if (r.parent) {
      const p = this.runs.get(r.parent)!
      p.consumed += r.consumed
      p.childHeld -= r.budget
    } else {
      let rest = BigInt(r.consumed) * CENT
      for (const a of r.alloc) {
        const use = rest < a.amount ? rest : a.amount
        rest -= use
        if (a.credit) {
          a.credit.held -= a.amount
          a.credit.avail += a.amount - use
        } else {
          this.heldCash -= a.amount
          this.cash += a.amount - use
        }
      }
    }
  }
  /** Lazy expiry on touch: true when the run was due. */
  touch(r: MRun, now: number): boolean {
    if (r.status === 'running' && r.deadline <= now) {
      this.end(r, 'expired', now)
      return true
    }
    return false
  }
}

function view(r: MRun) {
  // endedAt is absent while the run runs (README.md, "Shapes").
  const endedAt = r.status === 'running' ? {} : { endedAt: r.endedAt }
  return { status: r.status, budget: r.budget, consumed: r.consumed, remaining: r.budget - r.consumed - r.childHeld, ...endedAt, expiresAt: r.deadline }
}
function seen(r: Run) {
  return {
    status: r.status,
    budget: r.budgetAmountMinor,
    consumed: r.consumedAmountMinor,
    remaining: r.remainingAmountMinor,
    ...('endedAt' in r ? { endedAt: r.endedAt } : {}),
    expiresAt: r.expiresAt,
  }
}

let redis: Redis
/** What the random runs exercised, over all seeds: the last test checks every case came up. */
const covered = new Set<string>()
beforeAll(() => {
  redis = testRedis()
})
afterAll(() => redis.quit())

describe('runs against a reference model', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8])('seed %i', async (seed) => {
    const random = prng(seed)
    const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1))
    const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!
    const clock = manualClock(Date.UTC(2025, 2, 12, 10))
    const projectId = uniquePrefix()
    const catalog = new CatalogService(redis, clock, new BudgetService(redis, clock))
    expect((await catalog.apply(projectId, RUNS_CATALOG, 'test')).ok).toBe(true)
    const wallet = new WalletService(redis, clock)
    const runs = new RunService(redis, clock)
    const m = new Model()
    const ids: string[] = []

    for (let step = 0; step < 250; step++) {
      const now = clock()
      const op = random()
      const ctx = `seed ${seed} step ${step}`
      if (op < 0.08) {
        const cents = int(1, 5000)
        expect((await wallet.topUp(projectId, { customerId: 'acme', amount: BigInt(cents) * CENT, idempotencyKey: `t${step}` })).ok, ctx).toBe(true)
        m.cash += BigInt(cents) * CENT
        m.funded = true
      } else if (op < 0.14) {
        const cents = int(1, 300)
        const priority = int(0, 3) * 10
        const g = await wallet.grant(projectId, { customerId: 'acme', amount: BigInt(cents) * CENT, source: 'promo', priority, idempotencyKey: `g${step}` })
        if (!g.ok) throw new Error(`${ctx}: ${g.message}`)
        m.credits.push({ id: g.value.creditId, priority, seq: ++m.seq, avail: BigInt(cents) * CENT, held: 0n })
        m.funded = true
      } else if (op < 0.3) {
        // a root run
        const budget = int(0, 2500)
        const ttlMs = int(1, 120) * 1000
        const res = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: budget, idempotencyKey: `r${step}`, ttlMs })
        const need = BigInt(budget) * CENT
        if (!m.funded || m.available() < need) {
          expect(!res.ok && res.reason, ctx).toBe('insufficient_funds')
          covered.add('insufficient_funds')
          continue
        }
        if (!res.ok) throw new Error(`${ctx}: ${res.message}`)
        const r: MRun = {
          id: res.value.runId,
          parent: null,
          budget,
          consumed: 0,
          childHeld: 0,
          deadline: now + ttlMs,
          status: 'running',
          endedAt: 0,
          kids: [],
          tokens: 0,
          records: new Map(),
          alloc: [],
        }
        let rest = need
        for (const c of m.order()) {
          if (rest === 0n) break
          const take = c.avail < rest ? c.avail : rest
          if (take === 0n) continue
          c.avail -= take
          c.held += take
          rest -= take
          r.alloc.push({ credit: c, amount: take })
        }
        if (rest > 0n) {
          m.cash -= rest
          m.heldCash += rest
          r.alloc.push({ credit: null, amount: rest })
        }
        m.runs.set(r.id, r)
        ids.push(r.id)
        expect(seen(res.value), ctx).toEqual(view(r))
      } else if (op < 0.45 && ids.length > 0) {
        // a child run
        const parent = m.runs.get(pick(ids))!
        const budget = int(0, 1500)
        const ttlMs = int(1, 60) * 1000
        const res = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: budget, idempotencyKey: `c${step}`, parentRunId: parent.id, ttlMs })
        m.touch(parent, now)
        if (parent.status !== 'running') {
          expect(!res.ok && res.reason, ctx).toBe('parent_not_running')
          covered.add('parent_not_running')
          continue
        }
        if (parent.budget - parent.consumed - parent.childHeld < budget) {
          expect(!res.ok && res.reason, ctx).toBe('insufficient_budget')
          covered.add('child_insufficient_budget')
          continue
        }
        if (!res.ok) throw new Error(`${ctx}: ${res.message}`)
        const r: MRun = {
          id: res.value.runId,
          parent: parent.id,
          budget,
          consumed: 0,
          childHeld: 0,
          deadline: Math.min(now + ttlMs, parent.deadline),
          status: 'running',
          endedAt: 0,
          kids: [],
          tokens: 0,
          records: new Map(),
          alloc: [],
        }
        parent.childHeld += budget
        parent.kids.push(r.id)
        m.runs.set(r.id, r)
        ids.push(r.id)
        expect(seen(res.value), ctx).toEqual(view(r))
      } else if (op < 0.75 && ids.length > 0) {
        // Mostly the newest runs, so some run far enough to reach the second token tier.
        const r = m.runs.get(random() < 0.7 ? pick(ids.slice(-2)) : pick(ids))!
        const key = `k${int(0, 9)}`
        const tokens = int(0, 600)
        const res = await runs.consume(projectId, r.id, { featureSlug: 'tokens', idempotencyKey: key, properties: { tokens } })
        if (!res.ok) throw new Error(`${ctx}: ${res.message}`)
        let reason: string
        let cost = 0
        if (r.records.has(key)) {
          reason = 'duplicate'
          cost = r.records.get(key)!
        } else if (m.touch(r, now) || r.status === 'expired') reason = 'expired'
        else if (r.status !== 'running') reason = 'not_running'
        else {
          cost = tokenCents(r.tokens + tokens) - tokenCents(r.tokens)
          if (cost > r.budget - r.consumed - r.childHeld) reason = 'insufficient_budget'
          else {
            reason = 'accepted'
            r.consumed += cost
            r.tokens += tokens
            r.records.set(key, cost)
            if (r.tokens > 1000) covered.add('second tier')
          }
        }
        expect({ reason: res.value.reason, cost: res.value.costAmountMinor, run: seen(res.value.run) }, ctx).toEqual({ reason, cost, run: view(r) })
        covered.add(reason)
      } else if (op < 0.85 && ids.length > 0) {
        const r = m.runs.get(pick(ids))!
        const status = pick(['completed', 'canceled', 'failed'] as const)
        const res = await runs.end(projectId, r.id, status)
        const expired = m.touch(r, now)
        if (r.status === 'running') {
          m.end(r, status, now)
          expect(res.ok, ctx).toBe(true)
        } else if (r.status === status && !expired) expect(res.ok, ctx).toBe(true)
        else expect(!res.ok && res.reason, ctx).toBe('run_not_running')
        covered.add(`end:${r.status}`)
        const got = await runs.get(projectId, r.id)
        expect(got.ok && seen(got.value), ctx).toEqual(view(r))
      } else if (op < 0.95) {
        clock.advance(int(0, 15) * 1000)
      } else {
        await sweepExpiredRuns(redis, runs, deadlinesKey(projectId))
        for (const r of m.runs.values()) if (r.status === 'running' && r.deadline <= now) m.touch(r, now)
      }
      const b = await wallet.balance(projectId, 'acme')
      if (!b.ok) throw new Error('balance')
      expect([BigInt(b.value.available.ledger_amount), BigInt(b.value.held.ledger_amount)], ctx).toEqual([m.available(), m.held()])
      const live = m
        .order()
        .filter((c) => c.avail > 0n || c.held > 0n)
        .map((c) => [c.id, c.avail])
      expect(
        b.value.credits.map((c) => [c.id, BigInt(c.available.ledger_amount)]),
        ctx,
      ).toEqual(live)
    }
    // Finally every run agrees with the model.
    for (const r of m.runs.values()) {
      const got = await runs.get(projectId, r.id)
      m.touch(r, clock())
      expect(got.ok && seen(got.value), `seed ${seed} final ${r.id}`).toEqual(view(r))
    }
  })

  test('the seeds exercised every answer', () => {
    for (const c of [
      'accepted',
      'duplicate',
      'expired',
      'not_running',
      'insufficient_budget',
      'insufficient_funds',
      'parent_not_running',
      'child_insufficient_budget',
      'end:completed',
      'end:canceled',
      'end:failed',
      'end:expired',
      'second tier',
    ]) {
      expect(covered, c).toContain(c)
    }
  })
})
