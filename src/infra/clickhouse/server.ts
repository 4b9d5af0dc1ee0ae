// The server backend: @clickhouse/client over HTTP. It must also speak to
// Debian's clickhouse-server 18.16, so it sends no settings that version does
// not know (the dedup token only from 22 on) and no SETTINGS clause in SQL.

import { ClickHouseLogLevel, createClient, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client'
import { encodeTsv, sqlIdent, sqlTable } from './sql.js'
import { majorVersion, type ClickHouseStore, type InsertOptions, type QueryOptions } from './store.js'

/** `timeoutMs`: a call not answered by then fails ("Timeout error."): a 503 on the HTTP path (src/infra/availability.ts). */
export async function openServerStore(options: { url: string; database: string; timeoutMs?: number }): Promise<ClickHouseStore> {
  const database = sqlIdent(options.database)
  const settings: ClickHouseSettings = { output_format_json_quote_64bit_integers: 1 }
  // The database may not exist yet: create it through a client on "default".
  const bootstrap = createClient({ url: options.url, database: 'default', clickhouse_settings: settings, log: { level: ClickHouseLogLevel.OFF } })
  let version: string
  try {
    const rs = await bootstrap.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })
    version = ((await rs.json()) as { v: string }[])[0]?.v ?? '0'
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
  return new ServerStore(client, database, majorVersion(version) >= 22)
}

class ServerStore implements ClickHouseStore {
  readonly kind = 'server' as const

  constructor(
    private readonly client: ClickHouseClient,
    readonly database: string,
    private readonly knowsDedupToken: boolean,
  ) {}

  async exec(sql: string): Promise<void> {
    await this.client.command({ query: sql })
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
    const clickhouse_settings: ClickHouseSettings = {}
    if (options?.dedupToken !== undefined && this.knowsDedupToken) {
      clickhouse_settings.insert_deduplicate = 1
      clickhouse_settings.insert_deduplication_token = options.dedupToken
    }
    // The rows follow the statement in the request body, as ClickHouse's HTTP
    // interface allows for INSERT … FORMAT; one request, one insert.
    await this.client.command({
      query: `INSERT INTO ${sqlTable(table)} (${columns.join(', ')}) FORMAT TabSeparated\n${body}`,
      clickhouse_settings,
    })
  }

  async close(): Promise<void> {
    await this.client.close()
  }
}
