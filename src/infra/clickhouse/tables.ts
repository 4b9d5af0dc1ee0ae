// Writing usage events and journal movements exactly once, and the one read
// the analytics needs from the aggregates. See README.md "Exactly once".

import { randomBytes } from 'node:crypto'
import { canonicalDecimal, dateTimeUtc, plainNumber, sqlIdent, sqlLiteral, tsvText } from './sql.js'
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
  // The lookup reads usage_event_ids, sorted by (project_id, event_id) (migration 8): usage_events
  // itself is sorted for customer/time scans, where event_id is last.
  return insertOnce(
    store,
    { insert: 'usage_events', lookup: 'usage_event_ids' },
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

/** The columns of usage_events as insertEventColumnsOnce writes them, in this order. */
export const USAGE_EVENT_COLUMNS = [
  'project_id',
  'event_id',
  'customer_id',
  'event_slug',
  'feature_slug',
  'value',
  'properties',
  'ts_ms',
  'status',
  'decision',
  'inserted_at',
] as const

/**
 * Rows of usage_events held as columns (one array per column, the same index in each): what the
 * ingest worker builds from a job, with no object per row; insertEventColumnsOnce writes them as
 * TabSeparated text. `value` is a decimal string (exact to 10^-8), `properties` JSON text. Rows of
 * one event share its strings, so each is escaped once for all of them.
 */
export class UsageEventColumns {
  project_id: string[] = []
  event_id: string[] = []
  customer_id: string[] = []
  event_slug: string[] = []
  feature_slug: string[] = []
  value: string[] = []
  properties: string[] = []
  ts_ms: number[] = []
  status: ('accepted' | 'refused')[] = []
  decision: string[] = []

  get length(): number {
    return this.event_id.length
  }

  push(r: Omit<UsageEventRow, 'value' | 'status' | 'decision'> & { value: string; status: 'accepted' | 'refused'; decision: string }): void {
    this.project_id.push(r.project_id)
    this.event_id.push(r.event_id)
    this.customer_id.push(r.customer_id)
    this.event_slug.push(r.event_slug)
    this.feature_slug.push(r.feature_slug)
    this.value.push(r.value)
    this.properties.push(r.properties)
    this.ts_ms.push(r.ts_ms)
    this.status.push(r.status)
    this.decision.push(r.decision)
  }

  /** Row `i` as an object (for sinks and tests that take rows). */
  row(i: number): Required<UsageEventRow> & { value: string } {
    return {
      project_id: this.project_id[i]!,
      event_id: this.event_id[i]!,
      customer_id: this.customer_id[i]!,
      event_slug: this.event_slug[i]!,
      feature_slug: this.feature_slug[i]!,
      value: this.value[i]!,
      properties: this.properties[i]!,
      ts_ms: this.ts_ms[i]!,
      status: this.status[i]!,
      decision: this.decision[i]!,
    }
  }

  /** Several batches as one (a shared insert), in order. */
  static concat(list: readonly UsageEventColumns[]): UsageEventColumns {
    if (list.length === 1) return list[0]!
    const out = new UsageEventColumns()
    const [first, ...rest] = list
    if (first === undefined) return out
    for (const name of COLUMN_NAMES) (out[name] as unknown[]) = (first[name] as unknown[]).concat(...rest.map((c) => c[name] as unknown[]))
    return out
  }
}

const COLUMN_NAMES = USAGE_EVENT_COLUMNS.filter((c) => c !== 'inserted_at')

/**
 * insertEventsOnce for rows held as columns, written as TabSeparated text straight from them
 * (store.insertTsv; strings escaped by tsvText, numbers by plainNumber, as encodeTsv does): the
 * first row of each (project, event id) in the batch, less those usage_event_ids already holds
 * (looked up unless `firstAttempt`), with `inserted_at` = now.
 */
export async function insertEventColumnsOnce(store: ClickHouseStore, cols: UsageEventColumns, options: InsertOnceOptions = {}): Promise<InsertOnceResult> {
  const db = sqlIdent(store.database)
  let fresh = firstOfEachKey(cols)
  if (options.firstAttempt !== true && fresh.length > 0) {
    const keys = fresh.map((i) => ({ project_id: cols.project_id[i]!, event_id: cols.event_id[i]!, ts_ms: cols.ts_ms[i]! }))
    const stored = new Set(await storedKeys(store, `${db}.usage_event_ids`, ['project_id', 'event_id'], keys))
    if (stored.size > 0) fresh = fresh.filter((i) => !stored.has(keyText([cols.project_id[i], cols.event_id[i]])))
  }
  const body = usageEventsTsv(cols, dateTimeUtc(options.nowMs ?? Date.now()), fresh)
  await store.insertTsv(
    `${db}.usage_events`,
    USAGE_EVENT_COLUMNS,
    { body, rows: fresh.length },
    options.dedupToken === undefined ? {} : { dedupToken: options.dedupToken },
  )
  return { inserted: fresh.length, skipped: cols.length - fresh.length }
}

/** The decision of most usage_events rows (src/events/rows.ts CLAIM_DECISION). */
const CLAIM = 'claim'

/** tsvText of a column's strings, escaping once for a run of the same string. */
class LastEscaped {
  private last: string | undefined
  private text = ''

  of(value: string): string {
    if (value !== this.last) {
      this.last = value
      this.text = tsvText(value)
    }
    return this.text
  }
}

/** The indexes of the first row of each (project, event id), in order: one set of ids per project, no key text per row. */
function firstOfEachKey(cols: UsageEventColumns): number[] {
  const byProject = new Map<string, Set<string>>()
  let project: string | undefined
  let seen = new Set<string>()
  const out: number[] = []
  for (let i = 0; i < cols.length; i++) {
    const p = cols.project_id[i]!
    if (p !== project) {
      project = p
      seen = byProject.get(p) ?? byProject.set(p, new Set()).get(p)!
    }
    const id = cols.event_id[i]!
    if (seen.has(id)) continue
    seen.add(id)
    out.push(i)
  }
  return out
}

/**
 * The rows at `indexes` (default: all) as TabSeparated lines in USAGE_EVENT_COLUMNS' order, the
 * text encodeTsv makes of the same rows. A string equal to the previous row's in its column (the
 * rows of one event, one project's customers in a run) reuses its escaped text.
 */
export function usageEventsTsv(c: UsageEventColumns, insertedAt: string, indexes: readonly number[] = Array.from({ length: c.length }, (_, i) => i)): string {
  let body = ''
  const project = new LastEscaped()
  const customer = new LastEscaped()
  const slug = new LastEscaped()
  const props = new LastEscaped()
  const decision = new LastEscaped()
  // The last three fields of most rows are one of two texts: built once.
  const accepted = `\taccepted\t${tsvText(CLAIM)}\t${insertedAt}\n`
  const refused = `\trefused\t${tsvText(CLAIM)}\t${insertedAt}\n`
  for (const i of indexes) {
    const eventSlug = c.event_slug[i]!
    const feature = c.feature_slug[i]!
    const d = c.decision[i]!
    const tail = d !== CLAIM ? `\t${c.status[i]}\t${decision.of(d)}\t${insertedAt}\n` : c.status[i] === 'refused' ? refused : accepted
    body +=
      `${project.of(c.project_id[i]!)}\t${tsvText(c.event_id[i]!)}\t${customer.of(c.customer_id[i]!)}\t${slug.of(eventSlug)}` +
      `\t${feature === eventSlug ? slug.of(eventSlug) : tsvText(feature)}\t${tsvText(c.value[i]!)}\t${props.of(c.properties[i]!)}\t${plainNumber(c.ts_ms[i]!)}${tail}`
  }
  return body
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
  /** The table, or where to insert and where to look up stored keys. */
  tables: string | { insert: string; lookup: string },
  key: readonly (keyof R & string)[],
  rows: ReadonlyArray<R>,
  toRow: (r: R) => Record<string, unknown>,
  options: InsertOnceOptions,
): Promise<InsertOnceResult> {
  const db = sqlIdent(store.database)
  const table = typeof tables === 'string' ? tables : tables.insert
  const lookup = typeof tables === 'string' ? tables : tables.lookup
  const keyOf = (r: Record<string, unknown>): string => keyText(key.map((k) => r[k]))
  const fresh = new Map<string, R>()
  for (const r of rows) {
    const k = keyOf(r)
    if (!fresh.has(k)) fresh.set(k, r)
  }
  // A first attempt (no earlier insert of these rows can exist) needs no lookup.
  if (options.firstAttempt !== true) for (const k of await storedKeys(store, `${db}.${lookup}`, key, fresh.values())) fresh.delete(k)

  const toInsert = [...fresh.values()].map(toRow)
  await store.insert(`${db}.${table}`, toInsert, options.dedupToken === undefined ? {} : { dedupToken: options.dedupToken })
  return { inserted: toInsert.length, skipped: rows.length - toInsert.length }
}

/**
 * The keys (keyText) of `rows` already stored in `lookup`. Rows sharing every key column but the
 * last (the project, the budget) are looked up with `prefix = … AND last IN (…)`, which reads the
 * primary index; lists are cut so each query stays under LOOKUP_SQL_CHARS.
 */
async function storedKeys<R extends { ts_ms?: unknown }>(
  store: ClickHouseStore,
  lookup: string,
  key: readonly (keyof R & string)[],
  rows: Iterable<R>,
): Promise<string[]> {
  const prefix = key.slice(0, -1)
  const groups = new Map<string, R[]>()
  for (const r of rows) {
    const g = keyText(prefix.map((k) => r[k]))
    const list = groups.get(g)
    if (list === undefined) groups.set(g, [r])
    else list.push(r)
  }
  const found: string[] = []
  for (const group of groups.values()) {
    for (let i = 0; i < group.length; ) i = await lookupSome(store, lookup, key, group, i, found)
  }
  return found
}

/** One lookup query of `group` from index `from`; pushes the stored keys to `found`, returns where the next starts. */
async function lookupSome<R extends { ts_ms?: unknown }>(
  store: ClickHouseStore,
  lookup: string,
  key: readonly (keyof R & string)[],
  group: readonly R[],
  from: number,
  found: string[],
): Promise<number> {
  const prefix = key.slice(0, -1)
  const last = key[key.length - 1] as keyof R & string
  const head = group[0] as R
  const where = prefix.map((k) => `${k} = ${sqlLiteral(head[k] as string)}`).join(' AND ')
  let lo = Infinity
  let hi = -Infinity
  let ranged = true
  let chars = 0
  const ids: string[] = []
  let i = from
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
  // The ts_ms range lets ClickHouse skip partitions: a retried row carries the same ts_ms as the
  // stored one. The ids go as one array literal in a subquery, not as `IN ('a', 'b', …)`: the
  // parser reads an array of literals as one value, where a tuple makes a node per id; for 10,000
  // ids the lookup takes ~20 ms instead of ~70–85 ms on 18.16 (bench/README.md, "What moved the
  // ingest figures"), same set, same index.
  const rows = await store.query<Record<string, string>>(
    `SELECT ${key.join(', ')} FROM ${lookup} ` +
      `WHERE ${where}${where === '' ? '' : ' AND '}${ranged ? `ts_ms >= ${lo} AND ts_ms <= ${hi} AND ` : ''}${last} IN (SELECT arrayJoin([${ids.join(',')}]))`,
  )
  for (const f of rows) found.push(keyText(key.map((k) => f[k])))
  return i
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

/** The aggregates fed by usage_events, each with its bucket of ts_ms. */
const AGGREGATES = [
  { table: 'usage_hourly', bucket: 'hour', of: "toStartOfHour(toDateTime(intDiv(ts_ms, 1000), 'UTC'))" },
  { table: 'usage_daily', bucket: 'day', of: "toDate(toDateTime(intDiv(ts_ms, 1000), 'UTC'))" },
] as const

const EVENT_MONTH = "toYYYYMM(toDateTime(intDiv(ts_ms, 1000), 'UTC'))"

export interface RebuildOptions {
  /** First day (YYYY-MM-DD, UTC) whose month is rebuilt; default: the oldest month of usage_events. */
  fromDay?: string
  /** Last day whose month is rebuilt; default: the newest month of usage_events. */
  toDay?: string
  /**
   * usage_events' TTL in days, if any (METERING_CLICKHOUSE_TTL_DAYS_USAGE_EVENTS): a month that
   * begins before now − TTL is refused, since its raw events may be gone while its aggregates
   * still count them.
   */
  eventsTtlDays?: number
  nowMs?: number
}

export interface RebuildResult {
  /** Per month (YYYYMM): the aggregate rows written (0: the month has no events; its buckets are removed). */
  months: { month: number; hourlyRows: number; dailyRows: number }[]
}

/** YYYYMM of a YYYY-MM-DD day; throws on anything else. */
function monthOfDay(day: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day)
  if (m === null || Number.isNaN(Date.parse(`${day}T00:00:00Z`))) throw new Error(`not a day (YYYY-MM-DD): ${JSON.stringify(day)}`)
  return Number(m[1]) * 100 + Number(m[2])
}

/** The months from `from` to `to` (YYYYMM), both included. */
function monthsBetween(from: number, to: number): number[] {
  const months: number[] = []
  for (let m = from; m <= to; m = m % 100 === 12 ? m + 89 : m + 1) months.push(m)
  return months
}

/**
 * Recomputes usage_hourly and usage_daily from `usage_events FINAL` for whole months: each month
 * is built into a scratch copy of the aggregate, then swapped in with ALTER TABLE … REPLACE
 * PARTITION (one atomic step; a month without events is dropped instead). It replaces what was
 * there, so running it twice gives what running it once gives, and readers never see a month
 * half built. Repairs aggregates that missed inserts (a view dropped and made again by a
 * migration) or counted some twice (a bare insert of a duplicate). An insert into usage_events
 * while a month is rebuilt can be missed by it (after the SELECT, before the REPLACE): rebuild the
 * current month when writers are stopped, or run it again. One rebuild at a time.
 */
export async function rebuildAggregates(store: ClickHouseStore, options: RebuildOptions = {}): Promise<RebuildResult> {
  const db = sqlIdent(store.database)
  const [span] = await store.query<{ lo: number; hi: number; n: string }>(
    `SELECT min(${EVENT_MONTH}) AS lo, max(${EVENT_MONTH}) AS hi, count() AS n FROM ${db}.usage_events`,
  )
  const hasEvents = Number(span?.n ?? 0) > 0
  const from = options.fromDay === undefined ? (hasEvents ? Number(span?.lo) : undefined) : monthOfDay(options.fromDay)
  const to = options.toDay === undefined ? (hasEvents ? Number(span?.hi) : undefined) : monthOfDay(options.toDay)
  if (from === undefined || to === undefined) return { months: [] }
  if (from > to) throw new Error(`the range ends before it starts (${options.fromDay} > ${options.toDay})`)
  const months = monthsBetween(from, to)
  if (options.eventsTtlDays !== undefined && options.eventsTtlDays > 0) {
    const horizonMs = (options.nowMs ?? Date.now()) - options.eventsTtlDays * 86_400_000
    const first = months[0] as number
    if (Date.UTC(Math.floor(first / 100), (first % 100) - 1, 1) < horizonMs) {
      throw new Error(`month ${first} begins before usage_events' TTL (${options.eventsTtlDays} days): its raw events may be gone, its aggregates are kept`)
    }
  }
  const result: RebuildResult = { months: [] }
  for (const month of months) {
    const [hourlyRows = 0, dailyRows = 0] = await Promise.all(AGGREGATES.map((a) => rebuildMonth(store, db, a, month)))
    result.months.push({ month, hourlyRows, dailyRows })
  }
  return result
}

async function rebuildMonth(store: ClickHouseStore, db: string, a: (typeof AGGREGATES)[number], month: number): Promise<number> {
  const scratch = `${db}.${a.table}_rebuild_${randomBytes(4).toString('hex')}`
  await store.exec(`CREATE TABLE ${scratch} AS ${db}.${a.table}`)
  try {
    // Aliases differ from column names (18.16 substitutes an alias wherever its name appears).
    await store.exec(
      `INSERT INTO ${scratch} (project_id, customer_id, feature_slug, ${a.bucket}, value_sum, event_count, refused_sum, refused_count)
       SELECT project_id, customer_id, feature_slug, ${a.of} AS b,
         sumIf(value, status != 'refused') AS vs, countIf(status != 'refused') AS vc,
         sumIf(value, status = 'refused') AS rs, countIf(status = 'refused') AS rc
       FROM ${db}.usage_events FINAL
       WHERE ${EVENT_MONTH} = ${month}
       GROUP BY project_id, customer_id, feature_slug, b`,
    )
    const [count] = await store.query<{ n: string }>(`SELECT count() AS n FROM ${scratch}`)
    const rows = Number(count?.n ?? 0)
    // 26.x refuses REPLACE PARTITION from an empty source (it would silently drop the month).
    await store.exec(
      rows > 0 ? `ALTER TABLE ${db}.${a.table} REPLACE PARTITION ${month} FROM ${scratch}` : `ALTER TABLE ${db}.${a.table} DROP PARTITION ${month}`,
    )
    return rows
  } finally {
    await store.exec(`DROP TABLE IF EXISTS ${scratch}`)
  }
}
