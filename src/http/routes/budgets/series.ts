import { Type } from '@sinclair/typebox'
import { bucketStarts, budgetUsageSeries, MAX_BUCKETS, seriesWindow } from '../../../analytics/series.js'
import { BudgetKey } from '../../../budgets/schemas.js'
import { invalid, success } from '../../../kernel/errors.js'
import { EpochMs, strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'
import { SeriesIntervalSchema } from '../analytics/usageSeries.js'

export const budgetSeries = defineRoute({
  method: 'POST',
  path: '/v1/budgets/series',
  operationId: 'budgets.series',
  summary: 'What a budget consumed over time',
  description:
    "What the budget's movements (settles, expiries, charges, records, lease reports) consumed in each UTC hour or day of the window, " +
    'read from the journal in ClickHouse: movements appear once the journal worker has drained them (METERING_JOURNAL_INTERVAL_MS). ' +
    'The window is widened to whole buckets and answered as used; every bucket has a point. 400 when the window is empty or has too ' +
    "many buckets. Our addition to the spec (the console's charts).",
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:read' },
  body: strictObject({ key: BudgetKey, fromMs: EpochMs, toMs: EpochMs, interval: SeriesIntervalSchema }),
  response: Type.Object({
    key: Type.String(),
    interval: SeriesIntervalSchema,
    fromMs: Type.Integer({ description: 'Start of the first bucket, epoch ms.' }),
    toMs: Type.Integer({ description: 'End (exclusive) of the last bucket, epoch ms.' }),
    points: Type.Array(
      Type.Object({
        at: Type.Integer({ description: "The bucket's start, epoch ms." }),
        consumed: Type.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description: 'Decimal amount, exact.' }),
        movements: Type.Integer({ minimum: 0 }),
      }),
    ),
  }),
  handler: async ({ body, projectId, services }) => {
    const window = seriesWindow(body.fromMs, body.toMs, body.interval)
    if (!window) return invalid([{ path: '$.toMs', message: `must be after fromMs, at most ${MAX_BUCKETS[body.interval]} ${body.interval}s later` }])
    const points = services.history
      ? await budgetUsageSeries(services.history, { projectId, budgetKey: body.key, ...window })
      : bucketStarts(window).map((at) => ({ at, consumed: '0', movements: 0 }))
    return success({ key: body.key, interval: window.interval, fromMs: window.fromMs, toMs: window.toMs, points })
  },
})
