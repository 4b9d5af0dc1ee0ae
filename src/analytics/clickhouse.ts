// The ClickHouse reads of the analytics routes, one query per function. They run on chDB and on
// clickhouse-server 18.16 alike (src/infra/clickhouse/README.md): sums are taken with sum() and GROUP BY
// because the SummingMergeTree aggregates fold only when parts merge; aliases differ from column
// names; decimals come back through toString().

import { sqlIdent, sqlLiteral } from '../infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { isoDay } from './forecast.js'

const HOUR_MS = 3_600_000

/**
 * Usage of one feature: the sum of its accepted events' values (decimal text), and apart the sum
 * of the values an entitlement refused (never billed; src/events/README.md).
 */
export interface FeatureUsage {
  feature_slug: string
  usage: string
  refused: string
}

export interface CustomerRange {
  projectId: string
  customerId: string
  /** Epoch ms, inclusive. */
  fromMs: number
  /** Epoch ms, exclusive. */
  toMs: number
}

/** Epoch ms → seconds for toDateTime(), whole. */
function seconds(ms: number): string {
  return String(Math.floor(ms / 1000))
}

/**
 * Per-feature usage of a customer from the hourly aggregates, for whole hours: `fromMs` and
 * `toMs` must be hour boundaries (the hours `fromMs ≤ hour < toMs`).
 */
export async function hourlyUsageByFeature(store: ClickHouseStore, q: CustomerRange): Promise<FeatureUsage[]> {
  if (q.fromMs % HOUR_MS !== 0 || q.toMs % HOUR_MS !== 0) throw new Error('hourlyUsageByFeature takes whole hours')
  if (q.toMs <= q.fromMs) return []
  const db = sqlIdent(store.database)
  return store.query<FeatureUsage>(
    `SELECT feature_slug, toString(sum(value_sum)) AS usage, toString(sum(refused_sum)) AS refused
     FROM ${db}.usage_hourly
     WHERE project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}
       AND hour >= toDateTime(${seconds(q.fromMs)}, 'UTC') AND hour < toDateTime(${seconds(q.toMs)}, 'UTC')
     GROUP BY feature_slug
     ORDER BY feature_slug`,
  )
}

/**
 * Per-feature usage of a customer from the raw events with `fromMs ≤ ts_ms < toMs`, each event
 * once (FINAL). For the partial hours at the edges of a window; reads the months of the range only.
 */
export async function rawUsageByFeature(store: ClickHouseStore, q: CustomerRange): Promise<FeatureUsage[]> {
  if (q.toMs <= q.fromMs) return []
  const db = sqlIdent(store.database)
  return store.query<FeatureUsage>(
    `SELECT feature_slug, toString(sumIf(value, status != 'refused')) AS usage, toString(sumIf(value, status = 'refused')) AS refused
     FROM ${db}.usage_events FINAL
     WHERE project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}
       AND ts_ms >= ${Math.floor(q.fromMs)} AND ts_ms < ${Math.floor(q.toMs)}
     GROUP BY feature_slug
     ORDER BY feature_slug`,
  )
}

/** One UTC day's usage of a feature: `day` YYYY-MM-DD, `usage` decimal text. */
export interface DayUsage {
  day: string
  usage: string
}

/**
 * Daily accepted usage of one feature of a customer from the daily aggregates (value_sum: what
 * entitlements refused is apart, in refused_sum), for the UTC days starting in `[fromMs, toMs)`;
 * days without events have no row (a day of refused usage only: a row of 0).
 */
export async function dailyUsageOfFeature(store: ClickHouseStore, q: CustomerRange & { featureSlug: string }): Promise<DayUsage[]> {
  if (q.toMs <= q.fromMs) return []
  const db = sqlIdent(store.database)
  const rows = await store.query<{ d: string; v: string }>(
    `SELECT toString(day) AS d, toString(sum(value_sum)) AS v
     FROM ${db}.usage_daily
     WHERE project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}
       AND feature_slug = ${sqlLiteral(q.featureSlug)}
       AND day >= toDate(${sqlLiteral(isoDay(q.fromMs))}) AND day < toDate(${sqlLiteral(isoDay(q.toMs))})
     GROUP BY day
     ORDER BY day`,
  )
  return rows.map((r) => ({ day: r.d, usage: r.v }))
}
