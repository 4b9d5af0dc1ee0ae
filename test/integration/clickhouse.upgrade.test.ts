// Migration 8 (usage_events ordered for customer/time scans, usage_event_ids for the insert-once
// lookup), the aggregate rebuild and the TTL settings, on both stores: Debian's clickhouse-server
// 18.16 and chDB 26.x. Each store works in a throwaway database that starts at migration 7 with
// data in it, as an existing installation would.

import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { runCli } from '../../src/bin/cli/main.js'
import { applyTtl, EVENTS_ORDER_BY, migrate, migrations } from '../../src/infra/clickhouse/migrations.js'
import { canonicalDecimal, dateTimeUtc } from '../../src/infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { insertEventsOnce, rebuildAggregates, type UsageEventRow } from '../../src/infra/clickhouse/tables.js'
import { loadConfig } from '../../src/kernel/config.js'
import { openTestStore, type TestStore } from '../support/store.js'

const HOUR_MS = 3_600_000
// 2026-10-30T00:00Z: the seeded events span October and November 2026.
const T0 = Date.UTC(2026, 9, 30)
const VALUES = ['1.25', '0.00000001', '12345678901234.5', '3', '0.5']

/** 600 events: 3 customers, 2 features, every 7th refused, 5 days from T0 (two months). */
function seedEvents(): Required<UsageEventRow>[] {
  return Array.from({ length: 600 }, (_, i) => ({
    project_id: i % 10 === 0 ? 'p2' : 'p1',
    event_id: `evt-${i}`,
    customer_id: `c${i % 3}`,
    event_slug: 'tokens.used',
    feature_slug: i % 2 === 0 ? 'tokens' : 'calls',
    value: VALUES[i % VALUES.length] as string,
    properties: '{"n":1}',
    ts_ms: T0 + i * 12 * 60_000 + (i % 60) * 1000,
    status: i % 7 === 0 ? 'refused' : 'accepted',
    decision: 'claim',
  }))
}

/** Decimal text → units of 10^-8. */
const units = (text: string): bigint => {
  const [int = '0', frac = ''] = text.split('.')
  return BigInt(int) * 100_000_000n + BigInt(frac.padEnd(8, '0'))
}
const decimal = (u: bigint): string => canonicalDecimal(`${u / 100_000_000n}.${(u % 100_000_000n).toString().padStart(8, '0')}`)

type Bucket = { v: string; n: number; r: string; rn: number }

/** What usage_daily must say for these rows, computed here without ClickHouse. */
function expectedDaily(rows: readonly Required<UsageEventRow>[]): Record<string, Bucket> {
  const acc = new Map<string, { v: bigint; n: number; r: bigint; rn: number }>()
  for (const e of rows) {
    const key = `${e.project_id}|${e.customer_id}|${e.feature_slug}|${new Date(e.ts_ms).toISOString().slice(0, 10)}`
    const b = acc.get(key) ?? { v: 0n, n: 0, r: 0n, rn: 0 }
    if (e.status === 'refused') {
      b.r += units(String(e.value))
      b.rn += 1
    } else {
      b.v += units(String(e.value))
      b.n += 1
    }
    acc.set(key, b)
  }
  return Object.fromEntries([...acc].map(([k, b]) => [k, { v: decimal(b.v), n: b.n, r: decimal(b.r), rn: b.rn }]))
}

async function aggregate(store: ClickHouseStore, table: 'usage_daily' | 'usage_hourly'): Promise<Record<string, Bucket>> {
  const bucket = table === 'usage_daily' ? 'toString(day)' : "formatDateTime(hour, '%Y-%m-%d')"
  const rows = await store.query<{ k: string; v: string; n: string; r: string; rn: string }>(
    `SELECT concat(project_id, '|', customer_id, '|', feature_slug, '|', ${bucket}) AS k, toString(sum(value_sum)) AS v,
       sum(event_count) AS n, toString(sum(refused_sum)) AS r, sum(refused_count) AS rn
     FROM ${table} GROUP BY k HAVING n + rn > 0 ORDER BY k`,
  )
  // The hourly buckets are summed per day here, so both tables compare with expectedDaily().
  const out: Record<string, { v: bigint; n: number; r: bigint; rn: number }> = {}
  for (const row of rows) {
    const b = out[row.k] ?? { v: 0n, n: 0, r: 0n, rn: 0 }
    b.v += units(canonicalDecimal(row.v))
    b.n += Number(row.n)
    b.r += units(canonicalDecimal(row.r))
    b.rn += Number(row.rn)
    out[row.k] = b
  }
  return Object.fromEntries(Object.entries(out).map(([k, b]) => [k, { v: decimal(b.v), n: b.n, r: decimal(b.r), rn: b.rn }]))
}

async function count(store: ClickHouseStore, table: string): Promise<number> {
  const [row] = await store.query<{ n: string }>(`SELECT count() AS n FROM ${table}`)
  return Number(row?.n)
}

async function totals(store: ClickHouseStore): Promise<{ n: number; v: string }> {
  const [row] = await store.query<{ n: string; v: string }>('SELECT count() AS n, toString(sum(value)) AS v FROM usage_events')
  return { n: Number(row?.n), v: canonicalDecimal(row?.v ?? '0') }
}

async function tableNames(store: ClickHouseStore): Promise<string[]> {
  const rows = await store.query<{ name: string }>(`SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name`)
  return rows.map((r) => r.name)
}

const showCreate = async (store: ClickHouseStore, table: string): Promise<string> =>
  (await store.query<{ statement: string }>(`SHOW CREATE TABLE ${table}`))[0]?.statement ?? ''

const backends: [kind: 'server' | 'embedded'][] = [['server'], ['embedded']]

describe.each(backends)('usage_events upgrade, rebuild and TTL: %s', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined
  const database = `test_${randomBytes(6).toString('hex')}`
  const events = seedEvents()
  const expected = expectedDaily(events)
  const row = (e: Required<UsageEventRow>, insertedAtMs = T0) => ({ ...e, inserted_at: dateTimeUtc(insertedAtMs) })

  beforeAll(async () => {
    opened = await openTestStore(kind, database)
    store = opened.store
    await migrate(
      store,
      migrations.filter((m) => m.version <= 7),
    )
    // In four inserts, as the ingest worker would: the views feed the aggregates.
    for (let i = 0; i < events.length; i += 150)
      await store.insert(
        'usage_events',
        events.slice(i, i + 150).map((e) => row(e)),
      )
  })

  afterAll(async () => {
    await opened?.close()
  })

  it('migration 8 reorders a database with data: rows, sums and aggregates kept', async () => {
    const before = await totals(store)
    expect(before.n).toBe(events.length)
    expect(await aggregate(store, 'usage_daily')).toEqual(expected)
    // A copy left by a process that died while copying: dropped, never swapped in.
    await store.exec('CREATE TABLE usage_events_v8_0dead0 AS usage_events')
    await store.insert('usage_events_v8_0dead0', [row(events[0] as Required<UsageEventRow>)])

    expect((await migrate(store)).applied).toEqual([8])

    expect(await showCreate(store, 'usage_events')).toContain(`ORDER BY ${EVENTS_ORDER_BY}`)
    expect(await totals(store)).toEqual(before)
    expect(await aggregate(store, 'usage_daily')).toEqual(expected)
    expect(await aggregate(store, 'usage_hourly')).toEqual(expected)
    expect(await count(store, 'usage_event_ids')).toBe(events.length)
    expect(await tableNames(store)).toEqual([
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
  })

  it('new inserts reach the aggregates and usage_event_ids; a retried batch is skipped', async () => {
    const fresh: Required<UsageEventRow>[] = [0, 1, 2].map((i) => ({
      ...(events[i + 1] as Required<UsageEventRow>),
      event_id: `late-${i}`,
      ts_ms: T0 + 3 * HOUR_MS + i,
    }))
    expect(await insertEventsOnce(store, fresh)).toEqual({ inserted: 3, skipped: 0 })
    expect(await insertEventsOnce(store, fresh)).toEqual({ inserted: 0, skipped: 3 })
    events.push(...fresh)
    expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
    expect(await count(store, 'usage_event_ids')).toBe(events.length)
  })

  it('the rebuild repairs doubled aggregates, and twice gives what once gives', async () => {
    // A bare insert of a stored event: usage_events FINAL shows it once, the views counted it twice.
    await store.insert('usage_events', [row(events[5] as Required<UsageEventRow>, T0 + 1000)])
    expect(await aggregate(store, 'usage_daily')).not.toEqual(expectedDaily(events))

    const once = await rebuildAggregates(store, { fromDay: '2026-10-01', toDay: '2026-11-30' })
    expect(once.months.map((m) => m.month)).toEqual([202610, 202611])
    expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
    expect(await aggregate(store, 'usage_hourly')).toEqual(expectedDaily(events))
    const twice = await rebuildAggregates(store)
    expect(twice).toEqual(once)
    expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
    expect(await aggregate(store, 'usage_hourly')).toEqual(expectedDaily(events))
    // No scratch table is left behind.
    expect((await tableNames(store)).filter((t) => t.includes('rebuild'))).toEqual([])
  })

  it('the rebuild empties a month without events and refuses months past the events TTL', async () => {
    await store.insert('usage_daily', [
      { project_id: 'p1', customer_id: 'ghost', feature_slug: 'tokens', day: '2026-12-02', value_sum: '7', event_count: 1, refused_sum: '0', refused_count: 0 },
    ])
    expect(await rebuildAggregates(store, { fromDay: '2026-12-01', toDay: '2026-12-31' })).toEqual({
      months: [{ month: 202612, hourlyRows: 0, dailyRows: 0 }],
    })
    expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
    await expect(rebuildAggregates(store, { fromDay: '2026-10-01', eventsTtlDays: 30, nowMs: Date.UTC(2026, 11, 15) })).rejects.toThrow(/TTL/)
    await expect(rebuildAggregates(store, { fromDay: '2026-13-01' })).rejects.toThrow(/not a day/)
  })

  it('an interrupted swap is finished on the next start: rows that raced it are copied over', async () => {
    // The state a process leaves when it dies right after its RENAME: views dropped, the old
    // table as usage_events_v7, holding two rows a writer of the release before put there after
    // the copy.
    await store.exec('DROP TABLE usage_hourly_mv')
    await store.exec('DROP TABLE usage_daily_mv')
    await store.exec('DROP TABLE usage_event_ids_mv')
    await store.exec('CREATE TABLE usage_events_v7 AS usage_events')
    const raced: Required<UsageEventRow>[] = [0, 1].map((i) => ({
      ...(events[i] as Required<UsageEventRow>),
      event_id: `raced-${i}`,
      ts_ms: T0 + 5 * HOUR_MS + i,
    }))
    await store.insert(
      'usage_events_v7',
      [...raced, events[9] as Required<UsageEventRow>].map((e) => row(e)),
    )
    const eight = migrations.find((m) => m.version === 8)
    expect(eight).toBeDefined()
    await migrate(store, [{ ...(eight as (typeof migrations)[number]), version: 1008 }])

    events.push(...raced)
    expect(await count(store, 'usage_events FINAL')).toBe(events.length)
    expect(await tableNames(store)).not.toContain('usage_events_v7')
    // The raced rows missed the views (README: "Migration 8"); the rebuild counts them.
    expect(await aggregate(store, 'usage_daily')).not.toEqual(expectedDaily(events))
    await rebuildAggregates(store)
    expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
    expect(await aggregate(store, 'usage_hourly')).toEqual(expectedDaily(events))
    expect(await insertEventsOnce(store, raced)).toEqual({ inserted: 0, skipped: 2 })
  })

  it.runIf(kind === 'server')('`npm run cli -- rebuild-aggregates` rebuilds the months asked for', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-rebuild-'))
    try {
      let out = ''
      let err = ''
      const run = (...argv: string[]) =>
        runCli(argv, {
          env: { LOG_LEVEL: 'silent', METERING_DATA_DIR: dataDir, CLICKHOUSE_URL: inject('clickhouseUrl'), CLICKHOUSE_DATABASE: database },
          out: (t) => {
            out += t
          },
          err: (t) => {
            err += t
          },
          isTty: false,
        })
      await store.insert('usage_events', [row(events[3] as Required<UsageEventRow>, T0 + 2000)])
      expect(await aggregate(store, 'usage_daily')).not.toEqual(expectedDaily(events))
      expect(await run('rebuild-aggregates', '--from', '2026-11-01', '--to', '2026-11-30')).toBe(0)
      expect(JSON.parse(out).months.map((m: { month: number }) => m.month)).toEqual([202611])
      expect(await aggregate(store, 'usage_daily')).not.toEqual(expectedDaily(events)) // events[3] is in October
      expect(await run('rebuild-aggregates', '--from', '2026-10-01')).toBe(0)
      expect(await aggregate(store, 'usage_daily')).toEqual(expectedDaily(events))
      expect(await run('rebuild-aggregates', '--from', 'yesterday')).toBe(1)
      expect(err).toContain('not a day')
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })

  it('METERING_CLICKHOUSE_TTL_DAYS_<TABLE> reaches the table definition (skipped on 18.16)', async () => {
    const { clickhouseTtlDays } = loadConfig({ METERING_CLICKHOUSE_TTL_DAYS_USAGE_EVENTS: '400', METERING_CLICKHOUSE_TTL_DAYS_USAGE_DAILY: '1000' })
    expect(clickhouseTtlDays).toEqual({ usage_events: 400, usage_daily: 1000 })
    await expect(applyTtl(store, { usage_evnts: 3 })).rejects.toThrow(/no table usage_evnts/)
    const result = await applyTtl(store, clickhouseTtlDays)
    if (kind === 'server') {
      expect(result).toEqual({ changed: {}, skipped: expect.stringMatching(/^ClickHouse 18\.16.* has no TTL/) })
      expect(await showCreate(store, 'usage_events')).not.toContain('TTL')
      return
    }
    expect(result).toEqual({ changed: { usage_events: 400, usage_event_ids: 400, usage_daily: 1000 } })
    expect(await showCreate(store, 'usage_events')).toContain("TTL toDateTime(intDiv(ts_ms, 1000), 'UTC') + toIntervalDay(400)")
    expect(await showCreate(store, 'usage_event_ids')).toContain("TTL toDateTime(intDiv(ts_ms, 1000), 'UTC') + toIntervalDay(400)")
    expect(await showCreate(store, 'usage_daily')).toContain('TTL day + toIntervalDay(1000)')
    expect(await showCreate(store, 'usage_hourly')).not.toContain('TTL')
    // Applied again on the next start: nothing to change.
    expect(await applyTtl(store, clickhouseTtlDays)).toEqual({ changed: {} })
    expect(await applyTtl(store, { usage_daily: 0 })).toEqual({ changed: { usage_daily: 0 } })
    expect(await showCreate(store, 'usage_daily')).not.toContain('TTL')
    // The rows are still there (the TTL is far in the past of none of them).
    expect((await totals(store)).n).toBeGreaterThan(0)
  })
})
