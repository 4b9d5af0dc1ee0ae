// Wallet movements and run events reach ClickHouse through the journal outbox (src/journal):
// wallet_journal (migration 5) and usage_events, exactly once, on clickhouse-server 18.16 and
// chDB, each in a throwaway database. The drain is narrowed to the test's project.
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { canonicalDecimal, sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { manualClock } from '../../src/kernel/clock.js'
import { drainJournal } from '../../src/journal/drain.js'
import { projectJournalPatterns } from '../../src/journal/keys.js'
import { RunService } from '../../src/runs/service.js'
import { WalletService } from '../../src/wallet/service.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { openTestStore, type TestStore } from '../support/store.js'

const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
const backends: ['server' | 'embedded'][] = [['server'], ['embedded']]

describe.each(backends)('wallet journal into ClickHouse (%s)', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined
  let redis: Redis
  const database = `test_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    opened = await openTestStore(kind, database, { migrate: true })
    store = opened.store
    redis = testRedis()
  })

  afterAll(async () => {
    redis?.disconnect()
    await opened?.close()
  })

  it('every wallet movement and accepted run event is stored once', async () => {
    const clock = manualClock(T0)
    const p = `p-${uniquePrefix()}`
    const catalog = new CatalogService(redis, clock, new BudgetService(redis, clock))
    expect((await catalog.apply(p, RUNS_CATALOG, 'test')).ok).toBe(true)
    const wallet = new WalletService(redis, clock)
    const runs = new RunService(redis, clock)
    expect((await wallet.topUp(p, { customerId: 'acme', amount: 1_000_000_000n, idempotencyKey: 't' })).ok).toBe(true)
    const grant = await wallet.grant(p, { customerId: 'acme', amount: 100_000_000n, source: 'promo', expiresAt: T0 + 60_000, idempotencyKey: 'g' })
    if (!grant.ok) throw new Error(grant.message)
    const run = await runs.start(p, { customerId: 'acme', budgetAmountMinor: 300, idempotencyKey: 'r' })
    if (!run.ok) throw new Error(run.message)
    const c = await runs.consume(p, run.value.runId, { featureSlug: 'tokens', idempotencyKey: 'e1', properties: { tokens: 150 } })
    expect(c.ok && c.value.reason).toBe('accepted')
    expect((await runs.end(p, run.value.runId, 'completed')).ok).toBe(true)
    await wallet.applyToInvoice(p, 'acme', 'inv_1', 50_000_000n, 'USD', clock())

    const match = projectJournalPatterns(p)
    const drained = await drainJournal({ redis, store, match })
    expect(drained).toMatchObject({ failed: 0, deadLettered: 0 })
    expect(await drainJournal({ redis, store, match })).toMatchObject({ entries: 0, inserted: 0 })

    const rows = await store.query<{ movement_id: string; kind: string; source: string; amount: string; run_id: string; invoice_id: string }>(
      `SELECT movement_id, kind, source, amount, run_id, invoice_id FROM ${database}.wallet_journal WHERE project_id = ${sqlLiteral(p)} ORDER BY movement_id`,
    )
    const id = run.value.runId
    expect(rows.map((r) => [r.movement_id, r.kind, r.source, r.amount])).toEqual([
      [`capture:${id}:1`, 'capture', 'promo', '100000000'],
      [`capture:${id}:2`, 'capture', 'cash_wallet', '50000000'],
      [`grant:${grant.value.creditId}`, 'credit_grant', 'promo', '100000000'],
      [`hold:${id}:1`, 'hold', 'promo', '100000000'],
      [`hold:${id}:2`, 'hold', 'cash_wallet', '200000000'],
      ['invoice:acme:inv_1:1', 'cash_use', 'cash_wallet', '50000000'],
      [`release:${id}:2`, 'release', 'cash_wallet', '150000000'],
      ['topup:acme:t', 'top_up', 'cash_wallet', '1000000000'],
    ])
    const events = await store.query<{ event_id: string; feature_slug: string; value: string }>(
      `SELECT event_id, feature_slug, toString(value) AS value FROM ${database}.usage_events WHERE project_id = ${sqlLiteral(p)}`,
    )
    expect(events.map((e) => ({ ...e, value: canonicalDecimal(e.value) }))).toEqual([{ event_id: `${id}:e1`, feature_slug: 'tokens', value: '150' }])
  })
})
