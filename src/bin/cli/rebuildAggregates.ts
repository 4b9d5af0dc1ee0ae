// rebuild-aggregates: usage_hourly and usage_daily recomputed from usage_events for whole months
// (src/infra/clickhouse/tables.ts, rebuildAggregates): idempotent, so running it twice is running
// it once. It writes, so it needs the store itself: CLICKHOUSE_URL, or chDB when no gateway holds it.

import { rebuildAggregates } from '../../infra/clickhouse/tables.js'
import { stringOption, type Command, type Input } from './command.js'
import type { Context } from './context.js'

async function rebuild(ctx: Context, input: Input): Promise<number> {
  const fromDay = stringOption(input, 'from')
  const toDay = stringOption(input, 'to')
  const history = await ctx.history({ migrate: true })
  if (history.via === 'gateway') {
    return ctx.fail(
      `A gateway runs on ${ctx.config.dataDir} and holds its chDB (one process per data directory): stop it and run ` +
        'rebuild-aggregates again (a gateway started later sees the rebuilt tables), or use CLICKHOUSE_URL.',
    )
  }
  try {
    const result = await rebuildAggregates(history.store, {
      ...(fromDay === undefined ? {} : { fromDay }),
      ...(toDay === undefined ? {} : { toDay }),
      ...(ctx.config.clickhouseTtlDays.usage_events === undefined ? {} : { eventsTtlDays: ctx.config.clickhouseTtlDays.usage_events }),
    })
    ctx.print(result)
    return 0
  } catch (err) {
    return ctx.fail(err instanceof Error ? err.message : String(err))
  }
}

export const rebuildAggregatesCommands: readonly Command[] = [
  {
    noun: 'rebuild-aggregates',
    summary: 'recompute usage_hourly and usage_daily from usage_events, whole months (idempotent)',
    details: [
      'Each month from --from to --to (default: every month usage_events holds) is built apart, then swapped in',
      'with ALTER TABLE … REPLACE PARTITION; a month without events loses its buckets. Running it twice gives what',
      'running it once gives. An event written into a month while it is rebuilt can be missed: rebuild the current',
      'month with the writers stopped, or run it again. Months older than METERING_CLICKHOUSE_TTL_DAYS_USAGE_EVENTS',
      'are refused. src/infra/clickhouse/README.md, "Rebuilding the aggregates".',
    ],
    options: {
      from: { type: 'string', value: 'YYYY-MM-DD', help: 'a day of the first month to rebuild (UTC)' },
      to: { type: 'string', value: 'YYYY-MM-DD', help: 'a day of the last month to rebuild (UTC)' },
    },
    run: rebuild,
  },
]
