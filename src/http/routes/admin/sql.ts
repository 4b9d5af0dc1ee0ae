import { Type } from '@sinclair/typebox'
import { failure } from '../../../kernel/errors.js'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'
import { DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_SECONDS, READ_ONLY_STATEMENTS, runReadOnly } from './readOnlySql.js'

export const adminSql = defineRoute({
  method: 'POST',
  path: '/v1/admin/sql',
  operationId: 'admin.sql',
  summary: 'Run a read-only SQL query on the usage history (root key only)',
  description:
    'For operators and the data team: one statement (' +
    READ_ONLY_STATEMENTS.join(', ') +
    ') on the ClickHouse store the gateway writes to: the server of CLICKHOUSE_URL, or the embedded chDB, which only the gateway ' +
    'may open while it runs (one process per data directory; `npm run cli -- sql` comes here then). Refused before it is sent ' +
    '(400 not_read_only) when it is anything else, holds `;` before its end, or has INTO OUTFILE, FORMAT or SETTINGS; then run with ' +
    'readonly = 1 (ClickHouse refuses writes, DDL and table functions itself) and max_execution_time. A query ClickHouse rejects is ' +
    '400 query_failed with its message; 412 no_history_store when the gateway runs without ClickHouse. Tables and example queries: ' +
    'src/infra/clickhouse/README.md. Our addition to the spec.',
  tags: ['admin'],
  access: { kind: 'root' },
  errors: [412],
  body: strictObject({
    query: Type.String({ minLength: 1, maxLength: 100_000, description: 'One read-only statement; a trailing `;` is allowed.' }),
    maxRows: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: `Rows answered, at most (default ${DEFAULT_MAX_ROWS}).` })),
    timeoutSeconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 600,
        description: `max_execution_time (default ${DEFAULT_TIMEOUT_SECONDS}); a server store also stops waiting after METERING_CLICKHOUSE_TIMEOUT_MS.`,
      }),
    ),
  }),
  response: Type.Object(
    {
      store: Type.Union([Type.Literal('server'), Type.Literal('embedded')], { description: 'server: CLICKHOUSE_URL; embedded: chDB.' }),
      database: Type.String(),
      rows: Type.Array(Type.Record(Type.String(), Type.Unknown()), {
        description: 'As ClickHouse renders JSONEachRow: 64-bit integers are strings; select decimals with toString().',
      }),
      truncated: Type.Boolean({ description: 'More rows came back than maxRows; the first maxRows are here.' }),
    },
    { additionalProperties: false },
  ),
  handler: ({ body, services }) => {
    if (!services.history) return failure('precondition_failed', 'no_history_store', 'This gateway runs without a ClickHouse store.')
    return runReadOnly(services.history, body.query, { maxRows: body.maxRows, timeoutSeconds: body.timeoutSeconds })
  },
})
