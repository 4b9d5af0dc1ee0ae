// No overspend under concurrency for runs leasing from a budget (DESIGN.md invariant 2): leased
// starts race with authorizes for one hard limit, consumes race inside each run (each reporting
// into the budget from another slot, in any order) with settles and charges, then everything ends
// at once. Each outcome is compared with a sequential reference: every request is either applied or
// refused only because it did not fit at its turn, and the budget's consumed is, to the cent, what
// the runs consumed plus what was settled and charged (and what its journal says).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import type { Balance } from '../../src/budgets/types.js'
import { formatUnits, parseAmount } from '../../src/kernel/money.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({}, Date.UTC(2025, 2, 12, 10, 0, 0))
})
afterAll(async () => {
  await gw?.close()
})

const units = (text: string) => (text.startsWith('-') ? -parseAmount(text.slice(1))! : parseAmount(text)!)

/** Every hard limit of an observed balance: consumed + held ≤ amount, and held ≥ 0. */
function assertNoOverspend(balance: Balance | undefined): void {
  if (!balance) return
  expect(units(balance.held)).toBeGreaterThanOrEqual(0n)
  for (const l of balance.limits) {
    if (l.enforce === 'hard') expect(units(l.consumed) + units(l.held) - units(l.amount), `limit ${l.id}`).toBeLessThanOrEqual(0n)
  }
}

const balanceOf = (res: { status: number; body: any }): Balance | undefined => (res.status === 200 ? res.body.balance : res.body.error?.details?.balance)

describe('leased runs under concurrency', () => {
  it('never pass a hard limit, and the budget adds up', async () => {
    const { apiKey, projectId } = await gw.project()
    expect((await gw.post('/v1/config/apply', RUNS_CATALOG, apiKey)).status).toBe(200)
    const limits = [
      { id: 'cap', window: 'never', enforce: 'hard', amount: '100' },
      { id: 'soft', window: 'day', enforce: 'soft', amount: '10' },
    ]
    expect((await gw.post('/v1/budgets/upsert', { key: 'agents', unit: 'USD', limits, holds: { defaultTtlMs: 3_600_000 } }, apiKey)).status).toBe(200)
    const budget = async () => (await gw.post('/v1/budgets/get', { key: 'agents' }, apiKey)).body.balance as Balance
    const post = (path: string, body: object) => gw.post(path, body, apiKey)

    // 1. 40 leased starts of $5 and 20 authorizes of $5 race for $100: exactly 20 fit, whichever.
    const round1 = await Promise.all([
      ...Array.from({ length: 40 }, (_, i) =>
        post('/v1/runs/start', {
          customerId: i % 2 === 0 ? 'acme' : 'globex',
          budgetAmountMinor: 500,
          idempotencyKey: `run-${i}`,
          budgetKey: 'agents',
          ttlMs: 3_600_000,
        }),
      ),
      ...Array.from({ length: 20 }, (_, i) => post('/v1/budgets/authorize', { key: 'agents', amount: '5', idempotencyKey: `hold-${i}` })),
    ])
    for (const r of round1) {
      expect([200, 402], JSON.stringify(r.body)).toContain(r.status)
      if (r.status === 402) expect(r.body.error.details.blocked.limitId).toBe('cap')
      assertNoOverspend(balanceOf(r))
    }
    const runs = round1
      .slice(0, 40)
      .filter((r) => r.status === 200)
      .map((r) => r.body)
    const holds = round1
      .slice(40)
      .filter((r) => r.status === 200)
      .map((r) => r.body)
    expect(runs.length + holds.length).toBe(20)
    let b = await budget()
    expect([b.held, b.limits[0]!.consumed]).toEqual(['100', '0'])

    // 2. In each run 10 consumes of 60 tokens (60 cents) race for its 500 cents: exactly 8 fit.
    // Meanwhile each hold settles for $2 (freeing $3) and 20 charges of $1 race for what settles free.
    const round2 = await Promise.all([
      ...runs.flatMap((run) =>
        Array.from({ length: 10 }, (_, i) =>
          post(`/v1/runs/consume/${run.runId}`, { featureSlug: 'tokens', idempotencyKey: `e-${i}`, properties: { tokens: 60 } }),
        ),
      ),
      ...holds.map((h) => post('/v1/budgets/settle', { key: 'agents', holdId: h.holdId, amount: '2' })),
      ...Array.from({ length: 20 }, (_, i) => post('/v1/budgets/charge', { key: 'agents', amount: '1', idempotencyKey: `charge-${i}` })),
    ])
    const consumes = round2.slice(0, runs.length * 10)
    for (const [n] of runs.entries()) {
      const mine = consumes.slice(n * 10, n * 10 + 10).map((r) => {
        expect(r.status).toBe(200)
        return r.body.reason
      })
      expect(mine.filter((r) => r === 'accepted')).toHaveLength(8)
      expect(mine.filter((r) => r === 'insufficient_budget')).toHaveLength(2)
    }
    for (const r of round2.slice(runs.length * 10, runs.length * 10 + holds.length)) expect(r.status).toBe(200)
    const charges = round2.slice(runs.length * 10 + holds.length)
    for (const r of [...round2.slice(runs.length * 10), ...charges]) assertNoOverspend(balanceOf(r))
    const charged = charges.filter((r) => r.status === 200).length
    for (const r of charges) expect([200, 402]).toContain(r.status)
    // A charge fits only in what the settles freed.
    expect(charged).toBeLessThanOrEqual(Math.min(20, 3 * holds.length))
    // The sequential reference: the leases hold what their runs did not consume yet.
    const reference = 480n * BigInt(runs.length) * 1_000_000n + (2n * BigInt(holds.length) + BigInt(charged)) * 100_000_000n
    b = await budget()
    expect(b.limits[0]!.consumed).toBe(formatUnits(reference))
    expect(b.held).toBe(formatUnits(20n * BigInt(runs.length) * 1_000_000n))
    if (charged < 20) expect(units(b.limits[0]!.remaining)).toBeLessThan(100_000_000n)

    // 3. Every run ends at once: the leases release their rest; the budget holds nothing.
    const ends = await Promise.all(runs.map((run) => post(`/v1/runs/end/${run.runId}`, { status: 'completed' })))
    for (const e of ends) expect([e.status, e.body.consumedAmountMinor]).toEqual([200, 480])
    b = await budget()
    expect([b.held, b.limits[0]!.consumed]).toEqual(['0', formatUnits(reference)])
    expect(await gw.redis.exists(`mg:{cat:${projectId}}:rl`)).toBe(0)

    // 4. 200 authorizes of $1 race for what is left: exactly floor(left) fit.
    const left = 10_000_000_000n - reference
    const round4 = await Promise.all(
      Array.from({ length: 200 }, (_, i) => post('/v1/budgets/authorize', { key: 'agents', amount: '1', idempotencyKey: `last-${i}` })),
    )
    for (const r of round4) assertNoOverspend(balanceOf(r))
    expect(round4.filter((r) => r.status === 200)).toHaveLength(Number(left / 100_000_000n))

    // The journal explains consumed: its rows add up to it, each movement once.
    const rows = (await gw.redis.lrange(budgetKeys(budgetTag(projectId, 'agents')).journal, 0, -1)).map((l) => JSON.parse(l.slice(l.indexOf('\t') + 1)))
    expect(rows.reduce((sum, r) => sum + units(r.amount), 0n)).toBe(reference)
    expect(new Set(rows.map((r) => r.movement_id)).size).toBe(rows.length)
    expect(rows.filter((r) => r.kind === 'lease_end')).toHaveLength(runs.length)
  })
})
