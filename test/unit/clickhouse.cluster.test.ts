// The ON CLUSTER form of migration statements (src/infra/clickhouse/cluster.ts), as exact SQL.
// The untransformed statements are what chDB and a single server run (clickhouse.store.test.ts);
// these run on two clusters of real servers in test/integration/clickhouse.cluster.test.ts.

import { describe, expect, it } from 'vitest'
import { guardedOnCluster, onCluster, SHARDING_KEYS } from '../../src/infra/clickhouse/cluster.js'
import { addColumn, type MigrationStep, migrations } from '../../src/infra/clickhouse/migrations.js'

const squash = (sql: string): string => sql.replace(/\s+/g, ' ').trim()

describe('onCluster', () => {
  it('makes a ReplacingMergeTree table Replicated under <name>_local, with a Distributed table over it by project and customer', () => {
    const sql = `CREATE TABLE IF NOT EXISTS db.wallet_journal (
        project_id String,
        customer_id String,
        amount String
      ) ENGINE = ReplacingMergeTree
      PARTITION BY toYYYYMM(toDateTime(intDiv(ts_ms, 1000), 'UTC'))
      ORDER BY (project_id, customer_id, movement_id)`
    expect(onCluster(sql, 'metering').map(squash)).toEqual([
      "CREATE TABLE IF NOT EXISTS db.wallet_journal_local ON CLUSTER metering ( project_id String, customer_id String, amount String ) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/metering/{shard}/db/wallet_journal_local', '{replica}') PARTITION BY toYYYYMM(toDateTime(intDiv(ts_ms, 1000), 'UTC')) ORDER BY (project_id, customer_id, movement_id)",
      'CREATE TABLE IF NOT EXISTS db.wallet_journal ON CLUSTER metering AS db.wallet_journal_local ENGINE = Distributed(metering, db, wallet_journal_local, cityHash64(project_id, customer_id))',
    ])
  })

  it("keeps the engine's parameters after the path and replica, and adds IF NOT EXISTS", () => {
    const [local] = onCluster('CREATE TABLE db.usage_daily (a String, v Decimal(38, 8)) ENGINE = SummingMergeTree(v) ORDER BY a', 'c1')
    expect(local).toBe(
      "CREATE TABLE IF NOT EXISTS db.usage_daily_local ON CLUSTER c1 (a String, v Decimal(38, 8)) ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/c1/{shard}/db/usage_daily_local', '{replica}', v) ORDER BY a",
    )
  })

  it('shards schema_migrations by version and budget_journal by project and budget', () => {
    const bookkeeping = onCluster(
      "CREATE TABLE IF NOT EXISTS db.schema_migrations (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version",
      'c',
    )
    expect(bookkeeping).toEqual([
      "CREATE TABLE IF NOT EXISTS db.schema_migrations_local ON CLUSTER c (version UInt32, name String, applied_at DateTime('UTC')) ENGINE = ReplicatedMergeTree('/clickhouse/tables/c/{shard}/db/schema_migrations_local', '{replica}') ORDER BY version",
      'CREATE TABLE IF NOT EXISTS db.schema_migrations ON CLUSTER c AS db.schema_migrations_local ENGINE = Distributed(c, db, schema_migrations_local, version)',
    ])
    expect(onCluster('CREATE TABLE db.budget_journal (project_id String) ENGINE = ReplacingMergeTree ORDER BY project_id', 'c')[1]).toContain(
      'Distributed(c, db, budget_journal_local, cityHash64(project_id, budget_key))',
    )
  })

  it('points a materialized view from the local source to the local target', () => {
    const sql = `CREATE MATERIALIZED VIEW IF NOT EXISTS db.usage_event_ids_mv TO db.usage_event_ids AS
      SELECT project_id, event_id, ts_ms FROM db.usage_events`
    expect(onCluster(sql, 'c').map(squash)).toEqual([
      'CREATE MATERIALIZED VIEW IF NOT EXISTS db.usage_event_ids_mv ON CLUSTER c TO db.usage_event_ids_local AS SELECT project_id, event_id, ts_ms FROM db.usage_events_local',
    ])
  })

  it('drops both the Distributed and the local table; ALTERs the local table, and makes the Distributed one again after a column change', () => {
    expect(onCluster('DROP TABLE IF EXISTS db.usage_hourly_mv', 'c')).toEqual([
      'DROP TABLE IF EXISTS db.usage_hourly_mv ON CLUSTER c',
      'DROP TABLE IF EXISTS db.usage_hourly_mv_local ON CLUSTER c',
    ])
    expect(onCluster('ALTER TABLE db.usage_events MODIFY TTL ts + INTERVAL 3 DAY', 'c')).toEqual([
      'ALTER TABLE db.usage_events_local ON CLUSTER c MODIFY TTL ts + INTERVAL 3 DAY',
    ])
    expect(guardedOnCluster(addColumn('db', 'budget_journal', 'unit', "String DEFAULT '' AFTER amount"), 'c')).toEqual([
      {
        sql: "ALTER TABLE db.budget_journal_local ON CLUSTER c ADD COLUMN unit String DEFAULT '' AFTER amount",
        unless: "SELECT name FROM system.columns WHERE database = 'db' AND table = 'budget_journal_local' AND name = 'unit'",
      },
      'DROP TABLE IF EXISTS db.budget_journal ON CLUSTER c',
      'CREATE TABLE IF NOT EXISTS db.budget_journal ON CLUSTER c AS db.budget_journal_local ENGINE = Distributed(c, db, budget_journal_local, cityHash64(project_id, budget_key))',
    ])
  })

  it('passes an INSERT through and refuses what has no mechanical form', () => {
    expect(onCluster('INSERT INTO db.t (a) SELECT a FROM db.s', 'c')).toEqual(['INSERT INTO db.t (a) SELECT a FROM db.s'])
    expect(() => onCluster('RENAME TABLE db.a TO db.b', 'c')).toThrow(/no ON CLUSTER form/)
    expect(() => onCluster('CREATE TABLE db.usage_events (a String) ENGINE = Memory', 'c')).toThrow(/only the MergeTree family/)
    expect(() => onCluster('CREATE TABLE db.unknown_table (a String) ENGINE = MergeTree ORDER BY a', 'c')).toThrow(/no sharding key for table unknown_table/)
    expect(() => onCluster('DROP TABLE db.x', 'bad-name')).toThrow(/not a plain SQL identifier/)
  })

  it('has a form for every statement of every shipped migration', () => {
    let statements = 0
    for (const m of migrations) {
      for (const s of m.statements('db')) {
        if (typeof s === 'string') expect(onCluster(s, 'c').length).toBeGreaterThan(0)
        else if ('run' in s) expect((s as MigrationStep).runOnCluster, `migration ${m.version}`).toBeTypeOf('function')
        else expect(guardedOnCluster(s, 'c').length).toBe(3)
        statements++
      }
    }
    expect(statements).toBeGreaterThan(20)
    expect(Object.keys(SHARDING_KEYS).sort()).toEqual(
      ['budget_journal', 'invoice_lines', 'schema_migrations', 'usage_daily', 'usage_event_ids', 'usage_events', 'usage_hourly', 'wallet_journal'].sort(),
    )
  })
})
