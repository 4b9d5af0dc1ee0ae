import { PREFIX, projectTag, splitKey } from '../infra/redis/keys.js'

/**
 * The journal outbox's Redis keys. A list per hash tag, `mg:<tag>:journal`, written by the Lua
 * scripts that make movements under that tag (so the append is atomic with the movement), and
 * beside it, in the same slot, the claim a drainer holds while it works on the list.
 */

/** The outbox list of a hash tag (`{p/k}` for a budget, `{cat:<projectId>}` for a project). */
export function journalKey(tag: string): string {
  return `${PREFIX}${tag}:journal`
}

/** The outbox list of a project's own tag `{cat:<projectId>}` (wallets, runs, invoices). */
export function projectJournalKey(projectId: string): string {
  return journalKey(projectTag(projectId))
}

/** What the drain scans for (every master of a Cluster). */
export const JOURNAL_PATTERN = `${PREFIX}{*}:journal`

/** The outbox lists of one project only: its budgets and its project tag (tests drain with it). */
export function projectJournalPatterns(projectId: string): string[] {
  const glob = projectId.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
  return [`${PREFIX}{${glob}/*}:journal`, `${PREFIX}${projectTag(glob)}:journal`]
}

/** The claim of one list: a short-lived SET NX PX key in the list's slot. */
export function claimKey(listKey: string): string {
  return `${listKey}:claim`
}

/** Whether a scanned key is an outbox list (not a claim, not something else that matched). */
export function isJournalKey(key: string): boolean {
  return splitKey(key)?.suffix === 'journal'
}

/**
 * Entries that can never be inserted (unknown table, unreadable row, a row without project_id
 * or its id), with where they came from and why: a list of JSON objects, inspected with
 * `LRANGE mg:journal:dead 0 -1` and replayed by pushing `entry` back to `list` once fixed.
 */
export const DEAD_LETTER_KEY = `${PREFIX}journal:dead`
