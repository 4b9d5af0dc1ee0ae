// CLICKHOUSE_CLUSTER on real servers: three clickhouse-server 18.16 children and one ZooKeeper
// (test/support/clickhouseCluster.ts) carrying two clusters, metering_shards (a, b: 2 shards × 1
// replica) and metering_replicas (b, c: 1 shard × 2 replicas). The migrations run ON CLUSTER
// (src/infra/clickhouse/cluster.ts), events written through one node are read exactly once
// through another, with the reads the gateway makes, and a retried batch adds nothing. The same
// migrations without a cluster run on chDB and a single server in clickhouse.store.test.ts.

import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hourlyUsageByFeature, rawUsageByFeature } from '../../src/analytics/clickhouse.js'
import { migrate, migrations } from '../../src/infra/clickhouse/migrations.js'
import { openClickHouse, openHistory } from '../../src/infra/clickhouse/open.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { dailyUsage, insertEventsOnce, insertJournalOnce, type JournalRow, type UsageEventRow } from '../../src/infra/clickhouse/tables.js'
import { cycleUsage } from '../../src/invoices/clickhouse.js'
import { type ClickHouseClusterHandle, REPLICAS_CLUSTER, SHARDS_CLUSTER, startClickHouseCluster } from '../support/clickhouseCluster.js'
import { waitFor } from '../support/processes.js'

const DAY_MS = 86_400_000
const D0 = Date.UTC(2026, 10, 10)
const PROJECT = 'proj_cluster'
const CUSTOMERS = 24
const PER_CUSTOMER = 10
const SCALE = 100_000_000n

let root: string
let cluster: ClickHouseClusterHandle
const stores: ClickHouseStore[] = []

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'metering-chcluster-'))
  cluster = await startClickHouseCluster({ dataDir: root })
}, 120_000)

afterAll(async () => {
  await Promise.allSettled(stores.map((s) => s.close()))
  await cluster?.stop()
  await rm(root, { recursive: true, force: true })
}, 60_000)

/** Opens a store on `url` in `database`, migrated ON CLUSTER (what the gateway does with CLICKHOUSE_CLUSTER). */
async function open(url: string, database: string, onCluster: string): Promise<ClickHouseStore> {
  const store = await openHistory({ clickhouseUrl: url, clickhouseCluster: onCluster, clickhouseDatabase: database, dataDir: root })
  stores.push(store)
  return store
}

/** Units of 10^-8 of a decimal text. */
function units(text: string): bigint {
  const [whole, fraction = ''] = text.split('.')
  return BigInt(whole as string) * SCALE + BigInt(fraction.padEnd(8, '0'))
}

function decimal(u: bigint): string {
  const fraction = (u % SCALE).toString().padStart(8, '0').replace(/0+$/, '')
  return fraction === '' ? (u / SCALE).toString() : `${u / SCALE}.${fraction}`
}

/** CUSTOMERS × PER_CUSTOMER events over the day D0, two features, values with all 8 decimals (one past 2^64). */
function events(prefix: string): UsageEventRow[] {
  const rows: UsageEventRow[] = []
  for (let c = 0; c < CUSTOMERS; c++) {
    for (let i = 0; i < PER_CUSTOMER; i++) {
      const n = c * PER_CUSTOMER + i
      rows.push({
        project_id: PROJECT,
        event_id: `${prefix}-${n}`,
        customer_id: `c${String(c).padStart(2, '0')}`,
        event_slug: i % 2 === 0 ? 'tokens.used' : 'api.call',
        feature_slug: i % 2 === 0 ? 'tokens' : 'calls',
        value: n === 7 ? '98765432109876543210.12345678' : `${n % 13}.${String((n * 12_345_679) % 100_000_000).padStart(8, '0')}`,
        properties: '{}',
        ts_ms: D0 + (n % 24) * 3_600_000 + n,
      })
    }
  }
  return rows
}

/** The exact sums per (customer, feature) of `rows`. */
function expected(rows: UsageEventRow[]): Map<string, { sum: bigint; count: number }> {
  const out = new Map<string, { sum: bigint; count: number }>()
  for (const r of rows) {
    const k = `${r.customer_id}/${r.feature_slug}`
    const e = out.get(k) ?? { sum: 0n, count: 0 }
    out.set(k, { sum: e.sum + units(String(r.value)), count: e.count + 1 })
  }
  return out
}

async function count(store: ClickHouseStore, sql: string): Promise<number> {
  const [row] = await store.query<{ n: string }>(sql)
  return Number(row?.n ?? 0)
}

/** What the gateway reads of `customer`'s day, through `store`: the daily aggregate, the hourly one, the raw events, the invoice's cycle usage. */
async function checkReads(store: ClickHouseStore, customer: string, want: Map<string, { sum: bigint; count: number }>): Promise<void> {
  const tokens = want.get(`${customer}/tokens`) as { sum: bigint; count: number }
  const calls = want.get(`${customer}/calls`) as { sum: bigint; count: number }
  const range = { projectId: PROJECT, customerId: customer, fromMs: D0, toMs: D0 + DAY_MS }
  const daily = await dailyUsage(store, { projectId: PROJECT, customerId: customer, fromDay: '2026-11-10', toDay: '2026-11-10' })
  expect(daily.map((d) => [d.feature_slug, d.value, d.count])).toEqual([
    ['calls', decimal(calls.sum), calls.count],
    ['tokens', decimal(tokens.sum), tokens.count],
  ])
  const wanted = [
    { feature_slug: 'calls', usage: decimal(calls.sum) },
    { feature_slug: 'tokens', usage: decimal(tokens.sum) },
  ]
  const canonical = (rows: { feature_slug: string; usage: string }[]) => rows.map((r) => ({ feature_slug: r.feature_slug, usage: decimal(units(r.usage)) }))
  expect(canonical(await hourlyUsageByFeature(store, range))).toEqual(wanted)
  expect(canonical(await rawUsageByFeature(store, range))).toEqual(wanted)
  const cycle = await cycleUsage(store, {
    ...range,
    features: [
      { featureSlug: 'tokens', eventSlug: 'tokens.used', aggregationMethod: 'sum' },
      { featureSlug: 'calls', eventSlug: 'api.call', aggregationMethod: 'count' },
    ],
  })
  expect(cycle.get('tokens')).toBe(tokens.sum)
  expect(cycle.get('calls')).toBe(BigInt(calls.count) * SCALE)
}

describe('CLICKHOUSE_CLUSTER', () => {
  it('is refused without CLICKHOUSE_URL (chDB) and for a cluster the server does not know', async () => {
    await expect(openHistory({ clickhouseCluster: SHARDS_CLUSTER, dataDir: root })).rejects.toThrow(/CLICKHOUSE_CLUSTER=metering_shards needs CLICKHOUSE_URL/)
    await expect(openHistory({ clickhouseUrl: cluster.nodes.a.url, clickhouseCluster: 'nope', dataDir: root })).rejects.toThrow(/has no such cluster/)
  })

  it('2 shards: migrations ON CLUSTER once; events written through a are read exactly once through b; a retried batch adds nothing', async () => {
    const db = `test_${randomBytes(4).toString('hex')}`
    const a = await open(cluster.nodes.a.url, db, SHARDS_CLUSTER)
    const b = await openClickHouse({ url: cluster.nodes.b.url, dataDir: root, database: db, cluster: SHARDS_CLUSTER })
    stores.push(b)
    for (const store of [a, b]) {
      // Every node has the Replicated table and the Distributed one over it; schema_migrations too.
      const engines = new Map(
        (await store.query<{ name: string; engine: string }>(`SELECT name, engine FROM system.tables WHERE database = '${db}'`)).map((r) => [r.name, r.engine]),
      )
      expect(engines.get('usage_events_local')).toBe('ReplicatedReplacingMergeTree')
      expect(engines.get('usage_events')).toBe('Distributed')
      expect(engines.get('usage_daily_local')).toBe('ReplicatedSummingMergeTree')
      expect(engines.get('schema_migrations')).toBe('Distributed')
      expect(engines.get('usage_daily_mv')).toBe('MaterializedView')
      // Migration 8's sort key, on the table that holds the rows.
      const [local] = await store.query<{ k: string }>(`SELECT sorting_key AS k FROM system.tables WHERE database = '${db}' AND name = 'usage_events_local'`)
      expect(local?.k).toBe('project_id, customer_id, ts_ms, event_id')
      // Applied once, seen by every node: a second migrate() changes nothing.
      expect(await migrate(store, migrations, { cluster: SHARDS_CLUSTER })).toEqual({ applied: [], current: 8 })
    }
    expect(await count(b, `SELECT count() AS n FROM ${db}.schema_migrations`)).toBe(migrations.length)

    const batch = events('e')
    expect(await insertEventsOnce(a, batch)).toEqual({ inserted: batch.length, skipped: 0 })
    // Spread over both shards, each row on one.
    const onA = await count(a, `SELECT count() AS n FROM ${db}.usage_events_local`)
    const onB = await count(b, `SELECT count() AS n FROM ${db}.usage_events_local`)
    expect(onA).toBeGreaterThan(0)
    expect(onB).toBeGreaterThan(0)
    expect(onA + onB).toBe(batch.length)

    const want = expected(batch)
    const check = async (): Promise<void> => {
      expect(await count(b, `SELECT count() AS n FROM ${db}.usage_events FINAL`)).toBe(batch.length)
      expect(await count(b, `SELECT count() AS n FROM ${db}.usage_event_ids`)).toBe(batch.length)
      expect(await count(b, `SELECT sum(event_count) AS n FROM ${db}.usage_daily WHERE project_id = '${PROJECT}'`)).toBe(batch.length)
      for (const customer of ['c00', 'c05', 'c17']) await checkReads(b, customer, want)
    }
    await check()

    // The same batch again, through the other node (a job retried by another worker): the lookup
    // reads usage_event_ids on both shards, finds every event, inserts nothing.
    expect(await insertEventsOnce(b, batch)).toEqual({ inserted: 0, skipped: batch.length })
    // Half of it with new events: only those go in.
    const more = events('f').slice(0, 40)
    expect(await insertEventsOnce(b, [...batch.slice(0, 40), ...more])).toEqual({ inserted: 40, skipped: 40 })
    expect(await count(a, `SELECT count() AS n FROM ${db}.usage_events FINAL`)).toBe(batch.length + 40)
    await checkReads(a, 'c03', expected([...batch, ...more]))

    // Two events whose aggregate rows are the same bytes (same customer, feature, hour, value)
    // are two events: a Replicated table deduplicates a repeated block, never a view's output.
    const twin = (id: string): UsageEventRow => ({ ...(batch[0] as UsageEventRow), event_id: id, customer_id: 'twins', value: '1' })
    await insertEventsOnce(a, [twin('t1')])
    await insertEventsOnce(a, [twin('t2')])
    expect(await count(b, `SELECT sum(event_count) AS n FROM ${db}.usage_hourly WHERE customer_id = 'twins'`)).toBe(2)

    // The journal: keyed by (project_id, budget_key, movement_id), sharded by budget.
    const movements: JournalRow[] = Array.from({ length: 30 }, (_, i) => ({
      project_id: PROJECT,
      budget_key: `b${i % 7}`,
      movement_id: `b${i % 7}#charge:${i}`,
      kind: 'charge',
      hold_id: '',
      amount: `${i}.5`,
      ts_ms: D0 + i,
    }))
    expect(await insertJournalOnce(a, movements)).toEqual({ inserted: 30, skipped: 0 })
    expect(await insertJournalOnce(b, movements)).toEqual({ inserted: 0, skipped: 30 })
    const [spent] = await b.query<{ v: string }>(`SELECT toString(sum(toDecimal128(amount, 8))) AS v FROM ${db}.budget_journal FINAL`)
    expect(decimal(units(spent?.v ?? '0'))).toBe('450')
  }, 90_000)

  it('1 shard × 2 replicas: a replica holds the rows (and the aggregates) written through the other, and reads them the same', async () => {
    const db = `test_${randomBytes(4).toString('hex')}`
    const b = await open(cluster.nodes.b.url, db, REPLICAS_CLUSTER)
    const batch = events('r')
    expect(await insertEventsOnce(b, batch)).toEqual({ inserted: batch.length, skipped: 0 })

    const c = await openClickHouse({ url: cluster.nodes.c.url, dataDir: root, database: db, cluster: REPLICAS_CLUSTER })
    stores.push(c)
    // Replication is asynchronous: c fetches the parts b wrote (the view ran on b; its output is
    // replicated like any part, so c never aggregates a row a second time).
    await waitFor('c has every row', async () => (await count(c, `SELECT count() AS n FROM ${db}.usage_events_local`)) === batch.length, 30_000, {
      intervalMs: 100,
    })
    await waitFor('c has the aggregates', async () => (await count(c, `SELECT sum(event_count) AS n FROM ${db}.usage_daily_local`)) === batch.length, 30_000, {
      intervalMs: 100,
    })
    await waitFor('c has the ids', async () => (await count(c, `SELECT count() AS n FROM ${db}.usage_event_ids_local`)) === batch.length, 30_000, {
      intervalMs: 100,
    })
    await waitFor(
      'c has schema_migrations',
      async () => (await count(c, `SELECT count() AS n FROM ${db}.schema_migrations_local`)) === migrations.length,
      30_000,
      { intervalMs: 100 },
    )
    expect(await migrate(c, migrations, { cluster: REPLICAS_CLUSTER })).toEqual({ applied: [], current: 8 })

    const want = expected(batch)
    for (const customer of ['c01', 'c12', 'c23']) await checkReads(c, customer, want)
    expect(await insertEventsOnce(c, batch)).toEqual({ inserted: 0, skipped: batch.length })
    expect(await count(b, `SELECT count() AS n FROM ${db}.usage_events FINAL`)).toBe(batch.length)
  }, 90_000)
})
