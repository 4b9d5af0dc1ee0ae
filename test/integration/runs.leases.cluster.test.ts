// Runs leasing from a budget on the real 3-master Redis Cluster: the budget (its own slot) and
// the runs (the project's slot) are touched by separate scripts, each within one slot. Also the
// lease rules that HTTP cannot reach: an orphaned lease (no run took it) is released at its
// deadline, and a report that reaches a lease after it closed still counts.
import { afterAll, describe, expect, it } from 'vitest'
import { budgetTag } from '../../src/budgets/keys.js'
import { BudgetService } from '../../src/budgets/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { deadlinesKey } from '../../src/runs/keys.js'
import { RunService } from '../../src/runs/service.js'
import { LEASE_GRACE_MS } from '../../src/runs/types.js'
import { sweepExpiredRuns } from '../../src/workers/runExpiry.js'
import { testCluster, uniquePrefix } from '../support/redis.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

const cluster = testCluster()
afterAll(() => cluster.quit())

const USD = 1_000_000n // one cent in units of 10^-8 USD

describe('runs leasing from a budget on a Redis Cluster', () => {
  it('start, consume, end and expire move the budget', async () => {
    const clock = manualClock(Date.UTC(2025, 2, 12, 10))
    const projectId = uniquePrefix()
    const budgets = new BudgetService(cluster, clock)
    const runs = new RunService(cluster, clock, budgets)
    expect((await new CatalogService(cluster, clock, budgets).apply(projectId, RUNS_CATALOG, 'test')).ok).toBe(true)
    expect((await budgets.upsert(projectId, { key: 'agents', unit: 'USD', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '50' }] })).ok).toBe(
      true,
    )
    const held = async () => {
      const b = await budgets.get(projectId, 'agents')
      if (!b.ok) throw new Error(b.message)
      return [b.value.balance.held, b.value.balance.limits[0]!.consumed]
    }

    const a = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: 2000, idempotencyKey: 'a', budgetKey: 'agents', ttlMs: 60_000 })
    const b = await runs.start(projectId, { customerId: 'globex', budgetAmountMinor: 2500, idempotencyKey: 'b', budgetKey: 'agents', ttlMs: 120_000 })
    if (!a.ok || !b.ok) throw new Error('start failed')
    const c = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: 600, idempotencyKey: 'c', budgetKey: 'agents' })
    expect(!c.ok && [c.kind, c.reason]).toEqual(['budget_exceeded', 'budget_exceeded'])
    expect(await held()).toEqual(['45', '0'])

    const consumed = await runs.consume(projectId, a.value.runId, { featureSlug: 'tokens', idempotencyKey: 'e', properties: { tokens: 120 } })
    expect(consumed.ok && [consumed.value.reason, consumed.value.costAmountMinor]).toEqual(['accepted', 120])
    expect((await runs.consume(projectId, b.value.runId, { featureSlug: 'calls', idempotencyKey: 'e' })).ok).toBe(true)
    expect(await held()).toEqual(['43.79', '1.21'])
    expect((await runs.end(projectId, a.value.runId, 'completed')).ok).toBe(true)
    expect(await held()).toEqual(['24.99', '1.21'])

    clock.advance(120_000)
    expect(await sweepExpiredRuns(cluster, runs, deadlinesKey(projectId))).toMatchObject({ expired: 1 })
    expect(await held()).toEqual(['0', '1.21'])
  })

  it('an orphaned lease is released at its deadline; a late report still counts', async () => {
    const clock = manualClock(Date.UTC(2025, 2, 12, 10))
    const projectId = uniquePrefix()
    const budgets = new BudgetService(cluster, clock)
    expect((await budgets.upsert(projectId, { key: 'k', unit: 'usd', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '10' }] })).ok).toBe(true)
    const open = (requestKey: string, cents: bigint, fingerprint = 'f') =>
      budgets.openLease(projectId, 'k', {
        amount: cents * USD,
        ttlMs: 1000,
        expiresAt: clock() + 1000 + LEASE_GRACE_MS,
        currency: 'USD',
        requestKey,
        fingerprint,
      })
    const first = await open('acme|x', 400n)
    if (!first.ok) throw new Error(first.message)
    // l_<n>, n = max(last + 1, now ms × 1000) (src/budgets/README.md, "Leases").
    expect([first.value.leaseId, first.value.state, first.value.balance.held]).toEqual([`l_${clock() * 1000}`, 'open', '4'])
    // The same request replays the lease; another is a conflict.
    const again = await open('acme|x', 400n)
    expect(again.ok && [again.value.leaseId, again.value.replayed, again.value.balance.held]).toEqual([first.value.leaseId, true, '4'])
    const other = await open('acme|x', 500n, 'g')
    expect(!other.ok && other.reason).toBe('idempotency_conflict')
    const second = await open('acme|y', 300n)
    if (!second.ok) throw new Error(second.message)

    // Reports only raise the reported total: repeated or out-of-order reports change nothing.
    const r1 = await budgets.reportLease(projectId, 'k', second.value.number, 150n * USD, 'report')
    const r0 = await budgets.reportLease(projectId, 'k', second.value.number, 100n * USD, 'report')
    expect(r1.ok && [r1.value.replayed, r1.value.balance.held, r1.value.balance.limits[0]!.consumed]).toEqual([false, '5.5', '1.5'])
    expect(r0.ok && [r0.value.replayed, r0.value.reported, r0.value.balance.held]).toEqual([true, 150n * USD, '5.5'])

    // Past the deadline (and the grace) both are released, not settled: only what was reported counts.
    clock.advance(1000 + LEASE_GRACE_MS)
    // The hold sweep's step for this budget closes both (it counts leases with holds).
    expect(await budgets.expire(budgetTag(projectId, 'k'))).toEqual({ expired: 2, purged: 0 })
    const after = await budgets.get(projectId, 'k')
    expect(after.ok && [after.value.balance.held, after.value.balance.limits[0]!.consumed]).toEqual(['0', '1.5'])
    // The run's final report after that still counts (like a record: usage that happened).
    const late = await budgets.reportLease(projectId, 'k', second.value.number, 250n * USD, 'end')
    expect(late.ok && [late.value.state, late.value.balance.held, late.value.balance.limits[0]!.consumed]).toEqual(['expired', '0', '2.5'])
    // A replayed start of an expired lease says so (the run service refuses to start on it).
    const replay = await open('acme|x', 400n)
    expect(replay.ok && [replay.value.replayed, replay.value.state]).toEqual([true, 'expired'])
  })

  it('a start retried after a crash between its lease and its run takes the same lease; a lease that ended first is 409 lease_closed', async () => {
    const T = Date.UTC(2025, 2, 12, 10)
    const clock = manualClock(T)
    const projectId = uniquePrefix()
    const budgets = new BudgetService(cluster, clock)
    const runs = new RunService(cluster, clock, budgets)
    expect((await budgets.upsert(projectId, { key: 'k', unit: 'USD', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '10' }] })).ok).toBe(true)
    // What RunService.start leases first for {customerId: 'acme', budgetAmountMinor: 300, idempotencyKey, budgetKey: 'k', ttlMs: 5000}.
    const fingerprint = JSON.stringify([300, 'USD', '', 5000, 'agent', '', '', 'k'])
    const leaseFor = (idempotencyKey: string) =>
      budgets.openLease(projectId, 'k', {
        amount: 300n * USD,
        ttlMs: 5000,
        expiresAt: clock() + 5000 + LEASE_GRACE_MS,
        currency: 'USD',
        requestKey: `acme|${idempotencyKey}`,
        fingerprint,
      })
    const crashed = await leaseFor('crashed')
    if (!crashed.ok) throw new Error(crashed.message)
    clock.advance(1000)
    const retried = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: 300, idempotencyKey: 'crashed', budgetKey: 'k', ttlMs: 5000 })
    if (!retried.ok) throw new Error(retried.message)
    // The same lease, and the first attempt's deadline.
    expect([retried.value.leaseId, retried.value.expiresAt]).toEqual([crashed.value.leaseId, T + 5000])
    const b = await budgets.get(projectId, 'k')
    expect(b.ok && b.value.balance.held).toBe('3')

    expect((await leaseFor('late')).ok).toBe(true)
    clock.advance(5000 + LEASE_GRACE_MS)
    const late = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: 300, idempotencyKey: 'late', budgetKey: 'k', ttlMs: 5000 })
    expect(!late.ok && [late.kind, late.reason]).toEqual(['conflict', 'lease_closed'])
    // The run of the first start expired with its lease: the budget holds nothing.
    expect((await runs.get(projectId, retried.value.runId)).ok).toBe(true)
    const after = await budgets.get(projectId, 'k')
    expect(after.ok && [after.value.balance.held, after.value.balance.limits[0]!.consumed]).toEqual(['0', '0'])
  })
})
