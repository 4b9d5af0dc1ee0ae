// invoices list / show / close (src/invoices/README.md). Invoices live in Redis, so list and show
// read them there. Closing a cycle reads its usage from ClickHouse: through the running gateway
// (POST /v1/admin/invoices/close) when it holds the embedded chDB, else with the history opened
// here (CLICKHOUSE_URL, or chDB when no gateway runs).

import { Value } from '@sinclair/typebox/value'
import { InvoiceListRequestSchema } from '../../invoices/schemas.js'
import type { InvoiceListQuery } from '../../invoices/types.js'
import { projectKey } from '../../keys/keys.js'
import { intOption, stringOption, UsageError, type Command, type Input } from './command.js'
import type { Context } from './context.js'

const project = { type: 'string', value: 'ID', help: 'the project', required: true } as const

async function requireProject(ctx: Context, projectId: string): Promise<boolean> {
  return (await (await ctx.redis()).exists(projectKey(projectId))) === 1
}

/** The listing's filters as POST /v1/invoices/list takes them, checked against its schema. */
function listQuery(input: Input): InvoiceListQuery {
  const body = {
    ...(stringOption(input, 'customer') === undefined ? {} : { customerId: stringOption(input, 'customer') }),
    ...(stringOption(input, 'status') === undefined ? {} : { status: stringOption(input, 'status') }),
    ...(stringOption(input, 'from') === undefined ? {} : { statementFrom: intOption(input, 'from', 0, Number.MAX_SAFE_INTEGER) }),
    ...(stringOption(input, 'to') === undefined ? {} : { statementTo: intOption(input, 'to', 1, Number.MAX_SAFE_INTEGER) }),
    ...(stringOption(input, 'cursor') === undefined ? {} : { cursor: stringOption(input, 'cursor') }),
    limit: intOption(input, 'limit', 1, 100) ?? 20,
  }
  const problem = [...Value.Errors(InvoiceListRequestSchema, body)][0]
  if (problem) throw new UsageError(`Invalid filter ${problem.path.replace(/^\//, '') || ''}: ${problem.message}`)
  return body as InvoiceListQuery
}

async function close(ctx: Context, input: Input): Promise<number> {
  const projectId = stringOption(input, 'project')!
  const customerId = stringOption(input, 'customer')
  if (!(await requireProject(ctx, projectId))) return ctx.fail(`Project ${projectId} does not exist.`)
  const history = await ctx.history({ migrate: true })
  if (history.via === 'gateway') {
    const answer = await history.gateway.post<{ errors: unknown[] }>('/v1/admin/invoices/close', { projectId, ...(customerId ? { customerId } : {}) }, 120_000)
    ctx.print(answer)
    return answer.errors.length > 0 ? 1 : 0
  }
  const { invoices } = (await ctx.container(history.store)).services
  const report = await invoices.closeDueCycles(projectId, undefined, customerId)
  const { created, finalized, existing, errors } = report
  ctx.print({ created, finalized, existing, errors: errors.map(({ subscriptionId, message }) => ({ subscriptionId, message })) })
  return errors.length > 0 ? 1 : 0
}

export const invoiceCommands: readonly Command[] = [
  {
    noun: 'invoices',
    verb: 'list',
    summary: "a project's invoices, newest first, a page at a time",
    options: {
      project,
      customer: { type: 'string', value: 'ID', help: "only this customer's" },
      status: { type: 'string', value: 'STATUS', help: 'only these: unpaid, paid, waiting, void, draft, failed' },
      from: { type: 'string', value: 'MS', help: 'only cycles starting at or after this, epoch ms' },
      to: { type: 'string', value: 'MS', help: 'only cycles starting before this, epoch ms' },
      limit: { type: 'string', value: 'N', help: 'per page, 1 to 100 (default 20)' },
      cursor: { type: 'string', value: 'CURSOR', help: "the previous page's nextCursor" },
    },
    async run(ctx, input) {
      const projectId = stringOption(input, 'project')!
      const query = listQuery(input)
      if (!(await requireProject(ctx, projectId))) return ctx.fail(`Project ${projectId} does not exist.`)
      const result = await (await ctx.container()).services.invoices.list(projectId, query)
      if (!result.ok) return ctx.fail(result.message)
      ctx.print(result.value)
      return 0
    },
  },
  {
    noun: 'invoices',
    verb: 'show',
    summary: 'an invoice with its lines',
    args: [{ name: 'INVOICE_ID', help: 'the invoice (inv_…)' }],
    options: { project },
    async run(ctx, input) {
      const result = await (await ctx.container()).services.invoices.get(stringOption(input, 'project')!, input.args[0]!)
      if (!result.ok) return ctx.fail(result.message)
      ctx.print(result.value)
      return 0
    },
  },
  {
    noun: 'invoices',
    verb: 'close',
    summary: "close a project's ended billing cycles into invoices now (idempotent)",
    details: [
      'Reads usage from ClickHouse: CLICKHOUSE_URL; else the gateway running on METERING_DATA_DIR (POST /v1/admin/invoices/close,',
      'with METERING_ROOT_KEY); else chDB under METERING_DATA_DIR. Exit 1 when a subscription could not be closed (in "errors").',
    ],
    options: { project, customer: { type: 'string', value: 'ID', help: "only this customer's subscriptions" } },
    run: close,
  },
]
