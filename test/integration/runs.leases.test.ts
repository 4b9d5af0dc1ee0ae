// Runs leasing from a budget (src/runs/README.md "Leasing from a budget", src/budgets/README.md
// "Leases") over HTTP against a real gateway and Redis, time moved by the gateway's manual clock:
// the lease shows in the budget's held, consumes move into its consumed, ending releases the
// rest; hard limits deny the start with the budget's 402; idempotent starts; expiry lazily and by
// the sweep; the budget journal explains consumed; the wallet is never touched.
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { endRun } from '../../src/runs/redis.js'
import { RunSchema } from '../../src/runs/types.js'
import { walletKeys } from '../../src/wallet/keys.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({}, T0)
})
afterAll(async () => {
  await gw?.close()
})

async function setup(budget: Record<string, unknown>, topUp?: string) {
  const p = await gw.project()
  expect((await gw.post('/v1/config/apply', RUNS_CATALOG, p.apiKey)).status).toBe(200)
  if (topUp) expect((await gw.post('/v1/wallet/top-up', { customerId: 'acme', amount: topUp, idempotencyKey: 'initial' }, p.apiKey)).status).toBe(200)
  const up = await gw.post('/v1/budgets/upsert', { key: 'agents', unit: 'USD', ...budget }, p.apiKey)
  expect(up.status, JSON.stringify(up.body)).toBe(200)
  const key = p.apiKey
  return {
    ...p,
    start: (body: Record<string, unknown>) => gw.post('/v1/runs/start', { customerId: 'acme', budgetKey: 'agents', ...body }, key),
    consume: (runId: string, key2: string, tokens: number) =>
      gw.post(`/v1/runs/consume/${runId}`, { featureSlug: 'tokens', idempotencyKey: key2, properties: { tokens } }, key),
    end: (runId: string, status = 'completed') => gw.post(`/v1/runs/end/${runId}`, { status }, key),
    getRun: async (runId: string) => {
      const res = await gw.get(`/v1/runs/get/${runId}`, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return res.body
    },
    /** The budget's [held, consumed of each limit...]. */
    budget: async (budgetKey = 'agents') => {
      const res = await gw.post('/v1/budgets/get', { key: budgetKey }, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return [res.body.balance.held, ...res.body.balance.limits.map((l: { consumed: string }) => l.consumed)]
    },
    /** The budget_journal rows queued in the budget's outbox. */
    journal: async (budgetKey = 'agents') =>
      (await gw.redis.lrange(budgetKeys(budgetTag(p.projectId, budgetKey)).journal, 0, -1)).map(
        (line) => JSON.parse(line.slice(line.indexOf('\t') + 1)) as Record<string, string>,
      ),
  }
}

function started(res: { status: number; body: any }): any {
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(Value.Check(RunSchema, res.body)).toBe(true)
  return res.body
}

function accepted(res: { status: number; body: any }, cost: number): any {
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect([res.body.reason, res.body.costAmountMinor]).toEqual(['accepted', cost])
  return res.body
}

/**
 * The lease id after `id` taken in the same millisecond: lease ids are `l_<n>`, n = max(last + 1,
 * now ms × 1000) (src/budgets/README.md, "Leases").
 */
const nextLeaseId = (id: string) => `l_${BigInt(id.slice(2)) + 1n}`

const CAP = {
  limits: [
    { id: 'cap', window: 'never', enforce: 'hard', amount: '100' },
    { id: 'daily', window: 'day', enforce: 'soft', amount: '5' },
  ],
}

describe('runs leasing from a budget', () => {
  it('the lease is held by the budget, consumes move into consumed, ending releases the rest', async () => {
    const T = gw.clock()
    const s = await setup(CAP)
    const run = started(await s.start({ budgetAmountMinor: 5000, idempotencyKey: 'r1' }))
    expect(run).toMatchObject({
      status: 'running',
      budgetAmountMinor: 5000,
      remainingAmountMinor: 5000,
      budgetKey: 'agents',
      leaseId: `l_${T * 1000}`,
      expiresAt: T + 15 * 60_000,
    })
    const L = run.leaseId as string
    expect(await s.budget()).toEqual(['50', '0', '0'])

    // 600 tokens at $0.01: $6, reported at once; the soft daily limit of $5 is crossed.
    accepted(await s.consume(run.runId, 'a', 600), 600)
    expect(await s.budget()).toEqual(['44', '6', '6'])
    // A child reserves from its parent (nothing changes at the budget); its consumes count for the tree.
    const child = started(await s.start({ budgetAmountMinor: 1000, idempotencyKey: 'c1', parentRunId: run.runId, budgetKey: undefined }))
    expect([child.budgetKey, child.leaseId]).toEqual(['agents', L])
    expect(await s.budget()).toEqual(['44', '6', '6'])
    accepted(await s.consume(child.runId, 'b', 250), 250)
    expect(await s.budget()).toEqual(['41.5', '8.5', '8.5'])
    // A duplicate reports nothing again.
    expect((await s.consume(child.runId, 'b', 250)).body.reason).toBe('duplicate')
    expect(await s.budget()).toEqual(['41.5', '8.5', '8.5'])

    // Ending the root cancels the child, settles its $8.50 and releases the rest.
    const ended = started(await s.end(run.runId))
    expect([ended.status, ended.consumedAmountMinor, ended.remainingAmountMinor]).toEqual(['completed', 850, 4150])
    expect((await s.getRun(child.runId)).status).toBe('canceled')
    expect(await s.budget()).toEqual(['0', '8.5', '8.5'])
    // Ending again replays; the budget does not move.
    expect((await s.end(run.runId)).status).toBe(200)
    expect(await s.budget()).toEqual(['0', '8.5', '8.5'])
    // The wallet was never touched (this customer has none).
    expect(await gw.redis.exists(walletKeys(s.projectId, 'acme').wallet)).toBe(0)
    // Nothing left to settle.
    expect(await gw.redis.exists(`mg:{cat:${s.projectId}}:rl`)).toBe(0)

    // The budget journal explains consumed: a row per report, then the lease's end.
    const rows = await s.journal()
    expect(rows.map((r) => [r.kind, r.hold_id, r.amount, r.movement_id, r.idempotency_key, r.unit])).toEqual([
      ['lease', L, '6', `agents#lease:${L}:6`, 'r1', 'USD'],
      ['lease', L, '2.5', `agents#lease:${L}:8.5`, 'r1', 'USD'],
      ['lease_end', L, '0', `agents#lease_end:${L}`, 'r1', 'USD'],
    ])
  })

  it("a hard limit denies the start with the budget's 402, and nothing is started", async () => {
    const s = await setup({ limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '10' }] })
    const denied = await s.start({ budgetAmountMinor: 1500, idempotencyKey: 'big' })
    expect(denied.status).toBe(402)
    expect(denied.body.error.code).toBe('BUDGET_EXCEEDED')
    expect(denied.body.error.details).toMatchObject({
      kind: 'budget_exceeded',
      blocked: { limitId: 'cap', window: 'never', remaining: '10', held: '0', resetsAt: null, remedy: 'raise_limit' },
      balance: { remaining: '10', held: '0' },
    })
    const first = started(await s.start({ budgetAmountMinor: 800, idempotencyKey: 'r1' }))
    // 3 more do not fit beside the 8 leased; releasing (ending the run) would make them fit.
    const second = await s.start({ budgetAmountMinor: 300, idempotencyKey: 'r2' })
    expect([second.status, second.body.error.details.blocked.remedy, second.body.error.details.balance.held]).toEqual([402, 'release_holds', '8'])
    // An authorize on the budget is denied by the lease too.
    expect((await gw.post('/v1/budgets/authorize', { key: 'agents', amount: '2.01', idempotencyKey: 'h' }, s.apiKey)).status).toBe(402)
    accepted(await s.consume(first.runId, 'a', 500), 500)
    started(await s.end(first.runId))
    expect(await s.budget()).toEqual(['0', '5'])
    // Now 3 fits (5 left), and the denied key starts the run once retried: a 402 left no record.
    started(await s.start({ budgetAmountMinor: 300, idempotencyKey: 'r2' }))
    expect(await s.budget()).toEqual(['3', '5'])
  })

  it('refuses what it cannot lease: no budget, another unit, closed, ttl past maxTtlMs, a child with budgetKey', async () => {
    const s = await setup({ ...CAP, holds: { defaultTtlMs: 60_000, maxTtlMs: 3_600_000 } })
    const missing = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'a', budgetKey: 'nope' })
    expect([missing.status, missing.body.error.message]).toEqual([404, 'Budget nope does not exist in this project.'])
    expect((await gw.post('/v1/budgets/upsert', { key: 'tokens', unit: 'tokens', ...CAP }, s.apiKey)).status).toBe(200)
    const unit = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'a', budgetKey: 'tokens' })
    expect([unit.status, unit.body.error.code]).toEqual([409, 'CONFLICT'])
    expect(unit.body.error.message).toContain('does not count in USD')
    const eur = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'a', currency: 'EUR' })
    expect(eur.status).toBe(409)
    const ttl = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'a', ttlMs: 3_600_001 })
    expect([ttl.status, ttl.body.error.details.issues[0].path]).toEqual([400, '$.ttlMs'])
    const root = started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'root' }))
    const child = await s.start({ budgetAmountMinor: 10, idempotencyKey: 'child', parentRunId: root.runId })
    expect([child.status, child.body.error.details.issues[0].path]).toEqual([400, '$.budgetKey'])
    expect((await gw.post('/v1/budgets/upsert', { key: 'agents', unit: 'USD', ...CAP, closesAt: gw.clock() }, s.apiKey)).status).toBe(200)
    const closed = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'late' })
    expect([closed.status, closed.body.error.message]).toEqual([409, 'Budget agents is past its closesAt and takes no new leases.'])
    // Only the one lease is held.
    expect(await s.budget()).toEqual(['1', '0', '0'])
  })

  it('a start is applied once per idempotencyKey', async () => {
    const s = await setup(CAP, '100')
    const [a, b] = await Promise.all([s.start({ budgetAmountMinor: 700, idempotencyKey: 'r1' }), s.start({ budgetAmountMinor: 700, idempotencyKey: 'r1' })])
    expect(started(a).runId).toBe(started(b).runId)
    const c = started(await s.start({ budgetAmountMinor: 700, idempotencyKey: 'r1' }))
    expect([c.runId, c.leaseId]).toEqual([a.body.runId, a.body.leaseId])
    expect(await s.budget()).toEqual(['7', '0', '0'])
    // Another request with the key: 409, nothing leased.
    const other = await s.start({ budgetAmountMinor: 800, idempotencyKey: 'r1' })
    expect([other.status, other.body.error.message]).toEqual([409, 'This idempotencyKey started another run of this customer with a different request.'])
    // A key that started a run on the wallet: the lease this start took is given back at once.
    started(await gw.post('/v1/runs/start', { customerId: 'acme', budgetAmountMinor: 100, idempotencyKey: 'w' }, s.apiKey))
    const onWallet = await s.start({ budgetAmountMinor: 100, idempotencyKey: 'w' })
    expect(onWallet.status).toBe(409)
    expect(await s.budget()).toEqual(['7', '0', '0'])
    const rows = await s.journal()
    expect(rows.map((r) => [r.kind, r.hold_id, r.amount])).toEqual([['lease_end', nextLeaseId(a.body.leaseId), '0']])
    // The customer's wallet holds only the wallet run.
    const w = (await gw.get('/v1/wallet/balance?customerId=acme', s.apiKey)).body
    expect([w.available.amount, w.held.amount]).toEqual(['99', '1'])
  })

  it('a leased run expires at its deadline: lazily, or by the sweep, and its usage is settled', async () => {
    const T = gw.clock()
    const s = await setup(CAP)
    const lazy = started(await s.start({ budgetAmountMinor: 1000, idempotencyKey: 'lazy', ttlMs: 10_000 }))
    const swept = started(await s.start({ budgetAmountMinor: 2000, idempotencyKey: 'swept', ttlMs: 20_000 }))
    accepted(await s.consume(lazy.runId, 'a', 100), 100)
    accepted(await s.consume(swept.runId, 'a', 300), 300)
    expect(await s.budget()).toEqual(['26', '4', '4'])

    gw.clock.set(T + 10_000)
    // A consume past the deadline expires the run and settles its lease.
    expect((await s.consume(lazy.runId, 'b', 1)).body.reason).toBe('expired')
    expect(await s.budget()).toEqual(['17', '4', '4'])

    gw.clock.set(T + 20_000)
    const match = `mg:{cat:${s.projectId}}:rx`
    expect(await gw.sweepRuns(match)).toMatchObject({ expired: 1 })
    const r = await s.getRun(swept.runId)
    expect([r.status, r.consumedAmountMinor]).toEqual(['expired', 300])
    expect(await s.budget()).toEqual(['0', '4', '4'])
    expect(await gw.redis.exists(`mg:{cat:${s.projectId}}:rl`)).toBe(0)
    // The budget's lease deadlines (run deadline + 1 minute) pass later: nothing more happens.
    gw.clock.set(T + 20_000 + 60_000)
    expect(await s.budget()).toEqual(['0', '4', '4'])
    expect(swept.leaseId).toBe(nextLeaseId(lazy.leaseId))
    expect((await s.journal()).map((r) => [r.kind, r.hold_id, r.amount])).toEqual([
      ['lease', lazy.leaseId, '1'],
      ['lease', swept.leaseId, '3'],
      ['lease_end', lazy.leaseId, '0'],
      ['lease_end', swept.leaseId, '0'],
    ])
  })

  it('a settlement the gateway could not make is made by the sweep', async () => {
    const s = await setup(CAP)
    const run = started(await s.start({ budgetAmountMinor: 1000, idempotencyKey: 'r' }))
    accepted(await s.consume(run.runId, 'a', 200), 200)
    // A gateway that ended the run in Redis but died before settling its lease at the budget.
    const ended = await endRun(gw.redis, s.projectId, 'acme', gw.clock(), run.runId, 'completed')
    expect(ended.run?.status).toBe('completed')
    expect(await gw.redis.hget(`mg:{cat:${s.projectId}}:rl`, `acme\t${run.runId}`)).toBe(`${run.leaseId.slice(2)}|200|6|agents`)
    expect(await s.budget()).toEqual(['8', '2', '2'])
    expect(await gw.sweepRuns(`mg:{cat:${s.projectId}}:rx`)).toMatchObject({ expired: 0 })
    expect(await s.budget()).toEqual(['0', '2', '2'])
    expect(await gw.redis.exists(`mg:{cat:${s.projectId}}:rl`)).toBe(0)
  })
})
