// The same suite against both ClickHouse stores: the clickhouse-server that
// globalSetup starts (Debian's 18.16) and chDB (26.x) in a worker thread.
// Each run works in a throwaway database test_<random>.

import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { dailyUsage, insertEventsOnce, insertJournalOnce, type JournalRow, type UsageEventRow } from '../../src/infra/clickhouse/tables.js'
import { migrate, migrations } from '../../src/infra/clickhouse/migrations.js'
import type { EmbeddedStore } from '../../src/infra/clickhouse/embedded.js'
import { clickHouseEventSink } from '../../src/events/clickhouse.js'
import { canonicalDecimal, sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { openTestStore, type TestStore } from '../support/store.js'

const DAY_MS = 86_400_000
// 2026-11-10T00:00:00Z and the two days after it.
const D0 = Date.UTC(2026, 10, 10)

function event(id: string, over: Partial<UsageEventRow> = {}): UsageEventRow {
  return {
    project_id: 'p1',
    event_id: id,
    customer_id: 'c1',
    event_slug: 'tokens.used',
    feature_slug: 'tokens',
    value: '1.5',
    properties: '{}',
    ts_ms: D0 + 1_000,
    ...over,
  }
}

const backends: [kind: 'server' | 'embedded'][] = [['server'], ['embedded']]

describe.each(backends)('ClickHouse store: %s', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined
  const database = `test_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    opened = await openTestStore(kind, database)
    store = opened.store
  })

  afterAll(async () => {
    await opened?.close()
  })

  it('opens the requested backend and database', async () => {
    expect(store.kind).toBe(kind)
    const [row] = await store.query<{ db: string }>('SELECT currentDatabase() AS db')
    expect(row?.db).toBe(database)
  })

  it('applies the migrations once; applying again is a no-op', async () => {
    const first = await migrate(store)
    expect(first.applied).toEqual(migrations.map((m) => m.version))
    const second = await migrate(store)
    expect(second).toEqual({ applied: [], current: first.current })
    const tables = await store.query<{ name: string }>(`SELECT name FROM system.tables WHERE database = ${sqlLiteral(database)} ORDER BY name`)
    expect(tables.map((t) => t.name)).toEqual([
      'budget_journal',
      'invoice_lines',
      'schema_migrations',
      'usage_daily',
      'usage_daily_mv',
      'usage_event_ids',
      'usage_event_ids_mv',
      'usage_events',
      'usage_hourly',
      'usage_hourly_mv',
      'wallet_journal',
    ])
    const [count] = await store.query<{ n: string }>('SELECT count() AS n FROM schema_migrations')
    expect(Number(count?.n)).toBe(migrations.length)
  })

  it('round-trips events, including awkward strings and exact decimals', async () => {
    const props = JSON.stringify({ note: 'tab\there, newline\nthere, quote \' " and back\\slash', emoji: '✓' })
    const e = event('rt-1', { customer_id: 'c-rt', properties: props, value: '12345678901234567890.12345678' })
    expect(await insertEventsOnce(store, [e])).toEqual({ inserted: 1, skipped: 0 })
    const rows = await store.query<{ customer_id: string; properties: string; v: string; ts_ms: string }>(
      `SELECT customer_id, properties, toString(value) AS v, ts_ms FROM usage_events FINAL
       WHERE project_id = 'p1' AND event_id = 'rt-1'`,
    )
    expect(rows).toHaveLength(1)
    expect(rows[0]?.properties).toBe(props)
    expect(rows[0]?.v.replace(/0+$/, '')).toBe('12345678901234567890.12345678')
    expect(rows[0]?.ts_ms).toBe(String(D0 + 1_000))
  })

  it('counts a retried event once in the daily and hourly aggregates', async () => {
    const batch = [
      event('r-1', { customer_id: 'c-retry' }),
      event('r-2', { customer_id: 'c-retry', value: '0.25' }),
      event('r-3', { customer_id: 'c-retry', value: '2', ts_ms: D0 + DAY_MS + 5 }),
      // the same event twice in one batch
      event('r-3', { customer_id: 'c-retry', value: '2', ts_ms: D0 + DAY_MS + 5 }),
    ]
    expect(await insertEventsOnce(store, batch)).toEqual({ inserted: 3, skipped: 1 })
    // The worker was killed after the insert and the job runs again, this time
    // with one more event.
    const retry = [...batch, event('r-4', { customer_id: 'c-retry', value: '0.00000001', ts_ms: D0 + DAY_MS + 6 })]
    expect(await insertEventsOnce(store, retry)).toEqual({ inserted: 1, skipped: 4 })

    const days = await dailyUsage(store, {
      projectId: 'p1',
      customerId: 'c-retry',
      featureSlug: 'tokens',
      fromDay: '2026-11-01',
      toDay: '2026-11-30',
    })
    expect(days).toEqual([
      { day: '2026-11-10', feature_slug: 'tokens', value: '1.75', count: 2, refusedValue: '0', refusedCount: 0 },
      { day: '2026-11-11', feature_slug: 'tokens', value: '2.00000001', count: 2, refusedValue: '0', refusedCount: 0 },
    ])
    const [hourly] = await store.query<{ v: string; n: string }>(
      `SELECT toString(sum(value_sum)) AS v, sum(event_count) AS n FROM usage_hourly WHERE customer_id = 'c-retry'`,
    )
    expect(canonicalDecimal(hourly!.v)).toBe('3.75000001')
    expect(Number(hourly?.n)).toBe(4)
  })

  it('stores a twice-inserted event once in usage_events FINAL (the ReplacingMergeTree backstop)', async () => {
    const e = event('dup-raw', { customer_id: 'c-raw' })
    const db = store.database
    await store.insert(`${db}.usage_events`, [{ ...e, inserted_at: '2026-11-10 00:00:01' }])
    await store.insert(`${db}.usage_events`, [{ ...e, inserted_at: '2026-11-10 00:00:02' }])
    const [final] = await store.query<{ n: string }>(`SELECT count() AS n FROM usage_events FINAL WHERE customer_id = 'c-raw'`)
    expect(Number(final?.n)).toBe(1)
    const [byKey] = await store.query<{ n: string }>(`SELECT uniqExact(project_id, event_id) AS n FROM usage_events WHERE customer_id = 'c-raw'`)
    expect(Number(byKey?.n)).toBe(1)
  })

  it('writes and reads the budget journal once per movement', async () => {
    const moves: JournalRow[] = [
      { project_id: 'p1', budget_key: 'b-1', movement_id: 'm-1', kind: 'charge', hold_id: '', amount: '0.75', ts_ms: D0 },
      { project_id: 'p1', budget_key: 'b-1', movement_id: 'm-2', kind: 'settle', hold_id: 'h_1', amount: '0.4213', ts_ms: D0 + 1 },
      { project_id: 'p1', budget_key: 'b-1', movement_id: 'm-3', kind: 'expiry', hold_id: 'h_2', amount: '1.00000001', ts_ms: D0 + 2 },
    ]
    expect(await insertJournalOnce(store, moves)).toEqual({ inserted: 3, skipped: 0 })
    expect(await insertJournalOnce(store, moves)).toEqual({ inserted: 0, skipped: 3 })
    const rows = await store.query<{ movement_id: string; kind: string; hold_id: string; amount: string }>(
      `SELECT movement_id, kind, hold_id, amount FROM budget_journal FINAL WHERE project_id = 'p1' AND budget_key = 'b-1' ORDER BY movement_id`,
    )
    expect(rows).toEqual(moves.map(({ movement_id, kind: k, hold_id, amount }) => ({ movement_id, kind: k, hold_id, amount })))
    const [total] = await store.query<{ t: string }>(`SELECT toString(sum(toDecimal128(amount, 8))) AS t FROM budget_journal FINAL WHERE budget_key = 'b-1'`)
    expect(canonicalDecimal(total!.t)).toBe('2.17130001')
  })

  // Only chDB could block the loop (it runs the query in this machine's child process); a server is
  // reached over HTTP, so for it the test could not fail.
  it.runIf(kind === 'embedded')('keeps the event loop free while a heavy query runs', async () => {
    // A CPU-bound query long enough to see; chDB 26 is several times faster
    // than 18.16, so grow it until it takes at least 300 ms (bounded).
    for (let rows = 300_000_000, attempt = 0; attempt < 4; rows *= 4, attempt++) {
      let ticks = 0
      let maxGapMs = 0
      let last = performance.now()
      const timer = setInterval(() => {
        const now = performance.now()
        maxGapMs = Math.max(maxGapMs, now - last)
        last = now
        ticks++
      }, 5)
      const t0 = performance.now()
      try {
        await store.query(`SELECT sum(cityHash64(number)) AS s FROM numbers(${rows})`)
      } finally {
        clearInterval(timer)
      }
      const tookMs = performance.now() - t0
      if (tookMs < 300 && attempt < 3) continue
      // Had the query run on this thread, the interval could not have fired
      // during it: one gap would be as long as the query.
      expect(tookMs).toBeGreaterThan(300)
      expect(ticks).toBeGreaterThan(tookMs / 5 / 4)
      expect(maxGapMs).toBeLessThan(150)
      return
    }
  })

  it('inserts 10,000 events in one batch', async () => {
    const events = Array.from({ length: 10_000 }, (_, i) =>
      event(`bulk-${i}`, { customer_id: `c-bulk-${i % 10}`, value: '0.5', ts_ms: D0 + i, properties: `{"i":${i}}` }),
    )
    const t0 = performance.now()
    await store.insert(
      `${store.database}.usage_events`,
      events.map((e) => ({ ...e, inserted_at: '2026-11-10 00:00:00' })),
    )
    const insertMs = performance.now() - t0
    const t1 = performance.now()
    expect(await insertEventsOnce(store, events)).toEqual({ inserted: 0, skipped: 10_000 })
    const checkMs = performance.now() - t1
    console.log(`[${kind}] insert 10k rows: ${insertMs.toFixed(0)} ms; insertEventsOnce check of 10k stored rows: ${checkMs.toFixed(0)} ms`)
    const [row] = await store.query<{ n: string; v: string }>(
      `SELECT count() AS n, toString(sum(value_sum)) AS v FROM usage_daily WHERE customer_id LIKE 'c-bulk-%'`,
    )
    expect(Number(row?.n)).toBeGreaterThan(0)
    expect(canonicalDecimal(row!.v)).toBe('5000')
  })

  it('writes the ingest worker rows (numeric values) through the EventSink, once per replay', async () => {
    const sink = clickHouseEventSink(store)
    const rows = [
      { ...event('sink-1', { customer_id: 'c-sink' }), value: 3 },
      { ...event('sink-2', { customer_id: 'c-sink' }), value: 1e-7 },
      { ...event('sink-3', { customer_id: 'c-sink' }), value: 0.1 },
    ].map((r) => ({ ...r, status: 'accepted' as const, decision: 'claim' }))
    await sink.insertEvents(rows, 'batch-sink')
    await sink.insertEvents(rows, 'batch-sink')
    const days = await dailyUsage(store, { projectId: 'p1', customerId: 'c-sink', fromDay: '2026-11-10', toDay: '2026-11-10' })
    expect(days).toEqual([{ day: '2026-11-10', feature_slug: 'tokens', value: '3.1000001', count: 3, refusedValue: '0', refusedCount: 0 }])
  })

  it('looks up long keys in several queries and still skips every stored one', async () => {
    const long = (i: number): string => `${'k'.repeat(200)}-${i}`
    const events = Array.from({ length: 2_000 }, (_, i) => event(long(i), { customer_id: 'c-long', ts_ms: D0 + i }))
    expect(await insertEventsOnce(store, events.slice(0, 1_500))).toEqual({ inserted: 1_500, skipped: 0 })
    expect(await insertEventsOnce(store, events)).toEqual({ inserted: 500, skipped: 1_500 })
    const [row] = await store.query<{ n: string }>(`SELECT sum(event_count) AS n FROM usage_daily WHERE customer_id = 'c-long'`)
    expect(Number(row?.n)).toBe(2_000)
  })

  it('skips the lookup on a first attempt (and only dedups inside the batch)', async () => {
    const batch = [event('first-1', { customer_id: 'c-first' }), event('first-1', { customer_id: 'c-first' })]
    expect(await insertEventsOnce(store, batch, { firstAttempt: true })).toEqual({ inserted: 1, skipped: 1 })
    expect(await insertEventsOnce(store, batch)).toEqual({ inserted: 0, skipped: 2 })
  })

  it('answers a bad statement with an error and keeps working', async () => {
    await expect(store.query('SELECT no_such_column FROM usage_events')).rejects.toThrow(/no_such_column/)
    const [row] = await store.query<{ one: number }>('SELECT 1 AS one')
    expect(Number(row?.one)).toBe(1)
  })

  it.runIf(kind === 'embedded')('rejects pending calls when the chDB process dies and restarts it on the next call', async () => {
    const embedded = store as EmbeddedStore
    const pending = embedded.query('SELECT sum(cityHash64(number)) AS s FROM numbers(100000000)')
    await embedded.crashWorkerForTest()
    await expect(pending).rejects.toThrow(/ended before answering/)
    const [row] = await embedded.query<{ n: string }>(`SELECT count() AS n FROM usage_events WHERE event_id = 'rt-1'`)
    expect(Number(row?.n)).toBe(1)
    expect(embedded.starts).toBe(2)
  })
})
