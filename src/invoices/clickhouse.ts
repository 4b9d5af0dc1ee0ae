// The ClickHouse reads of invoices, one query per function. They run on chDB and on
// clickhouse-server 18.16 alike (src/infra/clickhouse/README.md): aliases differ from column names,
// decimals come back through toString() and canonicalDecimal().

import type { AggregationMethod } from '../catalog/schemas.js'
import { canonicalDecimal, sqlIdent, sqlList, sqlLiteral } from '../infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { UNITS_PER_ONE } from '../kernel/money.js'

/** One usage feature to measure: the rows whose feature_slug is the feature's slug or its meter's event slug. */
export interface MeteredFeature {
  featureSlug: string
  eventSlug: string
  aggregationMethod: AggregationMethod
}

interface UsageAggregates {
  fs: string
  s: string
  n: string
  m: string
  l: string
}

/**
 * A customer's accepted usage of some features over `[fromMs, toMs)`, each event once (FINAL),
 * aggregated per the feature's meter: sum of `value`, count of events, max of `value`, or the
 * value of the latest event. Rows an entitlement refused (`status = 'refused'`) are never billed.
 * Exact, in units of 10^-8 (0 for a feature without events). One query for all features.
 */
export async function cycleUsage(
  store: ClickHouseStore,
  q: { projectId: string; customerId: string; fromMs: number; toMs: number; features: MeteredFeature[] },
): Promise<Map<string, bigint>> {
  const usage = new Map<string, bigint>()
  if (q.features.length === 0) return usage
  const slugs = [...new Set(q.features.flatMap((f) => [f.featureSlug, f.eventSlug]))]
  const db = sqlIdent(store.database)
  const rows =
    q.toMs <= q.fromMs
      ? []
      : await store.query<UsageAggregates>(
          `SELECT feature_slug AS fs, toString(sum(value)) AS s, toString(count()) AS n, toString(max(value)) AS m,
            toString(argMax(value, ts_ms)) AS l
     FROM ${db}.usage_events FINAL
     WHERE project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}
       AND ts_ms >= ${Math.floor(q.fromMs)} AND ts_ms < ${Math.floor(q.toMs)}
       AND feature_slug IN ${sqlList(slugs)} AND status != 'refused'
     GROUP BY feature_slug`,
        )
  const bySlug = new Map(rows.map((r) => [r.fs, r]))
  for (const f of q.features) {
    // The feature's rows carry its slug, or (the ingest path's mapping today) its meter's event slug.
    const found = [bySlug.get(f.featureSlug), f.eventSlug === f.featureSlug ? undefined : bySlug.get(f.eventSlug)].filter((r) => r !== undefined)
    usage.set(f.featureSlug, aggregate(found, f.aggregationMethod))
  }
  return usage
}

/** Units of 10^-8 of a decimal text (may be negative). */
function units(text: string): bigint {
  const t = canonicalDecimal(text)
  const negative = t.startsWith('-')
  const [whole, fraction = ''] = (negative ? t.slice(1) : t).split('.')
  const u = BigInt(whole!) * 100_000_000n + BigInt(fraction.padEnd(8, '0').slice(0, 8))
  return negative ? -u : u
}

/** Combines the aggregates of the (at most two) slugs a feature's rows carry, in units of 10^-8. */
function aggregate(rows: UsageAggregates[], method: AggregationMethod): bigint {
  if (rows.length === 0) return 0n
  switch (method) {
    case 'sum':
      return rows.reduce((s, r) => s + units(r.s), 0n)
    case 'count':
      return rows.reduce((s, r) => s + BigInt(r.n), 0n) * UNITS_PER_ONE
    case 'max':
      // biome-ignore lint/complexity/useMathMinMax: bigints, which Math.max does not take
      return rows.map((r) => units(r.m)).reduce((a, b) => (a > b ? a : b))
    // Two slugs' "latest" cannot be ordered without their times; the ingest path writes one of them only.
    case 'latest':
      return units(rows[rows.length - 1]!.l)
  }
}
