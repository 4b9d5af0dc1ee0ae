// A ClickHouseStore that reports each INSERT (how long it took, how many rows, or that it failed)
// to an observer: the gateway's and the worker's metrics (src/http/metrics.ts). Every write of
// the service goes through `insert` (events, journal movements, invoice lines, migrations).

import type { ClickHouseStore, InsertOptions, QueryOptions, TsvRows } from './store.js'

export interface InsertObserver {
  /** An INSERT of `rows` rows into `table` (without its database) answered after `seconds`. */
  inserted(table: string, rows: number, seconds: number): void
  /** An INSERT into `table` failed after `seconds` (the error goes on to the caller). */
  failed(table: string, seconds: number): void
}

/** `db.table` → `table`: databases differ per deployment (and per test), tables do not. */
export function tableOf(qualified: string): string {
  return qualified.slice(qualified.lastIndexOf('.') + 1)
}

/** The store with its inserts observed; everything else is passed on as it is. */
export function observeInserts(store: ClickHouseStore, observer: InsertObserver): ClickHouseStore {
  return {
    get kind() {
      return store.kind
    },
    get database() {
      return store.database
    },
    exec: (sql: string) => store.exec(sql),
    query: <T = Record<string, unknown>>(sql: string, options?: QueryOptions) => store.query<T>(sql, options),
    async insert(table: string, rows: ReadonlyArray<Record<string, unknown>>, options?: InsertOptions): Promise<void> {
      // No rows: the store sends nothing, so there is nothing to observe.
      if (rows.length === 0) return store.insert(table, rows, options)
      const started = performance.now()
      try {
        await store.insert(table, rows, options)
      } catch (error) {
        observer.failed(tableOf(table), (performance.now() - started) / 1000)
        throw error
      }
      observer.inserted(tableOf(table), rows.length, (performance.now() - started) / 1000)
    },
    async insertTsv(table: string, columns: readonly string[], tsv: TsvRows, options?: InsertOptions): Promise<void> {
      if (tsv.rows === 0) return store.insertTsv(table, columns, tsv, options)
      const started = performance.now()
      try {
        await store.insertTsv(table, columns, tsv, options)
      } catch (error) {
        observer.failed(tableOf(table), (performance.now() - started) / 1000)
        throw error
      }
      observer.inserted(tableOf(table), tsv.rows, (performance.now() - started) / 1000)
    },
    close: () => store.close(),
  }
}
