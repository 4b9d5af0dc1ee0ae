// The operators' read-only SQL over the usage history: POST /v1/admin/sql (./sql.ts) and
// `npm run cli -- sql` (src/bin/cli/sql.ts) both run a query through here. Two locks, so that
// neither alone has to be perfect:
// 1. Before anything is sent, the text must be one statement of a reading kind (SELECT, WITH,
//    SHOW, DESCRIBE, EXPLAIN), without the clauses that write or change how it runs (INTO
//    OUTFILE, FORMAT, SETTINGS). chDB runs every statement of a multi-statement text, so `;`
//    inside is refused too.
// 2. The engine runs it with readonly = 1 and a max_execution_time (QueryOptions in
//    src/infra/clickhouse/store.ts): writes, DDL, setting changes and table functions are
//    refused by ClickHouse itself, and a runaway query stops.

import { isUnavailable } from '../../../infra/availability.js'
import type { ClickHouseStore } from '../../../infra/clickhouse/store.js'
import { failure, success, type Result } from '../../../kernel/errors.js'

/** The statements a read-only query may start with. */
export const READ_ONLY_STATEMENTS = ['SELECT', 'WITH', 'SHOW', 'DESCRIBE', 'DESC', 'EXPLAIN'] as const

export const DEFAULT_MAX_ROWS = 10_000
export const DEFAULT_TIMEOUT_SECONDS = 60

export interface ReadOnlyAnswer {
  /** Which store answered: the ClickHouse server of CLICKHOUSE_URL, or chDB. */
  store: 'server' | 'embedded'
  database: string
  /** As ClickHouse renders them in JSONEachRow (64-bit integers as strings). */
  rows: Record<string, unknown>[]
  /** More rows than maxRows came back; the first maxRows are here. */
  truncated: boolean
}

/**
 * The query with its comments removed and each quoted part (string literal, quoted identifier)
 * replaced by `Q`, or undefined when a quote or comment does not end. Clauses are looked for in
 * this text only, so that `';'` or `'FORMAT x'` inside a literal is not mistaken for one.
 * Where ClickHouse's lexer reads more as a comment than this does (nested block comments, `#`),
 * this reads more as code: the checks then see more, never less.
 */
export function codeOf(sql: string): string | undefined {
  let out = ''
  let i = 0
  while (i < sql.length) {
    const c = sql[i]!
    const two = sql.slice(i, i + 2)
    if (two === '--') {
      const end = sql.indexOf('\n', i)
      i = end < 0 ? sql.length : end
      out += ' '
    } else if (two === '/*') {
      const end = sql.indexOf('*/', i + 2)
      if (end < 0) return undefined
      i = end + 2
      out += ' '
    } else if (c === "'" || c === '"' || c === '`') {
      const end = closingQuote(sql, i)
      if (end < 0) return undefined
      i = end + 1
      out += ' Q '
    } else {
      out += c
      i++
    }
  }
  return out
}

/** The index of the quote that closes the one at `start` (a backslash escapes, a doubled quote is one), or -1. */
function closingQuote(sql: string, start: number): number {
  const quote = sql[start]
  for (let j = start + 1; j < sql.length; j++) {
    if (sql[j] === '\\') j++
    else if (sql[j] === quote) {
      if (sql[j + 1] !== quote) return j
      j++
    }
  }
  return -1
}

/** Why `sql` is not one read-only statement this service runs, or undefined when it is one. */
export function readOnlyProblem(sql: string): string | undefined {
  const code = codeOf(sql)
  if (code === undefined) return 'The query has a quote or a comment that does not end.'
  const statement = code.trim().replace(/;\s*$/, '').trim()
  if (statement === '') return 'The query is empty.'
  if (statement.includes(';')) return 'One statement at a time: the query has a `;` before its end.'
  const first = /^[(\s]*([A-Za-z]+)/.exec(statement)?.[1]?.toUpperCase()
  if (first === undefined || !(READ_ONLY_STATEMENTS as readonly string[]).includes(first)) {
    return `Only read-only statements run here (${READ_ONLY_STATEMENTS.join(', ')}); this one starts with ${first ?? JSON.stringify(statement.slice(0, 10))}.`
  }
  if (/\bINTO\s+OUTFILE\b/i.test(statement)) return 'INTO OUTFILE writes a file: not allowed.'
  if (/\bFORMAT\s+[A-Za-z_]/i.test(statement)) return 'A FORMAT clause is not allowed: rows come back as JSON (the CLI prints them with --format json|table).'
  if (/(?<![.\w])SETTINGS\s+\w+\s*=/i.test(statement)) return 'A SETTINGS clause is not allowed: the query runs with readonly = 1 and a time limit.'
  if (/^(DESC|DESCRIBE)\s+(TABLE\s+)?\w+\s*\(/i.test(statement)) return 'DESCRIBE of a table function is not allowed (it reads files or URLs).'
  return undefined
}

/**
 * Runs one read-only query (readOnlyProblem first, then the engine with readonly = 1 and
 * max_execution_time). A refused or failing query is a 400 (`not_read_only`, `query_failed`,
 * with ClickHouse's message); a store that cannot be reached throws, as every store call does
 * (503 on the HTTP path).
 */
export async function runReadOnly(
  store: ClickHouseStore,
  sql: string,
  options: { maxRows?: number; timeoutSeconds?: number } = {},
): Promise<Result<ReadOnlyAnswer>> {
  const problem = readOnlyProblem(sql)
  if (problem) return failure('invalid', 'not_read_only', problem)
  const maxRows = options.maxRows ?? DEFAULT_MAX_ROWS
  let rows: Record<string, unknown>[]
  try {
    rows = await store.query(sql, { readonly: true, maxExecutionSeconds: options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS })
  } catch (err) {
    if (isUnavailable(err)) throw err
    const message = err instanceof Error ? err.message : String(err)
    // Code 164 READONLY: what the engine itself refused.
    const reason = /readonly mode|\(READONLY\)|Code: 164\b/i.test(message) ? 'not_read_only' : 'query_failed'
    return failure('invalid', reason, message)
  }
  return success({ store: store.kind, database: store.database, rows: rows.slice(0, maxRows), truncated: rows.length > maxRows })
}
