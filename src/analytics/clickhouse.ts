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
  /** Raw reads only: the newest event's ts_ms (epoch ms, decimal text). */
  newest?: string
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

/** The WHERE clause of a customer's rows, and of one feature's when `featureSlug` is given. */
function customerRows(q: CustomerRange & { featureSlug?: string }): string {
  const feature = q.featureSlug === undefined ? '' : ` AND feature_slug = ${sqlLiteral(q.featureSlug)}`
  return `project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}${feature}`
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
    `SELECT feature_slug, toString(sumIf(value, status != 'refused')) AS usage, toString(sumIf(value, status = 'refused')) AS refused,
       toString(max(ts_ms)) AS newest
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

/**
 * The newest event timestamp (ts_ms, epoch ms) of a customer, or of one of its features, with
 * `fromMs ≤ ts_ms < toMs` (accepted and refused rows alike): the newest hour with events from the
 * hourly aggregates (their primary key leads with the customer), then the raw events of that hour
 * only. Two small reads, a few more only when that hour's events all lie outside the range (an
 * event stamped up to 5 minutes ahead of the clock). undefined when there is none.
 */
export async function newestEventMs(store: ClickHouseStore, q: CustomerRange & { featureSlug?: string }): Promise<number | undefined> {
  const db = sqlIdent(store.database)
  const firstHour = Math.floor(q.fromMs / HOUR_MS) * HOUR_MS
  for (let toMs = q.toMs; toMs > q.fromMs; ) {
    const [hour] = await store.query<{ n: string; h: string }>(
      `SELECT toString(count()) AS n, toString(toUInt32(max(hour))) AS h
       FROM ${db}.usage_hourly
       WHERE ${customerRows(q)}
         AND hour >= toDateTime(${seconds(firstHour)}, 'UTC') AND hour < toDateTime(${Math.ceil(toMs / 1000)}, 'UTC')`,
    )
    if (!hour || hour.n === '0') return undefined
    const hourMs = Number(hour.h) * 1000
    const [raw] = await store.query<{ n: string; t: string }>(
      `SELECT toString(count()) AS n, toString(max(ts_ms)) AS t
       FROM ${db}.usage_events
       WHERE ${customerRows(q)}
         AND ts_ms >= ${Math.max(hourMs, Math.floor(q.fromMs))} AND ts_ms < ${Math.min(hourMs + HOUR_MS, Math.floor(toMs))}`,
    )
    if (raw && raw.n !== '0') return Number(raw.t)
    // The hour's events lie outside the range: the newest is in an earlier hour, if any.
    toMs = hourMs
  }
  return undefined
}
