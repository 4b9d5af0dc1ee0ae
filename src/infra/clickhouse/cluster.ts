// Cluster mode (CLICKHOUSE_CLUSTER): the migrations' statements, written for one server, turned
// mechanically into their ON CLUSTER form, so the shipped migrations stay as they are and keep
// running unchanged on chDB and a single server. README.md, "A ClickHouse cluster".
//
//   CREATE TABLE db.t (…) ENGINE = XMergeTree[(p)] …
//     → CREATE TABLE IF NOT EXISTS db.t_local ON CLUSTER c (…)
//         ENGINE = ReplicatedXMergeTree('/clickhouse/tables/c/{shard}/db/t_local', '{replica}'[, p]) …
//       CREATE TABLE IF NOT EXISTS db.t ON CLUSTER c AS db.t_local ENGINE = Distributed(c, db, t_local, <sharding key of t>)
//   CREATE MATERIALIZED VIEW db.v TO db.t AS SELECT … FROM db.s …
//     → the view ON CLUSTER, TO db.t_local, FROM db.s_local: each node aggregates the rows it holds
//   DROP TABLE db.x → DROP TABLE IF EXISTS db.x ON CLUSTER c, then db.x_local (a view has no _local)
//   ALTER TABLE db.t … → ALTER TABLE db.t_local ON CLUSTER c …; a column change also makes the
//     Distributed table again (18.16 refuses ALTER … ON CLUSTER of a Distributed table over
//     replicated shards, and a Distributed table holds no rows)
//   INSERT … → unchanged (through the Distributed tables)
// Anything else (RENAME, CREATE TABLE … AS, other engines) has no mechanical form and throws: a
// migration step that needs one says what it does on a cluster itself (MigrationStep.runOnCluster).

import { sqlIdent } from './sql.js'

/** The suffix of the tables that hold the rows on each node; the unsuffixed name is the Distributed table over them. */
export const LOCAL_SUFFIX = '_local'

/**
 * How each table's rows are spread over the shards. Rows that ReplacingMergeTree must fold into
 * one (same sort key) and rows one read sums together land on one shard: a project's customer
 * (or budget) is always on one shard, so FINAL, which folds per shard, folds every duplicate.
 * A table not listed stops a cluster migration, so a new table gets its key chosen, not guessed.
 */
export const SHARDING_KEYS: Readonly<Record<string, string>> = {
  schema_migrations: 'version',
  usage_events: 'cityHash64(project_id, customer_id)',
  // Fed on each node by its view from the local usage_events (the shard of the event's customer);
  // the key only places rows inserted through the Distributed table. The insert-once lookup reads
  // the Distributed table, so it finds an id whichever shard holds it.
  usage_event_ids: 'cityHash64(project_id, event_id)',
  usage_hourly: 'cityHash64(project_id, customer_id)',
  usage_daily: 'cityHash64(project_id, customer_id)',
  budget_journal: 'cityHash64(project_id, budget_key)',
  wallet_journal: 'cityHash64(project_id, customer_id)',
  invoice_lines: 'cityHash64(project_id, customer_id)',
}

export function shardingKey(table: string): string {
  const key = SHARDING_KEYS[table]
  if (key === undefined) throw new Error(`cluster mode: no sharding key for table ${table} (add it to SHARDING_KEYS in src/infra/clickhouse/cluster.ts)`)
  return key
}

/** The ZooKeeper path of a replicated table: one per cluster, shard (the server's {shard} macro), database and table. */
export function replicatedPath(cluster: string, db: string, table: string): string {
  return `/clickhouse/tables/${cluster}/{shard}/${db}/${table}`
}

/** The Distributed table over `db.t_local`. */
export function distributedTable(cluster: string, db: string, table: string): string {
  const local = `${table}${LOCAL_SUFFIX}`
  return `CREATE TABLE IF NOT EXISTS ${db}.${table} ON CLUSTER ${cluster} AS ${db}.${local} ENGINE = Distributed(${cluster}, ${db}, ${local}, ${shardingKey(table)})`
}

const CREATE_TABLE = /^CREATE TABLE (?:IF NOT EXISTS )?(\w+)\.(\w+)\s*\(([\s\S]*)\)\s*ENGINE = (\w+)(?:\(([^)]*)\))?([\s\S]*)$/
const CREATE_VIEW = /^CREATE MATERIALIZED VIEW (?:IF NOT EXISTS )?(\w+)\.(\w+) TO (\w+)\.(\w+) AS\s([\s\S]*)$/
const DROP_TABLE = /^DROP TABLE (?:IF EXISTS )?(\w+)\.(\w+)$/
const ALTER_TABLE = /^ALTER TABLE (\w+)\.(\w+) ([\s\S]*)$/
const COLUMN_CHANGE = /^(ADD|DROP|MODIFY|RENAME|CLEAR|COMMENT) COLUMN /

/** The statements one migration statement becomes on cluster `cluster`, in the order to run them. */
export function onCluster(sql: string, cluster: string): string[] {
  const c = sqlIdent(cluster)
  const text = sql.trim()
  const create = CREATE_TABLE.exec(text)
  if (create) return createTable(c, create)
  const view = CREATE_VIEW.exec(text)
  if (view) {
    const [, db, name, toDb, to, select] = view as unknown as string[]
    const sources = [...(select as string).matchAll(/\bFROM\s+(\w+)\.(\w+)/g)]
    if (sources.length !== 1) throw new Error(`cluster mode: a view must read one table (FROM db.table): ${text.slice(0, 120)}`)
    const local = (select as string).replace(/\bFROM\s+(\w+)\.(\w+)/, (_m, d: string, t: string) => `FROM ${d}.${t}${LOCAL_SUFFIX}`)
    return [`CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${name} ON CLUSTER ${c} TO ${toDb}.${to}${LOCAL_SUFFIX} AS\n${local}`]
  }
  const drop = DROP_TABLE.exec(text)
  if (drop) {
    const [, db, name] = drop
    return [`DROP TABLE IF EXISTS ${db}.${name} ON CLUSTER ${c}`, `DROP TABLE IF EXISTS ${db}.${name}${LOCAL_SUFFIX} ON CLUSTER ${c}`]
  }
  const alter = ALTER_TABLE.exec(text)
  if (alter) {
    const [, db, name, rest] = alter as unknown as [string, string, string, string]
    const local = `ALTER TABLE ${db}.${name}${LOCAL_SUFFIX} ON CLUSTER ${c} ${rest}`
    return COLUMN_CHANGE.test(rest) ? [local, ...remakeDistributed(c, db, name)] : [local]
  }
  if (/^INSERT INTO /.test(text)) return [text]
  throw new Error(`cluster mode: no ON CLUSTER form for: ${text.slice(0, 120)}`)
}

function createTable(c: string, m: RegExpExecArray): string[] {
  const [, db, name, columns, engine, params, rest] = m as unknown as [string, string, string, string, string, string | undefined, string]
  if (!/MergeTree$/.test(engine) || engine.startsWith('Replicated')) {
    throw new Error(`cluster mode: table ${db}.${name} has engine ${engine}; only the MergeTree family becomes Replicated`)
  }
  const local = `${name}${LOCAL_SUFFIX}`
  const args = [`'${replicatedPath(c, db, local)}'`, "'{replica}'", ...(params?.trim() ? [params.trim()] : [])]
  return [
    `CREATE TABLE IF NOT EXISTS ${db}.${local} ON CLUSTER ${c} (${columns}) ENGINE = Replicated${engine}(${args.join(', ')})${rest}`,
    distributedTable(c, db, name),
  ]
}

/** The Distributed table dropped and made again over the local table, whose columns it then takes. */
export function remakeDistributed(cluster: string, db: string, table: string): string[] {
  return [`DROP TABLE IF EXISTS ${db}.${table} ON CLUSTER ${cluster}`, distributedTable(cluster, db, table)]
}

/** A statement skipped when `unless` returns a row (migrations.ts GuardedStatement). */
export interface Guarded {
  sql: string
  unless: string
}

/**
 * A guarded ALTER on a cluster: the ALTER of the local table, guarded by a look at that table
 * (on the node migrate() talks to), then the Distributed table made again (idempotent, unguarded).
 */
export function guardedOnCluster(statement: Guarded, cluster: string): (string | Guarded)[] {
  const [first, ...after] = onCluster(statement.sql, cluster)
  const alter = ALTER_TABLE.exec(statement.sql.trim())
  if (first === undefined || !alter) throw new Error(`cluster mode: a guarded statement must be an ALTER TABLE: ${statement.sql.slice(0, 120)}`)
  const table = alter[2] as string
  const unless = statement.unless.replace(`table = '${table}'`, `table = '${table}${LOCAL_SUFFIX}'`)
  if (unless === statement.unless) throw new Error(`cluster mode: the guard does not name table '${table}': ${statement.unless}`)
  return [{ sql: first, unless }, ...after]
}
