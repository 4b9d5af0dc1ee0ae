// Versioned schema migrations, applied on start by migrate(store). Each
// migration is a list of statements that run on chDB (26.x) and on Debian's
// clickhouse-server 18.16 alike, which is why the SQL avoids: DateTime64,
// SETTINGS clauses, LowCardinality (experimental in 18.16), table-level
// dedup settings, and aliases equal to a column name inside an aggregate
// (18.16 substitutes the alias). Names are qualified with the store's
// database so materialized views never depend on a session's current database.
//
// Never edit a migration that has shipped: append a new one.

import { dateTimeUtc, sqlIdent } from './sql.js'
import type { ClickHouseStore } from './store.js'

export interface Migration {
  version: number
  name: string
  statements: (db: string) => (string | GuardedStatement)[]
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

async function run(store: ClickHouseStore, statement: string | GuardedStatement): Promise<void> {
  if (typeof statement === 'string') return store.exec(statement)
  if ((await store.query(statement.unless)).length > 0) return
  try {
    await store.exec(statement.sql)
  } catch (err) {
    if ((await store.query(statement.unless)).length === 0) throw err
  }
}

/** Month partition of an epoch-ms column, in UTC. */
const month = (col: string): string => `toYYYYMM(toDateTime(intDiv(${col}, 1000), 'UTC'))`

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

export interface MigrateResult {
  applied: number[]
  current: number
}

/**
 * Applies the migrations newer than the highest version in schema_migrations,
 * in order, recording each after its statements ran. Every statement is
 * IF NOT EXISTS, so a migration interrupted halfway (or two gateways starting
 * at once) is simply run again; a second migrate() is a no-op.
 */
export async function migrate(store: ClickHouseStore, list: readonly Migration[] = migrations): Promise<MigrateResult> {
  const db = sqlIdent(store.database)
  await store.exec(
    `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ` + 'ENGINE = MergeTree ORDER BY version',
  )
  const done = new Set((await store.query<{ version: number }>(`SELECT DISTINCT version FROM ${db}.schema_migrations`)).map((r) => Number(r.version)))
  const applied: number[] = []
  for (const m of [...list].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue
    for (const statement of m.statements(db)) await run(store, statement)
    await store.insert(`${db}.schema_migrations`, [{ version: m.version, name: m.name, applied_at: dateTimeUtc(Date.now()) }])
    applied.push(m.version)
    done.add(m.version)
  }
  return { applied, current: Math.max(0, ...done) }
}
