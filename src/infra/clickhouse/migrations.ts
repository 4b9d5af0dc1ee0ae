// Versioned schema migrations, applied on start by migrate(store). Each
// migration is a list of statements that run on chDB (26.x) and on Debian's
// clickhouse-server 18.16 alike, which is why the SQL avoids: DateTime64,
// SETTINGS clauses, LowCardinality (experimental in 18.16), table-level
// dedup settings, and aliases equal to a column name inside an aggregate
// (18.16 substitutes the alias). Names are qualified with the store's
// database so materialized views never depend on a session's current database.
//
// Never edit a migration that has shipped: append a new one.

import { randomBytes } from 'node:crypto'
import { guardedOnCluster, LOCAL_SUFFIX, onCluster } from './cluster.js'
import { dateTimeUtc, sqlIdent, sqlLiteral } from './sql.js'
import type { ClickHouseStore } from './store.js'

export interface Migration {
  version: number
  name: string
  statements: (db: string) => (string | GuardedStatement | MigrationStep)[]
}

/** A step SQL alone cannot make safe to re-run: it looks at what is there and does what is left. */
export interface MigrationStep {
  run(store: ClickHouseStore, db: string): Promise<void>
  /**
   * What the step does on a cluster (CLICKHOUSE_CLUSTER, cluster.ts); a step without it stops a
   * cluster migration: its SQL has no mechanical ON CLUSTER form.
   */
  runOnCluster?(store: ClickHouseStore, db: string, cluster: string): Promise<void>
}

/**
 * A statement 18.16 cannot make idempotent itself (it has no `ADD COLUMN IF NOT EXISTS`): it is
 * skipped when `unless` (a SELECT) returns a row, and a failure is ignored if `unless` returns
 * one afterwards (another gateway ran it at the same time).
 */
export interface GuardedStatement {
  sql: string
  unless: string
}

/** ALTER TABLE … ADD COLUMN, run only when the column is missing. */
export function addColumn(db: string, table: string, column: string, definition: string): GuardedStatement {
  return {
    sql: `ALTER TABLE ${db}.${table} ADD COLUMN ${column} ${definition}`,
    unless: `SELECT name FROM system.columns WHERE database = '${db}' AND table = '${table}' AND name = '${column}'`,
  }
}

type Statement = string | GuardedStatement | MigrationStep

/** One statement of a migration; on a cluster, its ON CLUSTER form (cluster.ts), statement by statement. */
async function run(store: ClickHouseStore, db: string, statement: Statement, cluster?: string): Promise<void> {
  if (cluster !== undefined) return runOnCluster(store, db, statement, cluster)
  if (typeof statement === 'string') return store.exec(statement)
  if ('run' in statement) return statement.run(store, db)
  if ((await store.query(statement.unless)).length > 0) return
  try {
    await store.exec(statement.sql)
  } catch (err) {
    if ((await store.query(statement.unless)).length === 0) throw err
  }
}

async function runOnCluster(store: ClickHouseStore, db: string, statement: Statement, cluster: string): Promise<void> {
  if (typeof statement === 'string') {
    for (const sql of onCluster(statement, cluster)) await store.exec(sql)
  } else if ('run' in statement) {
    if (statement.runOnCluster === undefined) throw new Error('cluster mode: a migration step has no cluster form (MigrationStep.runOnCluster)')
    await statement.runOnCluster(store, db, cluster)
  } else {
    for (const part of guardedOnCluster(statement, cluster)) await run(store, db, part)
  }
}

/** Month partition of an epoch-ms column, in UTC. */
export const month = (col: string): string => `toYYYYMM(toDateTime(intDiv(${col}, 1000), 'UTC'))`

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'usage_events',
    statements: (db) => [
      // A retried event (same project_id + event_id, same ts_ms so the same
      // partition) collapses to one row when parts merge; until then queries
      // use FINAL or argMax, and writers use insertEventsOnce().
      `CREATE TABLE IF NOT EXISTS ${db}.usage_events (
        project_id String,
        event_id String,
        customer_id String,
        event_slug String,
        feature_slug String,
        value Decimal(38, 8),
        properties String,
        ts_ms UInt64,
        inserted_at DateTime('UTC')
      ) ENGINE = ReplacingMergeTree
      PARTITION BY ${month('ts_ms')}
      ORDER BY (project_id, event_id)`,
    ],
  },
  {
    version: 2,
    name: 'budget_journal',
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.budget_journal (
        project_id String,
        budget_key String,
        movement_id String,
        kind String,
        hold_id String,
        amount String,
        ts_ms UInt64,
        inserted_at DateTime('UTC')
      ) ENGINE = ReplacingMergeTree
      PARTITION BY ${month('ts_ms')}
      ORDER BY (project_id, budget_key, movement_id)`,
    ],
  },
  {
    version: 3,
    name: 'usage_hourly and usage_daily',
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.usage_hourly (
        project_id String,
        customer_id String,
        feature_slug String,
        hour DateTime('UTC'),
        value_sum Decimal(38, 8),
        event_count UInt64
      ) ENGINE = SummingMergeTree
      PARTITION BY toYYYYMM(hour)
      ORDER BY (project_id, customer_id, feature_slug, hour)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.usage_hourly_mv TO ${db}.usage_hourly AS
      SELECT
        project_id,
        customer_id,
        feature_slug,
        toStartOfHour(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS hour,
        sum(value) AS value_sum,
        count() AS event_count
      FROM ${db}.usage_events
      GROUP BY project_id, customer_id, feature_slug, hour`,
      `CREATE TABLE IF NOT EXISTS ${db}.usage_daily (
        project_id String,
        customer_id String,
        feature_slug String,
        day Date,
        value_sum Decimal(38, 8),
        event_count UInt64
      ) ENGINE = SummingMergeTree
      PARTITION BY toYYYYMM(day)
      ORDER BY (project_id, customer_id, feature_slug, day)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.usage_daily_mv TO ${db}.usage_daily AS
      SELECT
        project_id,
        customer_id,
        feature_slug,
        toDate(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS day,
        sum(value) AS value_sum,
        count() AS event_count
      FROM ${db}.usage_events
      GROUP BY project_id, customer_id, feature_slug, day`,
    ],
  },
  {
    version: 4,
    name: 'budget_journal: unit and idempotency_key',
    // Filled by the journal outbox (src/journal/); rows written before are ''.
    statements: (db) => [
      addColumn(db, 'budget_journal', 'unit', "String DEFAULT '' AFTER amount"),
      addColumn(db, 'budget_journal', 'idempotency_key', "String DEFAULT '' AFTER unit"),
    ],
  },
  {
    version: 5,
    name: 'wallet_journal',
    // Every wallet movement (src/wallet/README.md), pushed by the wallet and run scripts through
    // the journal outbox. amount: the integer at ledger scale 8, as text (exact past 2^53).
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.wallet_journal (
        project_id String,
        customer_id String,
        movement_id String,
        kind String,
        source String,
        credit_id String,
        amount String,
        currency String,
        run_id String,
        invoice_id String,
        reference String,
        ts_ms UInt64,
        inserted_at DateTime('UTC')
      ) ENGINE = ReplacingMergeTree
      PARTITION BY ${month('ts_ms')}
      ORDER BY (project_id, customer_id, movement_id)`,
    ],
  },
  {
    version: 6,
    name: 'invoice_lines',
    // One row per invoice line (src/invoices/README.md), pushed by lua/finalizeInvoice-3.lua
    // through the journal outbox; movement_id is the line's entry_id. Money: integers at ledger
    // scale 8 as text (exact past 2^53); quantity: decimal text.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.invoice_lines (
        project_id String,
        movement_id String,
        invoice_id String,
        customer_id String,
        subscription_id String,
        statement_key String,
        line_no UInt32,
        kind String,
        feature_slug String,
        description String,
        quantity String,
        amount String,
        amount_due String,
        amount_paid String,
        amount_included String,
        collectable UInt8,
        settlement_source String,
        settlement_status String,
        wallet_credit_id String,
        wallet_credit_source String,
        wallet_id String,
        currency String,
        invoice_status String,
        cycle_start_at UInt64,
        statement_start_at UInt64,
        statement_end_at UInt64,
        ts_ms UInt64,
        inserted_at DateTime('UTC')
      ) ENGINE = ReplacingMergeTree
      PARTITION BY ${month('ts_ms')}
      ORDER BY (project_id, invoice_id, movement_id)`,
    ],
  },
  {
    version: 7,
    name: 'usage_events: status and decision; aggregates of accepted usage, refused apart',
    // One truth for billable usage (src/events/README.md, "Accepted and refused usage"): every
    // row says whether its usage was accepted or refused by an entitlement, and which decision
    // said so. Rows written before read as accepted (the default), with decision ''. The
    // aggregates keep value_sum/event_count for accepted usage and count refused usage in new
    // columns: the views are dropped and made again with the new SELECT (18.16 cannot alter a
    // view's query). An insert made by another writer between the DROP and the CREATE misses
    // the aggregates (usage_events has it; README: rebuilding a month's aggregates).
    statements: (db) => [
      addColumn(db, 'usage_events', 'status', "String DEFAULT 'accepted' AFTER ts_ms"),
      addColumn(db, 'usage_events', 'decision', "String DEFAULT '' AFTER status"),
      ...['usage_hourly', 'usage_daily'].flatMap((table) => [
        addColumn(db, table, 'refused_sum', 'Decimal(38, 8) DEFAULT 0'),
        addColumn(db, table, 'refused_count', 'UInt64 DEFAULT 0'),
      ]),
      `DROP TABLE IF EXISTS ${db}.usage_hourly_mv`,
      usageView(db, 'usage_hourly', "toStartOfHour(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS hour", 'hour'),
      `DROP TABLE IF EXISTS ${db}.usage_daily_mv`,
      usageView(db, 'usage_daily', "toDate(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS day", 'day'),
    ],
  },
  {
    version: 8,
    name: 'usage_events ordered by (project_id, customer_id, ts_ms, event_id); usage_event_ids for the insert-once lookup',
    // A customer's events over a time range are one range of the sort key, instead of the whole
    // project's rows of the month. The insert-once lookup keeps its index through
    // usage_event_ids (project_id, event_id), fed by its own view. How the swap is made safe to
    // re-run, and what an insert racing it can miss: reorderUsageEvents below, README "Migration 8".
    statements: (db) => [
      reorderUsageEvents,
      `CREATE TABLE IF NOT EXISTS ${db}.usage_event_ids (
        project_id String,
        event_id String,
        ts_ms UInt64
      ) ENGINE = ReplacingMergeTree
      PARTITION BY ${month('ts_ms')}
      ORDER BY (project_id, event_id)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.usage_event_ids_mv TO ${db}.usage_event_ids AS
      SELECT project_id, event_id, ts_ms FROM ${db}.usage_events`,
      usageView(db, 'usage_hourly', "toStartOfHour(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS hour", 'hour'),
      usageView(db, 'usage_daily', "toDate(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS day", 'day'),
      // After its view exists, so no insert falls between; a row twice is harmless (a lookup
      // only asks whether it is there, and ReplacingMergeTree folds it).
      backfillEventIds,
      `DROP TABLE IF EXISTS ${db}.usage_events_v7`,
    ],
  },
]

/** The materialized view of an aggregate from migration 7 on: accepted usage in value_sum/event_count, refused apart. */
function usageView(db: string, table: string, bucket: string, bucketName: string): string {
  return `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${table}_mv TO ${db}.${table} AS
      SELECT
        project_id,
        customer_id,
        feature_slug,
        ${bucket},
        sumIf(value, status != 'refused') AS value_sum,
        countIf(status != 'refused') AS event_count,
        sumIf(value, status = 'refused') AS refused_sum,
        countIf(status = 'refused') AS refused_count
      FROM ${db}.usage_events
      GROUP BY project_id, customer_id, feature_slug, ${bucketName}`
}

/** The columns of usage_events from migration 7 on, in their order. */
const EVENT_COLUMNS = 'project_id, event_id, customer_id, event_slug, feature_slug, value, properties, ts_ms, status, decision, inserted_at'

/** The sort key of usage_events from migration 8 on, as system.tables shows it in engine_full. */
export const EVENTS_ORDER_BY = '(project_id, customer_id, ts_ms, event_id)'

async function tableNames(store: ClickHouseStore, db: string, like: string): Promise<Map<string, string>> {
  const rows = await store.query<{ name: string; engine_full: string }>(
    `SELECT name, engine_full FROM system.tables WHERE database = ${sqlLiteral(db)} AND name LIKE ${sqlLiteral(like)}`,
  )
  return new Map(rows.map((r) => [r.name, r.engine_full]))
}

/**
 * Migration 8's swap, safe to run again from any point it died at, and by two processes at once
 * (each copies into a table of its own; the RENAME of one fails for the other, which then finds
 * the swap made):
 *   1. usage_events still has the old key: copy it into usage_events_v8_<random> (new key), drop
 *      the views fed by usage_events (18.16 cannot change a view's query, and a view follows a
 *      renamed table on 26.x), then RENAME usage_events → usage_events_v7, the copy → usage_events.
 *   2. usage_events_v7 is there: copy what reached it after the copy (an insert racing the swap)
 *      into usage_events, month by month, the rows whose (project_id, event_id) is not there yet.
 *      No view exists yet, so the aggregates do not count those rows a second time.
 * A RENAME that died between its two tables (usage_events missing, usage_events_v7 there) is
 * undone first. The views are made again, and usage_events_v7 dropped, by the statements after.
 */
const reorderUsageEvents: MigrationStep = {
  async run(store, db) {
    let tables = await tableNames(store, db, 'usage\\_events%')
    if (!tables.has('usage_events') && tables.has('usage_events_v7')) {
      await store.exec(`RENAME TABLE ${db}.usage_events_v7 TO ${db}.usage_events`)
      tables = await tableNames(store, db, 'usage\\_events%')
    }
    const engine = tables.get('usage_events') ?? ''
    if (!engine.includes(`ORDER BY ${EVENTS_ORDER_BY}`)) await copyAndSwap(store, db)
    if ((await tableNames(store, db, 'usage\\_events\\_v7')).size > 0) await catchUp(store, db)
    // Copies left by a process that lost the race, or died before its RENAME.
    for (const name of (await tableNames(store, db, 'usage\\_events\\_v8\\_%')).keys()) {
      await store.exec(`DROP TABLE IF EXISTS ${db}.${sqlIdent(name)}`)
    }
  },
  runOnCluster: reorderUsageEventsOnCluster,
}

/**
 * Migration 8 on a cluster. Cluster mode came with this release, so a cluster's usage_events was
 * made by this release's migration 1 in the same start (or one that died before migration 8):
 * nothing wrote to it yet (the gateway and workers migrate before they write). So instead of the
 * copy and RENAME (which would leave each Distributed table naming the other's local table), the
 * old-keyed table is dropped, with the views that read it, and made with the new key; the
 * statements after make the views again. A usage_events with rows stops the migration: copy it
 * by hand (README.md, "A ClickHouse cluster").
 */
async function reorderUsageEventsOnCluster(store: ClickHouseStore, db: string, cluster: string): Promise<void> {
  const local = `usage_events${LOCAL_SUFFIX}`
  const engine = (await tableNames(store, db, local.replace(/_/g, '\\_'))).get(local)
  if (engine !== undefined && !engine.includes(`ORDER BY ${EVENTS_ORDER_BY}`)) {
    const [rows] = await store.query<{ n: string }>(`SELECT count() AS n FROM ${db}.usage_events`)
    if (Number(rows?.n ?? 0) > 0) {
      throw new Error(`cluster mode: ${db}.usage_events has ${rows?.n} rows under the sort key before migration 8; copy them into the new table by hand`)
    }
    for (const table of ['usage_hourly_mv', 'usage_daily_mv', 'usage_event_ids_mv', 'usage_events']) {
      for (const sql of onCluster(`DROP TABLE IF EXISTS ${db}.${table}`, cluster)) await store.exec(sql)
    }
  }
  for (const sql of onCluster(usageEventsTable(`${db}.usage_events`), cluster)) await store.exec(sql)
}

/** usage_events as migration 8 makes it, under `name`. */
function usageEventsTable(name: string): string {
  return `CREATE TABLE ${name} (
      project_id String,
      event_id String,
      customer_id String,
      event_slug String,
      feature_slug String,
      value Decimal(38, 8),
      properties String,
      ts_ms UInt64,
      status String DEFAULT 'accepted',
      decision String DEFAULT '',
      inserted_at DateTime('UTC')
    ) ENGINE = ReplacingMergeTree
    PARTITION BY ${month('ts_ms')}
    ORDER BY ${EVENTS_ORDER_BY}`
}

async function copyAndSwap(store: ClickHouseStore, db: string): Promise<void> {
  const copy = `${db}.usage_events_v8_${randomBytes(4).toString('hex')}`
  await store.exec(usageEventsTable(copy))
  await store.exec(`INSERT INTO ${copy} (${EVENT_COLUMNS}) SELECT ${EVENT_COLUMNS} FROM ${db}.usage_events`)
  for (const view of ['usage_hourly_mv', 'usage_daily_mv', 'usage_event_ids_mv']) await store.exec(`DROP TABLE IF EXISTS ${db}.${view}`)
  try {
    await store.exec(`RENAME TABLE ${db}.usage_events TO ${db}.usage_events_v7, ${copy} TO ${db}.usage_events`)
  } catch (err) {
    // Another process swapped first (usage_events_v7 exists): its copy is the table now.
    const engine = (await tableNames(store, db, 'usage\\_events')).get('usage_events') ?? ''
    if (!engine.includes(`ORDER BY ${EVENTS_ORDER_BY}`)) throw err
  }
}

async function catchUp(store: ClickHouseStore, db: string): Promise<void> {
  // Month by month, so the set of the NOT IN is one month's ids, not the whole table's. Not
  // skipped where the counts agree: rows written after the swap can hide the missing ones.
  const months = await store.query<{ m: number }>(`SELECT DISTINCT ${month('ts_ms')} AS m FROM ${db}.usage_events_v7 ORDER BY m`)
  for (const { m } of months) {
    await store.exec(
      `INSERT INTO ${db}.usage_events (${EVENT_COLUMNS}) SELECT ${EVENT_COLUMNS} FROM ${db}.usage_events_v7
       WHERE ${month('ts_ms')} = ${Number(m)} AND (project_id, event_id) NOT IN
         (SELECT project_id, event_id FROM ${db}.usage_events WHERE ${month('ts_ms')} = ${Number(m)})`,
    )
  }
}

/** The ids of the events stored before usage_event_ids existed, month by month. */
const backfillEventIds: MigrationStep = {
  async run(store, db) {
    const months = await store.query<{ m: number }>(`SELECT DISTINCT ${month('ts_ms')} AS m FROM ${db}.usage_events ORDER BY m`)
    for (const { m } of months) {
      await store.exec(
        `INSERT INTO ${db}.usage_event_ids (project_id, event_id, ts_ms)
         SELECT project_id, event_id, ts_ms FROM ${db}.usage_events WHERE ${month('ts_ms')} = ${Number(m)}
           AND (project_id, event_id) NOT IN (SELECT project_id, event_id FROM ${db}.usage_event_ids WHERE ${month('ts_ms')} = ${Number(m)})`,
      )
    }
  },
  // On a cluster usage_events was empty when its view to usage_event_ids was made (the step
  // above), so every stored event has its id: nothing to fill.
  runOnCluster: async () => {},
}

export interface MigrateResult {
  applied: number[]
  current: number
}

export interface MigrateOptions {
  /**
   * CLICKHOUSE_CLUSTER: run every statement ON CLUSTER this cluster (cluster.ts): Replicated*
   * tables `<name>_local` on each node, Distributed tables `<name>` over them.
   */
  cluster?: string | undefined
}

/**
 * Applies the migrations newer than the highest version in schema_migrations,
 * in order, recording each after its statements ran. Every statement is
 * IF NOT EXISTS, so a migration interrupted halfway (or two gateways starting
 * at once) is simply run again; a second migrate() is a no-op.
 */
export async function migrate(store: ClickHouseStore, list: readonly Migration[] = migrations, options: MigrateOptions = {}): Promise<MigrateResult> {
  const db = sqlIdent(store.database)
  const cluster = options.cluster === undefined ? undefined : sqlIdent(options.cluster)
  const bookkeeping =
    `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ` + 'ENGINE = MergeTree ORDER BY version'
  if (cluster === undefined) await store.exec(bookkeeping)
  else if ((await tableNames(store, db, 'schema\\_migrations')).size === 0) {
    // Once per cluster, not at every start: a DDL ON CLUSTER waits for every node.
    await store.exec(`CREATE DATABASE IF NOT EXISTS ${db} ON CLUSTER ${cluster}`)
    for (const sql of onCluster(bookkeeping, cluster)) await store.exec(sql)
  }
  const done = new Set((await store.query<{ version: number }>(`SELECT DISTINCT version FROM ${db}.schema_migrations`)).map((r) => Number(r.version)))
  const applied: number[] = []
  for (const m of [...list].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue
    for (const statement of m.statements(db)) await run(store, db, statement, cluster)
    await store.insert(`${db}.schema_migrations`, [{ version: m.version, name: m.name, applied_at: dateTimeUtc(Date.now()) }])
    applied.push(m.version)
    done.add(m.version)
  }
  return { applied, current: Math.max(0, ...done) }
}

/** The time of a row, per table with a TTL setting: what `INTERVAL n DAY` is added to. */
export const TTL_TIME: Readonly<Record<string, string>> = {
  usage_events: "toDateTime(intDiv(ts_ms, 1000), 'UTC')",
  budget_journal: "toDateTime(intDiv(ts_ms, 1000), 'UTC')",
  wallet_journal: "toDateTime(intDiv(ts_ms, 1000), 'UTC')",
  invoice_lines: "toDateTime(intDiv(ts_ms, 1000), 'UTC')",
  usage_hourly: 'hour',
  usage_daily: 'day',
}

export interface TtlResult {
  /** Tables whose TTL was set (days) or removed (0) now. */
  changed: Record<string, number>
  /** Why nothing was applied (ClickHouse 18.16 has no TTL); undefined otherwise. */
  skipped?: string
}

/**
 * METERING_CLICKHOUSE_TTL_DAYS_<TABLE>, applied on start: `days` > 0 sets the table's TTL to
 * its row time + days (ALTER TABLE … MODIFY TTL; ClickHouse deletes expired rows when it merges
 * parts), 0 removes it; a table not named is left as it is. usage_event_ids (the insert-once
 * lookup) follows usage_events: an id must live as long as its event. A TTL already as asked is
 * not set again (MODIFY TTL rewrites the table's parts on 26.x). An unknown table throws, so a
 * misspelt setting stops the start. ClickHouse before 19.6 (Debian's 18.16) has no TTL at all:
 * nothing is applied, and `skipped` says why.
 */
export async function applyTtl(store: ClickHouseStore, ttlDays: Readonly<Record<string, number>>, options: MigrateOptions = {}): Promise<TtlResult> {
  const unknown = Object.keys(ttlDays).filter((t) => TTL_TIME[t] === undefined)
  if (unknown.length > 0) {
    throw new Error(`METERING_CLICKHOUSE_TTL_DAYS_<TABLE>: no table ${unknown.join(', ')} (tables: ${Object.keys(TTL_TIME).join(', ')})`)
  }
  const entries = Object.entries(ttlDays)
  if (entries.length === 0) return { changed: {} }
  const [version] = await store.query<{ v: string }>('SELECT version() AS v')
  const [major = 0, minor = 0] = (version?.v ?? '').split('.').map(Number)
  if (major < 19 || (major === 19 && minor < 6)) {
    return {
      changed: {},
      skipped: `ClickHouse ${version?.v} has no TTL (19.6 and later): rows are kept (${entries.map(([t, d]) => `${t}=${d}`).join(', ')} not applied)`,
    }
  }
  const db = sqlIdent(store.database)
  const engines = new Map(
    (
      await store.query<{ name: string; engine_full: string }>(`SELECT name, engine_full FROM system.tables WHERE database = ${sqlLiteral(store.database)}`)
    ).map((r) => [r.name, r.engine_full]),
  )
  const changed: Record<string, number> = {}
  for (const [table, days] of entries) {
    for (const t of table === 'usage_events' ? ['usage_events', 'usage_event_ids'] : [table]) {
      // On a cluster the rows (and so the TTL) are in the local tables (cluster.ts).
      const engine = engines.get(options.cluster === undefined ? t : `${t}${LOCAL_SUFFIX}`) ?? ''
      const wanted = `${TTL_TIME[table]} + toIntervalDay(${days})`
      if (days === 0 ? !/ TTL /.test(engine) : engine.includes(`TTL ${wanted}`)) continue
      const sql = days === 0 ? `ALTER TABLE ${db}.${t} REMOVE TTL` : `ALTER TABLE ${db}.${t} MODIFY TTL ${TTL_TIME[table]} + INTERVAL ${days} DAY`
      for (const part of options.cluster === undefined ? [sql] : onCluster(sql, options.cluster)) await store.exec(part)
      changed[t] = days
    }
  }
  return { changed }
}
