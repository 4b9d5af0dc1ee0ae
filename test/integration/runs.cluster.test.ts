// Runs and wallets on the real 3-master Redis Cluster: every script's keys share the project's
// hash tag, so start, consume (its MULTI read of the customer too), end, the sweep and
// applyToInvoice run unchanged there.
import { afterAll, describe, expect, it } from 'vitest'
import { manualClock } from '../../src/kernel/clock.js'
import { deadlinesKey } from '../../src/runs/keys.js'
import { RunService } from '../../src/runs/service.js'
import { WalletService } from '../../src/wallet/service.js'
import { sweepExpiredRuns } from '../../src/workers/runExpiry.js'
import { testCluster, uniquePrefix } from '../support/redis.js'

const cluster = testCluster()
afterAll(() => cluster.quit())

describe('runs on a Redis Cluster', () => {
  it('start, consume, end, expire and pay an invoice', async () => {
    const clock = manualClock(Date.UTC(2025, 2, 12, 10))
    const projectId = uniquePrefix()
    const wallet = new WalletService(cluster, clock)
    const runs = new RunService(cluster, clock)
    expect((await wallet.topUp(projectId, { customerId: 'c', amount: 500_000_000n, idempotencyKey: 't' })).ok).toBe(true)
    const root = await runs.start(projectId, { customerId: 'c', budgetAmountMinor: 300, idempotencyKey: 'r', ttlMs: 1000 })
    if (!root.ok) throw new Error(root.message)
    const child = await runs.start(projectId, { customerId: 'c', budgetAmountMinor: 100, idempotencyKey: 'k', parentRunId: root.value.runId })
    if (!child.ok) throw new Error(child.message)
    const denied = await runs.consume(projectId, child.value.runId, { featureSlug: 'calls', idempotencyKey: 'e' })
    expect(denied.ok && denied.value.reason).toBe('entitlement_denied')
    const ended = await runs.end(projectId, child.value.runId, 'completed')
    expect(ended.ok && ended.value.status).toBe('completed')
    clock.advance(1000)
    expect(await sweepExpiredRuns(cluster, runs, deadlinesKey(projectId))).toEqual({ projects: 1, expired: 1, purged: 0 })
    const after = await runs.get(projectId, root.value.runId)
    expect(after.ok && after.value.status).toBe('expired')
    const paid = await wallet.applyToInvoice(projectId, 'c', 'inv', 200_000_000n, 'USD', clock())
    expect(paid).toEqual({ allocations: [{ creditId: null, source: 'cash_wallet', amountLedger: 200_000_000n }], remainingLedger: 0n })
    const balance = await wallet.balance(projectId, 'c')
    expect(balance.ok && [balance.value.available.amount, balance.value.held.amount]).toEqual(['3', '0'])
  })
})
