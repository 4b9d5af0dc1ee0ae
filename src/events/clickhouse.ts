// The ClickHouse side of the ingest worker's EventSink (src/events/types.ts).

import type { EventSink, UsageEventRow } from './types.js'
import { insertEventColumnsOnce, insertEventsOnce, type UsageEventColumns } from '../infra/clickhouse/tables.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'

/**
 * Writes each job's events with insertEventColumnsOnce() (the worker's columns, as TabSeparated
 * text) or insertEventsOnce() (rows as objects): rows already stored (a
 * retried or replayed job) are skipped, so the aggregates stay exact; the
 * job's token goes along as insert_deduplication_token where it applies.
 */
export function clickHouseEventSink(store: ClickHouseStore): EventSink {
  return {
    async insertEvents(rows: UsageEventRow[], dedupToken: string, options: { firstAttempt?: boolean } = {}): Promise<void> {
      await insertEventsOnce(store, rows, { dedupToken, firstAttempt: options.firstAttempt })
    },
    async insertEventColumns(columns: UsageEventColumns, dedupToken: string, options: { firstAttempt?: boolean } = {}): Promise<void> {
      await insertEventColumnsOnce(store, columns, { dedupToken, firstAttempt: options.firstAttempt })
    },
  }
}
