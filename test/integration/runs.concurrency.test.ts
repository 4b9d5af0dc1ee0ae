// No overspend under concurrency (DESIGN.md invariant 2 for runs and wallets): many parallel
// root starts against one wallet, child starts and consumes racing on one parent, consumes racing
// inside children, and parallel ends. Each outcome is compared with a sequential reference: every
// request is either applied or refused only because it did not fit at its turn, and the money
// adds up to the cent at the end (wallet, runs and the journal outbox).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { journalKey } from '../../src/wallet/keys.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({}, Date.UTC(2025, 2, 12, 10, 0, 0))
})
afterAll(async () => {
  await gw?.close()
})

describe('runs under concurrency', () => {
  it('never overspend the wallet or a parent', async () => {
    const { apiKey, projectId } = await gw.project()
    expect((await gw.post('/v1/config/apply', RUNS_CATALOG, apiKey)).status).toBe(200)
    expect((await gw.post('/v1/wallet/top-up', { customerId: 'acme', amount: '10', idempotencyKey: 'cash' }, apiKey)).status).toBe(200)
    const start = (body: object) => gw.post('/v1/runs/start', { customerId: 'acme', ttlMs: 3_600_000, ...body }, apiKey)
    const consume = (runId: string, key: string, tokens: number) =>
      gw.post(`/v1/runs/consume/${runId}`, { featureSlug: 'tokens', idempotencyKey: key, properties: { tokens } }, apiKey)

    // 30 roots of 70 cents race for 1000 cents: exactly floor(1000 / 70) = 14 fit.
    const roots = await Promise.all(Array.from({ length: 30 }, (_, i) => start({ budgetAmountMinor: 70, idempotencyKey: `root-${i}` })))
    const okRoots = roots.filter((r) => r.status === 200).map((r) => r.body)
    expect(okRoots).toHaveLength(14)
    for (const r of roots) if (r.status !== 200) expect([r.status, r.body.error.details.reason]).toEqual([402, 'insufficient_funds'])
    let w = (await gw.get('/v1/wallet/balance?customerId=acme', apiKey)).body
    expect([w.available.amount, w.held.amount]).toEqual(['0.2', '9.8'])

    // On one root: 10 children of 15 cents and 20 consumes of 3 cents race for its 70 cents.
    const root = okRoots[0]
    const raced = await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => start({ budgetAmountMinor: 15, idempotencyKey: `child-${i}`, parentRunId: root.runId })),
      ...Array.from({ length: 20 }, (_, i) => consume(root.runId, `rc-${i}`, 3)),
    ])
    const children = raced
      .slice(0, 10)
      .filter((r) => r.status === 200)
      .map((r) => r.body)
    const childRefused = raced.slice(0, 10).filter((r) => r.status !== 200)
    const consumes = raced.slice(10).map((r) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200)
      return r.body
    })
    const accepted = consumes.filter((c) => c.reason === 'accepted').length
    for (const c of consumes) expect(['accepted', 'insufficient_budget']).toContain(c.reason)
    for (const r of childRefused) expect([r.status, r.body.error.details.reason]).toEqual([402, 'insufficient_budget'])
    const afterRace = (await gw.get(`/v1/runs/get/${root.runId}`, apiKey)).body
    // The sequential reference: what is left is what the applied requests left, never below zero,
    // and a refused request did not fit what was left (the remaining only shrinks during the race).
    expect(afterRace.remainingAmountMinor).toBe(70 - 3 * accepted - 15 * children.length)
    expect(afterRace.remainingAmountMinor).toBeGreaterThanOrEqual(0)
    if (accepted < 20) expect(afterRace.remainingAmountMinor).toBeLessThan(3)
    if (childRefused.length > 0) expect(afterRace.remainingAmountMinor).toBeLessThan(15)
    expect(afterRace.consumedAmountMinor).toBe(3 * accepted)

    // Inside each child, 10 consumes of 2 cents race for 15 cents: exactly 7 fit; a key sent 5
    // times at once is applied once.
    const inner = await Promise.all(
      children.flatMap((c) => [
        ...Array.from({ length: 10 }, (_, i) => consume(c.runId, `cc-${i}`, 2)),
        ...Array.from({ length: 5 }, () => consume(c.runId, 'cc-0', 2)),
      ]),
    )
    for (const [n, c] of children.entries()) {
      const mine = inner.slice(n * 15, n * 15 + 15).map((r) => r.body)
      const got = (await gw.get(`/v1/runs/get/${c.runId}`, apiKey)).body
      expect(got.consumedAmountMinor).toBe(14)
      expect(mine.filter((r) => r.reason === 'accepted')).toHaveLength(7)
      for (const r of mine) expect(['accepted', 'duplicate', 'insufficient_budget']).toContain(r.reason)
      // cc-0, sent 6 times: applied at most once; every other answer replays it or was refused with it.
      const sameKey = [mine[0], ...mine.slice(10)]
      const applied = sameKey.filter((r) => r.reason === 'accepted').length
      expect(applied).toBeLessThanOrEqual(1)
      if (applied === 0) expect(sameKey.every((r) => r.reason === 'insufficient_budget')).toBe(true)
    }

    const spent = 3 * accepted + 14 * children.length
    // Everything ends at once: children and roots in parallel (a root ends its running children first).
    const ends = await Promise.all([...children, ...okRoots].map((r) => gw.post(`/v1/runs/end/${r.runId}`, { status: 'completed' }, apiKey)))
    for (const e of ends) expect([200, 409]).toContain(e.status)
    const rootAfter = (await gw.get(`/v1/runs/get/${root.runId}`, apiKey)).body
    expect([rootAfter.status, rootAfter.consumedAmountMinor]).toEqual(['completed', spent])
    w = (await gw.get('/v1/wallet/balance?customerId=acme', apiKey)).body
    expect([w.available.ledger_amount, w.held.amount]).toEqual([(1000 - spent) * 1_000_000, '0'])

    // The outbox: one accepted usage event per accepted consume, captures summing to what was spent.
    const rows = (await gw.redis.lrange(journalKey(projectId), 0, -1)).map((r) => r.split('\t'))
    expect(rows.filter(([t]) => t === 'usage_events')).toHaveLength(accepted + 7 * children.length)
    const wallet = rows.filter(([t]) => t === 'wallet_journal').map(([, j]) => JSON.parse(j!))
    const sum = (kind: string) => wallet.filter((r) => r.kind === kind).reduce((s, r) => s + BigInt(r.amount), 0n)
    expect(sum('capture')).toBe(BigInt(spent) * 1_000_000n)
    expect(sum('hold')).toBe(14n * 70n * 1_000_000n)
    expect(sum('hold') - sum('capture')).toBe(sum('release'))
  })
})
