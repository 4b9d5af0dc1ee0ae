// The journal outbox's drain: every `mg:<tag>:journal` list into ClickHouse, each entry once.
// See README.md for the contract and why it is exactly once.

import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import { insertOnceById } from '../infra/clickhouse/tables.js'
import { isSqlIdent } from '../infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { scanMasters } from '../infra/redis/scan.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { DEAD_LETTER_KEY, JOURNAL_PATTERN, claimKey, isJournalKey } from './keys.js'
import { journalTables } from './tables.js'

const trimScript = new Script('trimJournal-2')

export interface DrainOptions {
  redis: RedisClient
  store: ClickHouseStore
  logger?: Logger
  /** Entries taken from one list per round (LRANGE 0 n-1); default 1000. */
  maxPerList?: number
  /** Lists claimed and read together, whose rows go into one INSERT per table; default 500. */
  listsPerBatch?: number
  /** Glob(s) of the lists to drain; default every outbox list (`mg:{*}:journal`). */
  match?: string | string[]
  /**
   * How long a claim lasts (SET NX PX): a drainer that dies holding one blocks its list this
   * long. Keep it well above one round's inserts (a second drainer must never start on a list
   * whose first drainer is still inserting); default 60 s.
   */
  claimMs?: number
  /** The registry (default src/journal/tables.ts). */
  tables?: Record<string, { idColumn: string }>
  /** inserted_at (epoch ms); default now. */
  nowMs?: () => number
}

export interface DrainResult {
  /** Lists found by the scan. */
  lists: number
  /** Lists skipped because another drainer holds their claim. */
  busy: number
  /** Entries read. */
  entries: number
  /** Rows inserted, and rows skipped as already stored (or repeated in the round). */
  inserted: number
  skipped: number
  /** Entries moved to the dead-letter list. */
  deadLettered: number
  /** Entries left in their list because their table's insert failed (retried next round). */
  failed: number
  /** Some list had more than maxPerList entries: run again without waiting. */
  more: boolean
}

/** One entry as read from a list: a row for a registered table, or a reason to dead-letter it. */
type Parsed = { table: string; row: Record<string, unknown> } | { dead: string }

/** Reads `<table>\t<json row>` and checks it against the registry. */
export function parseEntry(entry: string, tables: Record<string, { idColumn: string }>): Parsed {
  const tab = entry.indexOf('\t')
  if (tab <= 0) return { dead: 'not <table>\\t<json row>' }
  const table = entry.slice(0, tab)
  const spec = Object.hasOwn(tables, table) ? tables[table] : undefined
  if (spec === undefined) return { dead: `unknown table ${JSON.stringify(table)} (not in src/journal/tables.ts)` }
  let row: unknown
  try {
    row = JSON.parse(entry.slice(tab + 1))
  } catch {
    return { dead: 'row is not JSON' }
  }
  if (row === null || typeof row !== 'object' || Array.isArray(row)) return { dead: 'row is not a JSON object' }
  const r = row as Record<string, unknown>
  for (const column of ['project_id', spec.idColumn]) {
    if (typeof r[column] !== 'string' || r[column] === '') return { dead: `row has no ${column}` }
  }
  for (const column of Object.keys(r)) {
    if (!isSqlIdent(column)) return { dead: `bad column name ${JSON.stringify(column)}` }
  }
  return { table, row: r }
}

/**
 * Inserts rows of registered tables, each once: grouped by table and by column set (an INSERT
 * names the columns of its first row), through insertOnceById, which skips the ids already
 * stored. Returns the tables whose insert failed (their rows are not stored, or stored whole).
 * This is the drain's insert step; the tests call it alone to play a drainer that died before
 * trimming.
 */
export async function insertJournalRows(
  store: ClickHouseStore,
  rows: ReadonlyArray<{ table: string; row: Record<string, unknown> }>,
  options: { tables?: Record<string, { idColumn: string }>; nowMs?: number; logger?: Logger } = {},
): Promise<{ inserted: number; skipped: number; failedTables: Set<string> }> {
  const tables = options.tables ?? journalTables
  const groups = new Map<string, { table: string; rows: Record<string, unknown>[] }>()
  for (const { table, row } of rows) {
    const signature = `${table}\t${Object.keys(row).sort().join(',')}`
    const group = groups.get(signature)
    if (group === undefined) groups.set(signature, { table, rows: [row] })
    else group.rows.push(row)
  }
  let inserted = 0
  let skipped = 0
  const failedTables = new Set<string>()
  for (const { table, rows: group } of groups.values()) {
    if (failedTables.has(table)) continue
    try {
      const result = await insertOnceById(store, table, tables[table]!.idColumn, group, options.nowMs === undefined ? {} : { nowMs: options.nowMs })
      inserted += result.inserted
      skipped += result.skipped
    } catch (err) {
      failedTables.add(table)
      options.logger?.error({ err, table, rows: group.length }, 'journal insert failed; its entries stay in their lists and are retried')
    }
  }
  return { inserted, skipped, failedTables }
}

/**
 * One round of the drain: finds the outbox lists, and for each batch of lists claims each
 * (SET <list>:claim <token> NX PX claimMs; a list another drainer holds is skipped), reads up
 * to maxPerList entries (LRANGE), dead-letters the entries that can never be inserted, inserts
 * the rest (insertJournalRows), and only then trims exactly the entries it stored and releases
 * the claim (lua/trimJournal-2.lua, a no-op if the claim was lost meanwhile). An entry whose
 * table's insert failed stays, with every entry after it in its list, for the next round.
 */
export async function drainJournal(options: DrainOptions): Promise<DrainResult> {
  const { redis, store, logger } = options
  const tables = options.tables ?? journalTables
  const maxPerList = Math.max(1, options.maxPerList ?? 1000)
  const listsPerBatch = Math.max(1, options.listsPerBatch ?? 500)
  const claimMs = Math.max(1000, options.claimMs ?? 60_000)
  const patterns = options.match === undefined ? [JOURNAL_PATTERN] : ([] as string[]).concat(options.match)
  const lists = (await scanMasters(redis, patterns)).filter(isJournalKey)
  const result: DrainResult = { lists: lists.length, busy: 0, entries: 0, inserted: 0, skipped: 0, deadLettered: 0, failed: 0, more: false }

  for (let at = 0; at < lists.length; at += listsPerBatch) {
    const batch = lists.slice(at, at + listsPerBatch)
    const token = randomBytes(12).toString('hex')
    // Claims and reads go out together; ioredis pipelines them over each node's connection.
    const claimed = await Promise.all(
      batch.map(async (list) => {
        const ok = await redis.set(claimKey(list), token, 'PX', claimMs, 'NX')
        if (ok !== 'OK') return undefined
        return { list, entries: await redis.lrange(list, 0, maxPerList - 1) }
      }),
    )
    const held = claimed.filter((c): c is { list: string; entries: string[] } => c !== undefined)
    result.busy += batch.length - held.length

    const now = options.nowMs?.() ?? Date.now()
    const parsed = held.map(({ list, entries }) => ({ list, entries, parsed: entries.map((e) => parseEntry(e, tables)) }))
    const dead: string[] = []
    const rows: { table: string; row: Record<string, unknown> }[] = []
    for (const l of parsed) {
      result.entries += l.entries.length
      if (l.entries.length >= maxPerList) result.more = true
      l.parsed.forEach((p, i) => {
        if ('dead' in p) dead.push(JSON.stringify({ list: l.list, entry: l.entries[i], reason: p.dead, atMs: now }))
        else rows.push(p)
      })
    }
    // Dead letters first: an entry trimmed away is always somewhere inspectable (a crash
    // between the two may dead-letter it twice, never lose it).
    if (dead.length > 0) {
      await redis.rpush(DEAD_LETTER_KEY, ...dead)
      result.deadLettered += dead.length
      logger?.error({ entries: dead.length, key: DEAD_LETTER_KEY }, 'journal entries that cannot be inserted were dead-lettered')
    }
    const stored = await insertJournalRows(store, rows, { tables, nowMs: now, ...(logger ? { logger } : {}) })
    result.inserted += stored.inserted
    result.skipped += stored.skipped

    await Promise.all(
      parsed.map(async (l) => {
        // The entries up to the first one whose table failed; dead-lettered ones count as done.
        let n = l.parsed.findIndex((p) => 'table' in p && stored.failedTables.has(p.table))
        if (n < 0) n = l.entries.length
        result.failed += l.entries.length - n
        const held = (await trimScript.run(redis, [l.list, claimKey(l.list)], [token, n])) as unknown
        if (held !== 1)
          logger?.warn({ list: l.list }, 'journal claim expired before the trim: the next round reads these entries again (and skips what is stored)')
      }),
    )
  }
  return result
}
