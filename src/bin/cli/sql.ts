// sql: one read-only query on the usage history, for the data team, whichever store the service
// runs on: the ClickHouse server of CLICKHOUSE_URL; the running gateway's embedded chDB through
// POST /v1/admin/sql (only the gateway may open it while it runs); or chDB opened here when no
// gateway runs. Read-only twice over (src/http/routes/admin/readOnlySql.ts): refused here before
// anything is sent, and run with readonly = 1.

import {
  DEFAULT_MAX_ROWS,
  DEFAULT_TIMEOUT_SECONDS,
  READ_ONLY_STATEMENTS,
  readOnlyProblem,
  runReadOnly,
  type ReadOnlyAnswer,
} from '../../http/routes/admin/readOnlySql.js'
import { intOption, stringOption, UsageError, type Command, type Input } from './command.js'
import type { Context } from './context.js'
import { jsonLines, table } from './output.js'

async function sql(ctx: Context, input: Input): Promise<number> {
  const query = input.args[0]!
  const format = stringOption(input, 'format') ?? (ctx.io.isTty ? 'table' : 'json')
  if (format !== 'json' && format !== 'table') throw new UsageError(`--format is json or table; got ${JSON.stringify(format)}`)
  const maxRows = intOption(input, 'max-rows', 1, 100_000) ?? DEFAULT_MAX_ROWS
  const timeoutSeconds = intOption(input, 'timeout', 1, 600) ?? DEFAULT_TIMEOUT_SECONDS
  // Refused before any store is reached.
  const problem = readOnlyProblem(query)
  if (problem) return ctx.fail(`Refused (not_read_only): ${problem}`)
  const history = await ctx.history({ migrate: false, timeoutMs: (timeoutSeconds + 5) * 1000 })
  let answer: ReadOnlyAnswer
  if (history.via === 'gateway') {
    answer = await history.gateway.post<ReadOnlyAnswer>('/v1/admin/sql', { query, maxRows, timeoutSeconds }, (timeoutSeconds + 10) * 1000)
  } else {
    const result = await runReadOnly(history.store, query, { maxRows, timeoutSeconds })
    if (!result.ok) return ctx.fail(`${result.reason}: ${result.message}`)
    answer = result.value
  }
  const text = format === 'table' ? table(answer.rows) : jsonLines(answer.rows)
  if (text) ctx.io.out(text)
  if (answer.truncated) ctx.io.err(`(truncated: the first ${maxRows} rows; --max-rows raises it, LIMIT narrows the query)`)
  return 0
}

export const sqlCommands: readonly Command[] = [
  {
    noun: 'sql',
    summary: 'one read-only query on the usage history (ClickHouse server or chDB)',
    details: [
      `Only ${READ_ONLY_STATEMENTS.join(', ')}; no \`;\` before the end, no INTO OUTFILE, FORMAT or SETTINGS. Refused before`,
      'it is sent otherwise (exit 1), and run with readonly = 1. Where: CLICKHOUSE_URL; else the gateway running on',
      'METERING_DATA_DIR (POST /v1/admin/sql, with METERING_ROOT_KEY); else chDB under METERING_DATA_DIR.',
      'Tables and example queries: src/infra/clickhouse/README.md.',
    ],
    args: [{ name: 'QUERY', help: 'the statement, quoted as one argument' }],
    options: {
      format: { type: 'string', value: 'json|table', help: 'JSON lines, or an aligned table (default: table on a terminal, else json)' },
      'max-rows': { type: 'string', value: 'N', help: `rows printed, at most (default ${DEFAULT_MAX_ROWS})` },
      timeout: { type: 'string', value: 'SECONDS', help: `max_execution_time of the query (default ${DEFAULT_TIMEOUT_SECONDS})` },
    },
    run: sql,
  },
]
