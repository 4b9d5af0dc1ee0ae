import { Type } from '@sinclair/typebox'
import { customerUsageSeries, MAX_BUCKETS, seriesWindow } from '../../../analytics/series.js'
import { checkProject } from '../../../catalog/service.js'
import { invalid, success } from '../../../kernel/errors.js'
import { EpochMs, strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'

const DecimalText = Type.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description: 'Decimal amount, exact (never a float).' })

export const SeriesIntervalSchema = Type.Union([Type.Literal('hour'), Type.Literal('day')], {
  description: `UTC hours (at most ${MAX_BUCKETS.hour} in a window) or UTC days (at most ${MAX_BUCKETS.day}).`,
})

export const usageSeries = defineRoute({
  method: 'POST',
  path: '/v1/analytics/usage/series',
  operationId: 'analytics.usage.series',
  summary: "A customer's usage per feature over time",
  description:
    "The customer's accepted usage (what is billed) and refused usage per feature in each UTC hour or day of the window, from the " +
    'ClickHouse aggregates. The window is widened to whole buckets (from_ms down, to_ms up) and answered as used; every bucket has a ' +
    'point, 0 when empty; features without usage in the window have no series. 400 when the window is empty or has too many buckets; ' +
    "a project_id other than the key's is 403. Our addition to the spec (the console's charts).",
  tags: ['analytics'],
  access: { kind: 'project', scope: 'analytics:read' },
  body: strictObject({
    customer_id: Type.String({ minLength: 1, maxLength: 36, description: 'The customer whose usage is returned.' }),
    project_id: Type.Optional(Type.String({ minLength: 1, maxLength: 36, description: "The customer's project; by default the key's." })),
    from_ms: EpochMs,
    to_ms: EpochMs,
    interval: SeriesIntervalSchema,
  }),
  response: Type.Object({
    project_id: Type.String(),
    customer_id: Type.String(),
    interval: SeriesIntervalSchema,
    from_ms: Type.Integer({ description: 'Start of the first bucket, epoch ms.' }),
    to_ms: Type.Integer({ description: 'End (exclusive) of the last bucket, epoch ms.' }),
    features: Type.Array(
      Type.Object({
        feature_slug: Type.String(),
        points: Type.Array(Type.Object({ at: Type.Integer({ description: "The bucket's start, epoch ms." }), usage: DecimalText, refused: DecimalText })),
      }),
      { description: 'One series per feature with usage in the window, by feature slug.' },
    ),
  }),
  handler: async ({ body, projectId, services }) => {
    const refused = checkProject(body.project_id, projectId)
    if (refused) return refused
    const window = seriesWindow(body.from_ms, body.to_ms, body.interval)
    if (!window) return invalid([{ path: '$.to_ms', message: `must be after from_ms, at most ${MAX_BUCKETS[body.interval]} ${body.interval}s later` }])
    const features = services.history ? await customerUsageSeries(services.history, { projectId, customerId: body.customer_id, ...window }) : []
    return success({ project_id: projectId, customer_id: body.customer_id, interval: window.interval, from_ms: window.fromMs, to_ms: window.toMs, features })
  },
})
