// Writing usage events and journal movements exactly once, and the one read
// the analytics needs from the aggregates. See README.md "Exactly once".

import { canonicalDecimal, dateTimeUtc, sqlIdent, sqlLiteral } from './sql.js'
import type { ClickHouseStore } from './store.js'

/** A row of usage_events as written (value is a decimal string, exact to 10^-8). */
export interface UsageEventRow {
  project_id: string
  event_id: string
  customer_id: string
  event_slug: string
  feature_slug: string
  /** Decimal string (exact to 10^-8) or a number (written in plain decimal notation). */
  value: string | number
  /** JSON text. */
  properties: string
  ts_ms: number
  /** `accepted` (default) or `refused`: whether an entitlement refused the row's usage (migration 7). */
  status?: 'accepted' | 'refused'
  /** The decision that set `status`: `claim`, `consume:<runId>` (migration 7; default ''). */
  decision?: string
}

/** A row of budget_journal as written. */
export interface JournalRow {
  project_id: string
  budget_key: string
  movement_id: string
  kind: 'settle' | 'charge' | 'record' | 'expiry' | 'release'
  hold_id: string
  /** Decimal string, as the budgets path formats amounts. */
  amount: string
  /** The budget's unit (migration 4; '' before). */
  unit?: string
  /** The idempotency key of the charge or record, or of the authorize that made the hold (migration 4). */
  idempotency_key?: string
  ts_ms: number
}

export interface InsertOnceResult {
  inserted: number
  /** Rows already stored (a retried batch) or repeated inside this batch. */
  skipped: number
}

/** SQL text per lookup query: well under 18.16's max_query_size (256 KiB). */
const LOOKUP_SQL_CHARS = 160_000

/**
 * Inserts the events not yet in usage_events, so that a retried batch (a
 * worker killed after its insert but before its job was acknowledged) adds
 * nothing, and the materialized views that feed usage_hourly/usage_daily see
 * each event once. Correct as long as one writer at a time holds a given
 * event, which the Redis-side dedup and the queue's job lock provide.
 */
export function insertEventsOnce(store: ClickHouseStore, events: ReadonlyArray<UsageEventRow>, options: InsertOnceOptions = {}): Promise<InsertOnceResult> {
  const insertedAt = dateTimeUtc(options.nowMs ?? Date.now())
  // A literal of one shape rather than a spread: this runs for every event (bench/README.md).
  return insertOnce(
    store,
    'usage_events',
    ['project_id', 'event_id'],
    events,
    (e) => ({
      project_id: e.project_id,
      event_id: e.event_id,
      customer_id: e.customer_id,
      event_slug: e.event_slug,
      feature_slug: e.feature_slug,
      value: e.value,
      properties: e.properties,
      ts_ms: e.ts_ms,
      status: e.status ?? 'accepted',
      decision: e.decision ?? '',
      inserted_at: insertedAt,
    }),
    options,
  )
}

export interface InsertOnceOptions {
  /** See InsertOptions.dedupToken in store.ts. */
  dedupToken?: string
  /** inserted_at; default now. */
  nowMs?: number
  /**
   * The caller knows no attempt of this batch ever started before (BullMQ:
   * job.attemptsStarted === 1, not a replay from the dead-letter queue), so
   * none of its rows can be stored yet: skip the lookup (about half the cost
   * of a 10k-row write). Rows that passed the Redis dedup are then trusted.
   */
  firstAttempt?: boolean
}

/** The same for budget movements, keyed by (project_id, budget_key, movement_id). */
export function insertJournalOnce(store: ClickHouseStore, movements: ReadonlyArray<JournalRow>, options: InsertOnceOptions = {}): Promise<InsertOnceResult> {
  const insertedAt = dateTimeUtc(options.nowMs ?? Date.now())
  return insertOnce(store, 'budget_journal', ['project_id', 'budget_key', 'movement_id'], movements, (m) => ({ ...m, inserted_at: insertedAt }), options)
}

/**
 * The generic form for the journal outbox (src/journal/): rows of any table whose rows carry
 * `project_id` and an id column unique within the project (`movement_id`, `event_id`), written
 * with `inserted_at` = now. Rows already stored (same project_id and id) and repeats inside the
 * batch are skipped; when every row has a numeric `ts_ms`, the lookup is pruned to its range.
 */
export function insertOnceById(
  store: ClickHouseStore,
  table: string,
  idColumn: string,
  rows: ReadonlyArray<Record<string, unknown>>,
  options: InsertOnceOptions = {},
): Promise<InsertOnceResult> {
  const insertedAt = dateTimeUtc(options.nowMs ?? Date.now())
  return insertOnce(store, sqlIdent(table), ['project_id', sqlIdent(idColumn)], rows, (r) => ({ ...r, inserted_at: insertedAt }), options)
}

async function insertOnce<R extends { ts_ms?: unknown }>(
  store: ClickHouseStore,
  table: string,
  key: readonly (keyof R & string)[],
  rows: ReadonlyArray<R>,
  toRow: (r: R) => Record<string, unknown>,
  options: InsertOnceOptions,
): Promise<InsertOnceResult> {
  const db = sqlIdent(store.database)
  const keyOf = (r: Record<string, unknown>): string => keyText(key.map((k) => r[k]))
  const fresh = new Map<string, R>()
  for (const r of rows) {
    const k = keyOf(r)
    if (!fresh.has(k)) fresh.set(k, r)
  }
  if (options.firstAttempt === true) {
    const toInsert = [...fresh.values()].map(toRow)
    await store.insert(`${db}.${table}`, toInsert, options.dedupToken === undefined ? {} : { dedupToken: options.dedupToken })
    return { inserted: toInsert.length, skipped: rows.length - toInsert.length }
  }

  // Rows sharing every key column but the last (the project, the budget) are
  // looked up with `prefix = … AND last IN (…)`, which reads the primary
  // index; lists are cut so each query stays under LOOKUP_SQL_CHARS.
  const prefix = key.slice(0, -1)
  const last = key[key.length - 1] as keyof R & string
  const groups = new Map<string, R[]>()
  for (const r of fresh.values()) {
    const g = keyText(prefix.map((k) => r[k]))
    const list = groups.get(g)
    if (list === undefined) groups.set(g, [r])
    else list.push(r)
  }
  for (const group of groups.values()) {
    const head = group[0] as R
    const where = prefix.map((k) => `${k} = ${sqlLiteral(head[k] as string)}`).join(' AND ')
    for (let i = 0; i < group.length; ) {
      let lo = Infinity
      let hi = -Infinity
      let ranged = true
      let chars = 0
      const ids: string[] = []
      for (; i < group.length && chars < LOOKUP_SQL_CHARS; i++) {
        const r = group[i] as R
        const lit = sqlLiteral(r[last] as string)
        ids.push(lit)
        chars += lit.length + 2
        if (typeof r.ts_ms !== 'number') ranged = false
        else {
          lo = Math.min(lo, r.ts_ms)
          hi = Math.max(hi, r.ts_ms)
        }
      }
      // The ts_ms range lets ClickHouse skip partitions: a retried row
      // carries the same ts_ms as the stored one.
      const found = await store.query<Record<string, string>>(
        `SELECT ${key.join(', ')} FROM ${db}.${table} ` +
          `WHERE ${where}${where === '' ? '' : ' AND '}${ranged ? `ts_ms >= ${lo} AND ts_ms <= ${hi} AND ` : ''}${last} IN (${ids.join(', ')})`,
      )
      for (const f of found) fresh.delete(keyOf(f))
    }
  }

  const toInsert = [...fresh.values()].map(toRow)
  await store.insert(`${db}.${table}`, toInsert, options.dedupToken === undefined ? {} : { dedupToken: options.dedupToken })
  return { inserted: toInsert.length, skipped: rows.length - toInsert.length }
}

/**
 * One text per key, the same for the row and for the row read back (ids come back as text):
 * each value as text, prefixed by its length, so no two different keys give the same text.
 */
function keyText(values: readonly unknown[]): string {
  let text = ''
  for (const v of values) {
    const s = typeof v === 'string' ? v : String(v)
    text += `${s.length}:${s}`
  }
  return text
}

export interface DailyUsage {
  /** YYYY-MM-DD (UTC). */
  day: string
  feature_slug: string
  /** Accepted usage: decimal string. */
  value: string
  /** Accepted rows. */
  count: number
  /** Usage an entitlement refused (never billed): decimal string. */
  refusedValue: string
  refusedCount: number
}

/**
 * Per-day usage of one customer, from usage_daily: accepted usage, and refused usage apart.
 * sum() because SummingMergeTree folds rows only when parts merge.
 */
export async function dailyUsage(
  store: ClickHouseStore,
  q: { projectId: string; customerId: string; featureSlug?: string; fromDay: string; toDay: string },
): Promise<DailyUsage[]> {
  const db = sqlIdent(store.database)
  const feature = q.featureSlug === undefined ? '' : ` AND feature_slug = ${sqlLiteral(q.featureSlug)}`
  // Aliases differ from column names: 18.16 substitutes an alias wherever
  // its name appears, WHERE included.
  const rows = await store.query<{ d: string; feature_slug: string; v: string; n: string; r: string; rn: string }>(
    `SELECT toString(day) AS d, feature_slug, toString(sum(value_sum)) AS v, sum(event_count) AS n,
       toString(sum(refused_sum)) AS r, sum(refused_count) AS rn
     FROM ${db}.usage_daily
     WHERE project_id = ${sqlLiteral(q.projectId)} AND customer_id = ${sqlLiteral(q.customerId)}${feature}
       AND day >= toDate(${sqlLiteral(q.fromDay)}) AND day <= toDate(${sqlLiteral(q.toDay)})
     GROUP BY day, feature_slug
     ORDER BY day, feature_slug`,
  )
  return rows.map((r) => ({
    day: r.d,
    feature_slug: r.feature_slug,
    value: canonicalDecimal(r.v),
    count: Number(r.n),
    refusedValue: canonicalDecimal(r.r),
    refusedCount: Number(r.rn),
  }))
}
