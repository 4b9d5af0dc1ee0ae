// Runs (src/runs/README.md) over HTTP against a real gateway and Redis, time moved by the
// gateway's manual clock: start / consume / end / get, every consume reason, child runs to depth
// 3, expiry by the clock (lazily and by the sweep), idempotency, and what the wallet shows.
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { journalKey } from '../../src/wallet/keys.js'
import { RunSchema, ConsumeResponseSchema } from '../../src/runs/types.js'
import { WalletBalanceSchema } from '../../src/wallet/types.js'
import { entitlementStateKey } from '../../src/entitlements/keys.js'
import { expectError } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({ docsUrl: 'https://docs.metering.dev' }, T0)
})
afterAll(async () => {
  await gw?.close()
})

async function setup(topUp = '100') {
  const p = await gw.project()
  const applied = await gw.post('/v1/config/apply', RUNS_CATALOG, p.apiKey)
  expect(applied.status, JSON.stringify(applied.body)).toBe(200)
  if (topUp !== '0') {
    const t = await gw.post('/v1/wallet/top-up', { customerId: 'acme', amount: topUp, idempotencyKey: 'initial' }, p.apiKey)
    expect(t.status, JSON.stringify(t.body)).toBe(200)
  }
  const key = p.apiKey
  return {
    ...p,
    start: (body: Record<string, unknown>) => gw.post('/v1/runs/start', { customerId: 'acme', ...body }, key),
    consume: (runId: string, body: Record<string, unknown>) => gw.post(`/v1/runs/consume/${runId}`, body, key),
    end: (runId: string, status = 'completed') => gw.post(`/v1/runs/end/${runId}`, { status }, key),
    run: async (runId: string) => {
      const res = await gw.get(`/v1/runs/get/${runId}`, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(Value.Check(RunSchema, res.body)).toBe(true)
      return res.body
    },
    wallet: async (customerId = 'acme') => {
      const res = await gw.get(`/v1/wallet/balance?customerId=${customerId}`, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(Value.Check(WalletBalanceSchema, res.body)).toBe(true)
      return res.body
    },
  }
}

async function started(res: { status: number; body: any }): Promise<any> {
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(Value.Check(RunSchema, res.body)).toBe(true)
  return res.body
}

function consumed(res: { status: number; body: any }, reason: string, costAmountMinor?: number): any {
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(Value.Check(ConsumeResponseSchema, res.body)).toBe(true)
  expect(res.body.reason).toBe(reason)
  expect(res.body.accepted).toBe(reason === 'accepted' || reason === 'duplicate')
  if (costAmountMinor !== undefined) expect(res.body.costAmountMinor).toBe(costAmountMinor)
  return res.body
}

describe('run lifecycle', () => {
  it('start reserves from the wallet, consume prices events, end captures and releases', async () => {
    const T = gw.clock()
    const s = await setup('100')
    const run = await started(await s.start({ budgetAmountMinor: 5000, idempotencyKey: 'r1', workloadId: 'wl-1', traceId: 'tr-1' }))
    expect(run).toEqual({
      runId: run.runId,
      status: 'running',
      customerId: 'acme',
      currency: 'USD',
      workloadId: 'wl-1',
      traceId: 'tr-1',
      // A root run has no parent: null; a running run has no end: endedAt absent (README.md, "Shapes").
      parentRunId: null,
      workloadType: 'agent',
      budgetAmountMinor: 5000,
      consumedAmountMinor: 0,
      remainingAmountMinor: 5000,
      startedAt: T,
      expiresAt: T + 15 * 60_000,
      asOf: T,
    })
    expect(run).not.toHaveProperty('endedAt')
    let w = await s.wallet()
    expect([w.available.amount, w.held.amount, w.held.display_amount]).toEqual(['50', '50', '$50.00'])

    // calls: $0.002 each (linear): the run's cost of a feature is rounded up to whole cents once, so
    // 5 calls cost 1 cent in all and the 6th the next cent.
    const costs: number[] = []
    for (let i = 1; i <= 6; i++) costs.push(consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: `c${i}` }), 'accepted').costAmountMinor)
    expect(costs).toEqual([1, 0, 0, 0, 0, 1])
    // tokens, graduated: 900 tokens at $0.01 = $9; 200 more: 100 at $0.01 + 100 at $0.001 + the second tier's $1 flat fee = $2.10.
    consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 't1', properties: { tokens: 900 } }), 'accepted', 900)
    consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 't2', properties: { tokens: '200' } }), 'accepted', 210)
    // pkg: $0.05 per package of 10: 5 → 1 package; 5 more → still 1; 1 more → 2.
    consumed(await s.consume(run.runId, { featureSlug: 'pkg', idempotencyKey: 'p1', properties: { n: 5 } }), 'accepted', 5)
    consumed(await s.consume(run.runId, { featureSlug: 'pkg', idempotencyKey: 'p2', properties: { n: 5 } }), 'accepted', 0)
    const last = consumed(await s.consume(run.runId, { featureSlug: 'pkg', idempotencyKey: 'p3', properties: { n: 1 } }), 'accepted', 5)
    expect(last.run.consumedAmountMinor).toBe(2 + 900 + 210 + 10)
    expect(last.run.remainingAmountMinor).toBe(5000 - 1122)

    gw.clock.advance(1000)
    const ended = await started(await s.end(run.runId))
    expect([ended.status, ended.endedAt, ended.consumedAmountMinor, ended.remainingAmountMinor]).toEqual(['completed', T + 1000, 1122, 5000 - 1122])
    expect(await s.run(run.runId)).toEqual(ended)
    w = await s.wallet()
    expect([w.available.amount, w.held.amount]).toEqual(['88.78', '0'])
    // Ending again with the same status replays; with another is 409.
    expect((await s.end(run.runId)).body).toEqual(ended)
    expectError(await s.end(run.runId, 'failed'), 409, 'CONFLICT', 'https://docs.metering.dev')
    consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'late' }), 'not_running', 0)

    // The journal outbox holds the wallet's movements and the accepted events.
    const rows = (await gw.redis.lrange(journalKey(s.projectId), 0, -1)).map((r) => r.split('\t'))
    const wallet = rows.filter(([t]) => t === 'wallet_journal').map(([, j]) => JSON.parse(j!))
    expect(wallet.map((r) => [r.kind, r.amount, r.run_id])).toEqual([
      ['top_up', '10000000000', ''],
      ['hold', '5000000000', run.runId],
      ['capture', '1122000000', run.runId],
      ['release', '3878000000', run.runId],
    ])
    const events = rows.filter(([t]) => t === 'usage_events').map(([, j]) => JSON.parse(j!))
    expect(events).toHaveLength(11)
    expect(events[6]).toEqual({
      event_id: `${run.runId}:t1`,
      project_id: s.projectId,
      customer_id: 'acme',
      event_slug: 'llm.tokens',
      feature_slug: 'tokens',
      value: '900',
      properties: '{"tokens":900}',
      ts_ms: T,
      status: 'accepted',
      decision: `consume:${run.runId}`,
    })
  })

  it('answers every reason', async () => {
    const s = await setup('10')
    const run = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'r', ttlMs: 60_000 }))
    // duplicate: the same answer, nothing consumed again
    const first = consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'k', properties: { tokens: 5 } }), 'accepted', 5)
    const again = consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'k', properties: { tokens: 5 } }), 'duplicate', 5)
    expect(again.run).toEqual(first.run)
    // insufficient_budget: nothing consumed
    const over = consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'big', properties: { tokens: 96 } }), 'insufficient_budget', 96)
    expect(over.run.consumedAmountMinor).toBe(5)
    consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'fits', properties: { tokens: 95 } }), 'accepted', 95)
    // entitlement_denied: a feature not in the plan, a denied feature, a disabled customer
    consumed(await s.consume(run.runId, { featureSlug: 'other', idempotencyKey: 'o' }), 'entitlement_denied', 0)
    consumed(await s.consume(run.runId, { featureSlug: 'nope', idempotencyKey: 'n' }), 'entitlement_denied', 0)
    consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'd' }), 'insufficient_budget', 1)
    expect((await gw.post('/v1/access/update', { customerId: 'acme', updates: { customerDisabled: true } }, s.apiKey)).status).toBe(200)
    consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'x' }), 'entitlement_denied', 0)
    expect((await gw.post('/v1/access/update', { customerId: 'acme', updates: { customerDisabled: false } }, s.apiKey)).status).toBe(200)
    // a missing meter property is 400, a run of no one is 404
    expectError(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'bad', properties: {} }), 400, 'BAD_REQUEST', 'https://docs.metering.dev')
    // an event costing more than any run can hold (10^20 tokens ≈ 10^19 cents) is 400 too, counted nowhere
    const huge = await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'huge', properties: { tokens: '100000000000000000000' } })
    expectError(huge, 400, 'BAD_REQUEST', 'https://docs.metering.dev')
    expect(huge.body.error.details.issues[0].path).toBe('$.properties.tokens')
    expectError(await s.consume('run_999', { featureSlug: 'calls', idempotencyKey: 'z' }), 404, 'NOT_FOUND', 'https://docs.metering.dev')
    // expired: at the deadline the run expires (lazily, on this touch), its consumption is captured
    gw.clock.set(run.expiresAt)
    const expired = consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'late' }), 'expired', 0)
    expect([expired.run.status, expired.run.endedAt]).toEqual(['expired', run.expiresAt])
    consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'later' }), 'expired', 0)
    // a retry of an accepted event still says duplicate
    consumed(await s.consume(run.runId, { featureSlug: 'tokens', idempotencyKey: 'k', properties: { tokens: 5 } }), 'duplicate', 5)
    const w = await s.wallet()
    expect([w.available.amount, w.held.amount]).toEqual(['9', '0'])
  })

  it("consumes count against the customer's grants, once each: past the limit of an overage-none feature the answer is entitlement_denied until the period resets", async () => {
    const s = await setup('10')
    const run = await started(await s.start({ budgetAmountMinor: 500, idempotencyKey: 'capped' }))
    consumed(await s.consume(run.runId, { featureSlug: 'capped', idempotencyKey: 'c1' }), 'accepted', 1)
    consumed(await s.consume(run.runId, { featureSlug: 'capped', idempotencyKey: 'c1' }), 'duplicate', 1)
    consumed(await s.consume(run.runId, { featureSlug: 'capped', idempotencyKey: 'c2' }), 'accepted', 1)
    const third = consumed(await s.consume(run.runId, { featureSlug: 'capped', idempotencyKey: 'c3' }), 'entitlement_denied', 0)
    expect(third.run.consumedAmountMinor).toBe(2)
    // Counted once per accepted consume (the duplicate and the denied one count nothing), as the entitlement read shows.
    const list = await gw.post('/v1/access/entitlements/list', { customerId: 'acme' }, s.apiKey)
    const capped = list.body.find((e: any) => e.featurePlanVersion.feature.slug === 'capped')
    expect(capped.metadata.usage).toMatchObject({ usage: '2', limit: '2', remaining: '0', denied: true })
    expect(await gw.redis.hget(entitlementStateKey(s.projectId, 'acme'), 'capped')).toBe(String(Date.UTC(2025, 3, 1)))
    // The monthly period resets on April 1st: the feature may be used again (by a new run: this one expired).
    const before = gw.clock()
    gw.clock.set(Date.UTC(2025, 3, 1))
    const april = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'april' }))
    consumed(await s.consume(april.runId, { featureSlug: 'capped', idempotencyKey: 'c4' }), 'accepted', 1)
    gw.clock.set(before)
  })

  it('start: idempotent, 402 without funds, 409 on a reused key, 404 for a budgetKey that names no budget, 400 on bad input', async () => {
    const s = await setup('1')
    const a = await started(await s.start({ budgetAmountMinor: 60, idempotencyKey: 'same' }))
    gw.clock.advance(10)
    // The replay answers the same run, as it is at the replay's moment.
    expect(await started(await s.start({ budgetAmountMinor: 60, idempotencyKey: 'same' }))).toEqual({ ...a, asOf: a.asOf + 10 })
    expectError(await s.start({ budgetAmountMinor: 61, idempotencyKey: 'same' }), 409, 'CONFLICT', 'https://docs.metering.dev')
    const broke = await s.start({ budgetAmountMinor: 41, idempotencyKey: 'more' })
    expectError(broke, 402, 'BUDGET_EXCEEDED', 'https://docs.metering.dev')
    expect(broke.body.error.details.reason).toBe('insufficient_funds')
    await started(await s.start({ budgetAmountMinor: 40, idempotencyKey: 'more' }))
    expectError(await s.start({ budgetAmountMinor: 1, idempotencyKey: 'b', budgetKey: 'some-budget' }), 404, 'NOT_FOUND', 'https://docs.metering.dev')
    expectError(await s.start({ budgetAmountMinor: -1, idempotencyKey: 'neg' }), 400, 'BAD_REQUEST', 'https://docs.metering.dev')
    expectError(await s.start({ budgetAmountMinor: 1, idempotencyKey: 'eur', currency: 'EUR' }), 409, 'CONFLICT', 'https://docs.metering.dev')
    const w = await s.wallet()
    expect([w.available.amount, w.held.amount]).toEqual(['0', '1'])
    // The wallet of another customer is its own.
    expectError(
      await gw.post('/v1/runs/start', { customerId: 'globex', budgetAmountMinor: 1, idempotencyKey: 'g' }, s.apiKey),
      402,
      'BUDGET_EXCEEDED',
      'https://docs.metering.dev',
    )
  })
})

describe('asOf', () => {
  it("every answer carries the clock's time at the call: start, consume (the run in it), get, end, and a 409 end's run", async () => {
    const s = await setup('10')
    const T = gw.clock()
    const run = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'asof' }))
    expect(run.asOf).toBe(T)
    gw.clock.advance(7)
    const c = consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'c1' }), 'accepted', 1)
    expect(c.run.asOf).toBe(T + 7)
    gw.clock.advance(5)
    const read = await s.run(run.runId)
    expect([read.asOf, read.consumedAmountMinor]).toEqual([T + 12, 1])
    // A consume refused before any script runs answers no run; a duplicate is read at its own moment.
    gw.clock.advance(3)
    expect(consumed(await s.consume(run.runId, { featureSlug: 'calls', idempotencyKey: 'c1' }), 'duplicate').run.asOf).toBe(T + 15)
    gw.clock.advance(1)
    const ended = await started(await s.end(run.runId))
    expect([ended.asOf, ended.endedAt]).toEqual([T + 16, T + 16])
    gw.clock.advance(1)
    const again = await s.end(run.runId, 'failed')
    expectError(again, 409, 'CONFLICT', 'https://docs.metering.dev')
    expect(again.body.error.details.run.asOf).toBe(T + 17)
    expect((await s.run(run.runId)).asOf).toBe(T + 17)
  })
})

describe('child runs', () => {
  it('reserve from their parent to depth 3, and give back to it when they end', async () => {
    const T = gw.clock()
    const s = await setup('20')
    const root = await started(await s.start({ budgetAmountMinor: 1000, idempotencyKey: 'root' }))
    const child = await started(await s.start({ budgetAmountMinor: 500, idempotencyKey: 'child', parentRunId: root.runId }))
    // Not given: null, never "".
    expect([root.parentRunId, child.parentRunId, child.workloadId, child.traceId]).toEqual([null, root.runId, null, null])
    const grand = await started(await s.start({ budgetAmountMinor: 200, idempotencyKey: 'grand', parentRunId: child.runId }))
    const great = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'great', parentRunId: grand.runId, ttlMs: 3_600_000 }))
    expect(great.expiresAt).toBe(root.expiresAt) // never outlives its ancestors
    expect([
      (await s.run(root.runId)).remainingAmountMinor,
      (await s.run(child.runId)).remainingAmountMinor,
      (await s.run(grand.runId)).remainingAmountMinor,
    ]).toEqual([500, 300, 100])
    // the wallet holds the root's budget only
    expect((await s.wallet()).held.amount).toBe('10')

    consumed(await s.consume(great.runId, { featureSlug: 'tokens', idempotencyKey: 'a', properties: { tokens: 60 } }), 'accepted', 60)
    consumed(await s.consume(great.runId, { featureSlug: 'tokens', idempotencyKey: 'b', properties: { tokens: 41 } }), 'insufficient_budget', 41)
    const deny = await s.start({ budgetAmountMinor: 101, idempotencyKey: 'too-big', parentRunId: grand.runId })
    expectError(deny, 402, 'BUDGET_EXCEEDED', 'https://docs.metering.dev')
    expect(deny.body.error.details.reason).toBe('insufficient_budget')
    expectError(await s.start({ budgetAmountMinor: 1, idempotencyKey: 'orphan', parentRunId: 'run_424242' }), 404, 'NOT_FOUND', 'https://docs.metering.dev')

    const greatEnded = await started(await s.end(great.runId))
    expect([greatEnded.consumedAmountMinor, greatEnded.remainingAmountMinor]).toEqual([60, 40])
    const g = await s.run(grand.runId)
    expect([g.consumedAmountMinor, g.remainingAmountMinor]).toEqual([60, 140])
    consumed(await s.consume(grand.runId, { featureSlug: 'tokens', idempotencyKey: 'c', properties: { tokens: 40 } }), 'accepted', 40)

    // Ending the root ends its running descendants first (canceled), and settles the wallet once.
    gw.clock.advance(5)
    const rootEnded = await started(await s.end(root.runId))
    expect([rootEnded.status, rootEnded.consumedAmountMinor, rootEnded.remainingAmountMinor]).toEqual(['completed', 100, 900])
    for (const id of [child.runId, grand.runId]) {
      const r = await s.run(id)
      expect([r.status, r.endedAt]).toEqual(['canceled', T + 5])
    }
    expect((await s.run(child.runId)).consumedAmountMinor).toBe(100)
    const w = await s.wallet()
    expect([w.available.amount, w.held.amount]).toEqual(['19', '0'])
    expectError(await s.start({ budgetAmountMinor: 1, idempotencyKey: 'late-child', parentRunId: root.runId }), 409, 'CONFLICT', 'https://docs.metering.dev')
  })
})

describe('expiry', () => {
  it('runs past their deadline are expired by the sweep, children first, and their reservation returns', async () => {
    const T = gw.clock()
    const s = await setup('10')
    const root = await started(await s.start({ budgetAmountMinor: 300, idempotencyKey: 'root', ttlMs: 10_000 }))
    const child = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'child', parentRunId: root.runId, ttlMs: 5_000 }))
    consumed(await s.consume(child.runId, { featureSlug: 'tokens', idempotencyKey: 'a', properties: { tokens: 30 } }), 'accepted', 30)
    const match = `mg:{cat:${s.projectId}}:rx`
    gw.clock.set(T + 4_999)
    expect((await gw.sweepRuns(match)).expired).toBe(0)
    gw.clock.set(T + 5_000)
    expect((await gw.sweepRuns(match)).expired).toBe(1)
    const c = await s.run(child.runId)
    expect([c.status, c.endedAt]).toEqual(['expired', T + 5_000])
    expect((await s.run(root.runId)).remainingAmountMinor).toBe(270)
    gw.clock.set(T + 20_000)
    expect((await gw.sweepRuns(match)).expired).toBe(1)
    const r = await s.run(root.runId)
    expect([r.status, r.endedAt, r.consumedAmountMinor]).toEqual(['expired', T + 20_000, 30])
    const w = await s.wallet()
    expect([w.available.amount, w.held.amount]).toEqual(['9.7', '0'])
    expect((await gw.sweepRuns(match)).expired).toBe(0)
  })

  it('an ended run tree is kept 24 h after its root ended (get, replays), then forgotten by the sweep', async () => {
    const T = gw.clock()
    const s = await setup('10')
    const root = await started(await s.start({ budgetAmountMinor: 300, idempotencyKey: 'root' }))
    const child = await started(await s.start({ budgetAmountMinor: 100, idempotencyKey: 'child', parentRunId: root.runId }))
    const grand = await started(await s.start({ budgetAmountMinor: 50, idempotencyKey: 'grand', parentRunId: child.runId }))
    consumed(await s.consume(grand.runId, { featureSlug: 'tokens', idempotencyKey: 'a', properties: { tokens: 7 } }), 'accepted', 7)
    const other = await started(await s.start({ budgetAmountMinor: 10, idempotencyKey: 'other' }))
    await started(await s.end(root.runId))
    const match = `mg:{cat:${s.projectId}}:rx`
    gw.clock.set(T + 86_400_000 - 1)
    // `other` expires (15 minutes); the tree is kept
    expect(await gw.sweepRuns(match)).toMatchObject({ expired: 1, purged: 0 })
    consumed(await s.consume(grand.runId, { featureSlug: 'tokens', idempotencyKey: 'a', properties: { tokens: 7 } }), 'duplicate', 7)
    expect((await s.run(root.runId)).status).toBe('completed')
    gw.clock.set(T + 86_400_000)
    // the tree is forgotten: its runs, their start records and data; `other` (ended later) stays
    expect(await gw.sweepRuns(match)).toMatchObject({ expired: 0, purged: 3 })
    for (const id of [root.runId, child.runId, grand.runId])
      expectError(await gw.get(`/v1/runs/get/${id}`, s.apiKey), 404, 'NOT_FOUND', 'https://docs.metering.dev')
    expect((await s.run(other.runId)).status).toBe('expired')
    const fields = await gw.redis.hkeys(`mg:{cat:${s.projectId}}:rn:acme`)
    expect(fields.filter((f) => !f.startsWith(`${other.runId}:`)).sort()).toEqual(['s:other'])
    expect(await gw.redis.exists(`mg:{cat:${s.projectId}}:rd:${grand.runId}`)).toBe(0)
    expect((await s.wallet()).available.amount).toBe('9.93')
  })
})
