// Usage over time, for charts (the console, src/http/console/): a customer's accepted and refused
// usage per feature and hour or day (from the usage_hourly and usage_daily aggregates), and what a
// budget consumed per hour or day (from budget_journal, which the journal worker fills). One query
// per function; they run on chDB and on clickhouse-server 18.16 alike (src/infra/clickhouse/README.md):
// sum() with GROUP BY, aliases other than column names, decimals through toString().

import { canonicalDecimal, sqlIdent, sqlLiteral } from '../infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { isoDay } from './forecast.js'

export type SeriesInterval = 'hour' | 'day'

const STEP_MS: Record<SeriesInterval, number> = { hour: 3_600_000, day: 86_400_000 }

/** The most buckets one series may have: 31 days of hours, or about 13 months of days. */
export const MAX_BUCKETS: Record<SeriesInterval, number> = { hour: 744, day: 400 }

/** A window laid on whole UTC hours or days: `[fromMs, toMs)`, both on the interval's boundaries. */
export interface SeriesWindow {
  fromMs: number
  toMs: number
  interval: SeriesInterval
}

/**
 * The whole buckets that cover `[fromMs, toMs)`: `fromMs` rounded down and `toMs` rounded up to
 * the interval (UTC). Undefined when the window is empty or needs more than MAX_BUCKETS buckets.
 */
export function seriesWindow(fromMs: number, toMs: number, interval: SeriesInterval): SeriesWindow | undefined {
  const step = STEP_MS[interval]
  const from = Math.floor(fromMs / step) * step
  const to = Math.ceil(toMs / step) * step
  if (to <= from || (to - from) / step > MAX_BUCKETS[interval]) return undefined
  return { fromMs: from, toMs: to, interval }
}

/** The start of every bucket of the window, in order. */
export function bucketStarts(w: SeriesWindow): number[] {
  const step = STEP_MS[w.interval]
  const starts: number[] = []
  for (let t = w.fromMs; t < w.toMs; t += step) starts.push(t)
  return starts
}

/** A bucket's start as ClickHouse prints it (`2026-11-08` for a Date, `2026-11-08 13:00:00` for a UTC DateTime) → epoch ms. */
export function bucketMs(text: string): number {
  return Date.parse(text.length === 10 ? `${text}T00:00:00Z` : `${text.replace(' ', 'T')}Z`)
}

export interface UsagePoint {
  /** The bucket's start, epoch ms. */
  at: number
  /** Accepted usage in the bucket, exact decimal text. */
  usage: string
  /** Usage an entitlement refused in the bucket (never billed), exact decimal text. */
  refused: string
}

export interface FeatureSeries {
  feature_slug: string
  /** One point per bucket of the window, buckets without usage included (`"0"`). */
  points: UsagePoint[]
}

/** A customer's usage per feature and bucket; features without usage in the window have no series. */
export async function customerUsageSeries(store: ClickHouseStore, q: { projectId: string; customerId: string } & SeriesWindow): Promise<FeatureSeries[]> {
  const db = sqlIdent(store.database)
  const where = `project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}`
  const sql =
    q.interval === 'hour'
      ? `SELECT feature_slug AS f, toString(hour) AS b, toString(sum(value_sum)) AS u, toString(sum(refused_sum)) AS r
         FROM ${db}.usage_hourly
         WHERE ${where} AND hour >= toDateTime(${q.fromMs / 1000}, 'UTC') AND hour < toDateTime(${q.toMs / 1000}, 'UTC')
         GROUP BY feature_slug, hour ORDER BY feature_slug, hour`
      : `SELECT feature_slug AS f, toString(day) AS b, toString(sum(value_sum)) AS u, toString(sum(refused_sum)) AS r
         FROM ${db}.usage_daily
         WHERE ${where} AND day >= toDate(${sqlLiteral(isoDay(q.fromMs))}) AND day < toDate(${sqlLiteral(isoDay(q.toMs))})
         GROUP BY feature_slug, day ORDER BY feature_slug, day`
  const rows = await store.query<{ f: string; b: string; u: string; r: string }>(sql)
  const byFeature = new Map<string, Map<number, { u: string; r: string }>>()
  for (const row of rows) {
    const buckets = byFeature.get(row.f) ?? byFeature.set(row.f, new Map()).get(row.f)!
    buckets.set(bucketMs(row.b), { u: canonicalDecimal(row.u), r: canonicalDecimal(row.r) })
  }
  const starts = bucketStarts(q)
  return [...byFeature].map(([feature_slug, buckets]) => ({
    feature_slug,
    points: starts.map((at) => ({ at, usage: buckets.get(at)?.u ?? '0', refused: buckets.get(at)?.r ?? '0' })),
  }))
}

export interface BudgetPoint {
  at: number
  /** What the budget's movements in the bucket consumed, exact decimal text. */
  consumed: string
  /** How many movements (settles, releases, expiries, charges, records, lease reports). */
  movements: number
}

/** What a budget consumed per bucket, from its journal (movements count when their usage does: `ts_ms`). */
export async function budgetUsageSeries(store: ClickHouseStore, q: { projectId: string; budgetKey: string } & SeriesWindow): Promise<BudgetPoint[]> {
  const db = sqlIdent(store.database)
  const at = "toDateTime(intDiv(ts_ms, 1000), 'UTC')"
  const bucket = q.interval === 'hour' ? `toString(toStartOfHour(${at}))` : `toString(toDate(${at}))`
  const rows = await store.query<{ b: string; v: string; n: string | number }>(
    `SELECT ${bucket} AS b, toString(sum(toDecimal128(amount, 8))) AS v, count() AS n
     FROM ${db}.budget_journal FINAL
     WHERE project_id = ${sqlLiteral(q.projectId)} AND budget_key = ${sqlLiteral(q.budgetKey)}
       AND ts_ms >= ${q.fromMs} AND ts_ms < ${q.toMs}
     GROUP BY b ORDER BY b`,
  )
  const buckets = new Map(rows.map((r) => [bucketMs(r.b), r]))
  return bucketStarts(q).map((start) => {
    const row = buckets.get(start)
    return { at: start, consumed: row ? canonicalDecimal(row.v) : '0', movements: row ? Number(row.n) : 0 }
  })
}
