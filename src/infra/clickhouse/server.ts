// The server backend: @clickhouse/client over HTTP. It must also speak to
// Debian's clickhouse-server 18.16, so it sends no settings that version does
// not know (the dedup token only from 22 on) and no SETTINGS clause in SQL.
// On a cluster (CLICKHOUSE_CLUSTER, cluster.ts) every INSERT through a Distributed table returns
// only once each shard has its rows (insert_distributed_sync = 1, known to 18.16): accepted means
// written, never "queued on this node to be sent later".

import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client'
import { encodeTsv, sqlIdent, sqlTable } from './sql.js'
import { majorVersion, type ClickHouseStore, type InsertOptions, type QueryOptions, type TsvRows } from './store.js'

/**
 * `timeoutMs`: a call not answered by then fails ("Timeout error."): a 503 on the HTTP path (src/infra/availability.ts).
 * `cluster`: the server must know it (system.clusters), else this throws.
 */
export async function openServerStore(options: { url: string; database: string; timeoutMs?: number; cluster?: string }): Promise<ClickHouseStore> {
  const database = sqlIdent(options.database)
  const settings: ClickHouseSettings = { output_format_json_quote_64bit_integers: 1 }
  // The database may not exist yet: create it through a client on "default".
  const bootstrap = createClient({ url: options.url, database: 'default', clickhouse_settings: settings, log: { level: ClickHouseLogLevel.OFF } })
  let version: string
  try {
    const rs = await bootstrap.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })
    version = ((await rs.json()) as { v: string }[])[0]?.v ?? '0'
    if (options.cluster !== undefined) await checkCluster(bootstrap, options.url, sqlIdent(options.cluster))
    if (database !== 'default') await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` })
  } finally {
    await bootstrap.close()
  }
  // Failed calls reject with the server's message; the client's own error log
  // would only repeat it.
  const client = createClient({
    url: options.url,
    database,
    clickhouse_settings: settings,
    log: { level: ClickHouseLogLevel.OFF },
    ...(options.timeoutMs ? { request_timeout: options.timeoutMs } : {}),
  })
  return new ServerStore(client, database, majorVersion(version) >= 22, options.cluster !== undefined)
}

async function checkCluster(client: ClickHouseClient, url: string, cluster: string): Promise<void> {
  const rs = await client.query({ query: `SELECT count() AS n FROM system.clusters WHERE cluster = '${cluster}'`, format: 'JSONEachRow' })
  const [row] = (await rs.json()) as { n: string }[]
  if (Number(row?.n ?? 0) === 0) {
    throw new Error(
      `CLICKHOUSE_CLUSTER=${cluster}: the server at ${url} has no such cluster (remote_servers in its config; SELECT cluster FROM system.clusters)`,
    )
  }
}

class ServerStore implements ClickHouseStore {
  readonly kind = 'server' as const

  constructor(
    private readonly client: ClickHouseClient,
    readonly database: string,
    private readonly knowsDedupToken: boolean,
    private readonly onCluster: boolean,
  ) {}

  async exec(sql: string): Promise<void> {
    // On a cluster: an INSERT … SELECT waits for every shard, and a DDL ON CLUSTER that failed on
    // a node answers an error status (the whole answer is made before it is sent).
    await this.client.command(this.onCluster ? { query: sql, clickhouse_settings: { insert_distributed_sync: 1, wait_end_of_query: 1 } } : { query: sql })
  }

  async query<T>(sql: string, options: QueryOptions = {}): Promise<T[]> {
    const trimmed = sql.trim().replace(/;+$/, '')
    // Sent after the client's own settings: once readonly = 1 is set, no setting may change.
    const clickhouse_settings: ClickHouseSettings = {}
    if (options.maxExecutionSeconds !== undefined) clickhouse_settings.max_execution_time = options.maxExecutionSeconds
    if (options.readonly) clickhouse_settings.readonly = '1'
    const rs = await this.client.query({ query: trimmed, format: 'JSONEachRow', clickhouse_settings })
    return rs.json<T>()
  }

  async insert(table: string, rows: ReadonlyArray<Record<string, unknown>>, options?: InsertOptions): Promise<void> {
    if (rows.length === 0) return
    const { columns, body } = encodeTsv(rows)
    await this.insertTsv(table, columns, { body, rows: rows.length }, options)
  }

  async insertTsv(table: string, columns: readonly string[], { body, rows }: TsvRows, options?: InsertOptions): Promise<void> {
    if (rows === 0) return
    const clickhouse_settings: ClickHouseSettings = {}
    // On a cluster every insert returns only once each shard has its rows (header comment).
    if (this.onCluster) clickhouse_settings.insert_distributed_sync = 1
    if (options?.dedupToken !== undefined && this.knowsDedupToken) {
      clickhouse_settings.insert_deduplicate = 1
      clickhouse_settings.insert_deduplication_token = options.dedupToken
    }
    // The rows follow the statement in the request body, as ClickHouse's HTTP
    // interface allows for INSERT … FORMAT; one request, one insert.
    await this.client.command({
      query: `INSERT INTO ${sqlTable(table)} (${columns.map(sqlIdent).join(', ')}) FORMAT TabSeparated\n${body}`,
      clickhouse_settings,
    })
  }

  async close(): Promise<void> {
    await this.client.close()
  }
}
