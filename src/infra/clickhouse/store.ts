// One interface over the two ClickHouse backends the service runs on: a
// ClickHouse server over HTTP (@clickhouse/client, when CLICKHOUSE_URL is set)
// and chDB in-process (the `chdb` package, in a worker thread). The SQL is the
// same for both and also runs on Debian's clickhouse-server 18.16; see README.md.

export interface InsertOptions {
  /**
   * Passed as `insert_deduplication_token` where the engine knows that setting
   * (ClickHouse ≥ 22.2: chDB, modern servers). It deduplicates only on
   * Replicated* tables or tables with `non_replicated_deduplication_window`,
   * and 18.16 ignores it; exactly-once for events comes from insertEventsOnce().
   */
  dedupToken?: string
}

/** Rows as TabSeparated text (encodeTsv's encoding), and how many lines it holds. */
export interface TsvRows {
  body: string
  rows: number
}

/** How one query runs (the operators' read-only SQL: POST /v1/admin/sql, `npm run cli -- sql`). */
export interface QueryOptions {
  /**
   * readonly = 1: the engine refuses writes, DDL, setting changes and table functions. A server
   * takes it as a setting of the request; chDB as the query's SETTINGS clause.
   */
  readonly?: boolean
  /** max_execution_time: the engine stops the query after this many seconds. */
  maxExecutionSeconds?: number
}

export interface ClickHouseStore {
  readonly kind: 'server' | 'embedded'
  /** The database every unqualified name resolves to. */
  readonly database: string
  /** DDL or any statement without a result. */
  exec(sql: string): Promise<void>
  /**
   * Rows of a SELECT as JSON objects (the store appends FORMAT JSONEachRow).
   * As ClickHouse renders them: 64-bit integers are strings on both backends
   * (output_format_json_quote_64bit_integers=1); select decimals with toString().
   */
  query<T = Record<string, unknown>>(sql: string, options?: QueryOptions): Promise<T[]>
  /** One INSERT of all rows (columns = the first row's keys); a no-op for no rows. */
  insert(table: string, rows: ReadonlyArray<Record<string, unknown>>, options?: InsertOptions): Promise<void>
  /**
   * One INSERT of TabSeparated text already encoded as encodeTsv does (sql.ts: `tsvText` for
   * strings): `tsv.body` is `tsv.rows` lines each ending in '\n', one field per column in
   * `columns`' order; a no-op for no rows. What `insert` runs after encoding, for a writer that
   * builds the text itself (the ingest worker) without row objects; the same settings apply.
   */
  insertTsv(table: string, columns: readonly string[], tsv: TsvRows, options?: InsertOptions): Promise<void>
  close(): Promise<void>
}

/** Appends FORMAT JSONEachRow to a SELECT (after a trailing `;` or whitespace is trimmed). */
export function withJsonFormat(sql: string): string {
  const trimmed = sql.trim().replace(/;+$/, '')
  return /\bFORMAT\s+\w+\s*$/i.test(trimmed) ? trimmed : `${trimmed}\nFORMAT JSONEachRow`
}

/** Parses JSONEachRow text: one object per line. */
export function parseJsonEachRow<T>(text: string): T[] {
  const rows: T[] = []
  for (const line of text.split('\n')) if (line.length > 0) rows.push(JSON.parse(line) as T)
  return rows
}

/** The major version from `SELECT version()` ("18.16.1" → 18). */
export function majorVersion(version: string): number {
  return Number.parseInt(version.split('.')[0] ?? '0', 10) || 0
}
