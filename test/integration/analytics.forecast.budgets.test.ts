// POST /v1/analytics/usage/forecast with budgets (src/analytics/README.md "Budgets"): a budget
// keyed `<customer>/<feature>` (or `<customer>` with the feature's slug as its unit) is matched to
// the customer's feature, and the answer says when its tightest limit runs out at the projected
// rate. Real gateway, real Redis, the test clickhouse-server (a throwaway database); the usage
// history is written straight into usage_events (the aggregates follow by their views).
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { DAY_MS } from '../../src/analytics/forecast.js'
import { insertEventsOnce } from '../../src/infra/clickhouse/tables.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

/** 2026-11-22 12:00 UTC: the windows are 2026-11-08 … 2026-11-21. */
const NOW = Date.UTC(2026, 10, 22, 12)
const DAY0 = Date.UTC(2026, 10, 8)

describe("forecast with the customer's budget for the feature", () => {
  const database = `test_${randomBytes(6).toString('hex')}`
  let gw: TestGateway
  let key: string
  let projectId: string

  beforeAll(async () => {
    gw = await startTestGateway({ clickhouse: 'on', clickhouseUrl: inject('clickhouseUrl'), clickhouseDatabase: database, ingestWorker: false }, NOW)
    ;({ apiKey: key, projectId } = await gw.project())
    // 10 tokens a day on each of the 14 window days, for three customers.
    const rows = ['c1', 'c2', 'c3'].flatMap((customer) =>
      Array.from({ length: 14 }, (_, d) => ({
        project_id: projectId,
        event_id: `${customer}-${d}`,
        customer_id: customer,
        event_slug: 'tokens',
        feature_slug: 'tokens',
        value: '10',
        properties: '{}',
        ts_ms: DAY0 + d * DAY_MS + 3_600_000,
      })),
    )
    await insertEventsOnce(gw.clickhouse!, rows)
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
  })

  const upsert = async (body: unknown) => expect((await gw.post('/v1/budgets/upsert', body, key)).status).toBe(200)
  const forecast = async (customer: string) => {
    const res = await gw.post('/v1/analytics/usage/forecast', { customer_id: customer, feature_slug: 'tokens' }, key)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return res.body
  }

  it('names the budget <customer>/<feature> limit that runs out first at the projected rate', async () => {
    await upsert({
      key: 'c1/tokens',
      unit: 'tokens',
      limits: [
        { id: 'lifetime', window: 'never', enforce: 'hard', amount: '300' },
        { id: 'tight', window: 'never', enforce: 'hard', amount: '200' },
        { id: 'warn', window: 'never', enforce: 'soft', amount: '160' },
      ],
    })
    expect((await gw.post('/v1/budgets/record', { key: 'c1/tokens', amount: '150', idempotencyKey: 'r1' }, key)).status).toBe(200)
    const body = await forecast('c1')
    expect(body.projectedUsage).toBe(140)
    expect(body.limit).toBeUndefined() // no entitlement
    // 50 left of `tight` at 10 a day from now: 5 days (the soft limit is not a limit that stops usage).
    expect(body.budget).toMatchObject({
      kind: 'budget',
      budgetKey: 'c1/tokens',
      id: 'tight',
      window: 'never',
      amount: 200,
      used: 150,
      remaining: 50,
      resetsAt: null,
      exhaustsWithinHorizon: true,
    })
    expect(Math.abs(body.budget.exhaustsAt - (NOW + 5 * DAY_MS))).toBeLessThan(1000)
    expect(body.exhaustsAt).toBe(body.budget.exhaustsAt)
    expect(body.answer).toContain('budget c1/tokens limit tight (never) of 200 (50 left) is used up around')
    expect(body.nextActions.join(' ')).toContain('Raise the budget limit or reduce usage before')

    // An open hold counts: held is part of what each limit has taken.
    const hold = await gw.post('/v1/budgets/authorize', { key: 'c1/tokens', amount: '50', idempotencyKey: 'h1', ttlMs: 3_600_000 }, key)
    expect(hold.status).toBe(200)
    const held = await forecast('c1')
    expect(held.budget).toMatchObject({ id: 'tight', used: 200, remaining: 0, exhaustsAt: NOW })
    expect(held.answer).toContain('is already used up')
  })

  it('takes the budget <customer> when its unit is the feature, and a limit that resets first says so', async () => {
    await upsert({ key: 'c2', unit: 'tokens', limits: [{ id: 'daily', window: 'day', enforce: 'hard', amount: '100' }] })
    const body = await forecast('c2')
    // 100 a day against 10 a day: the day ends (resets) long before.
    expect(body.budget).toMatchObject({
      budgetKey: 'c2',
      id: 'daily',
      remaining: 100,
      resetsAt: Date.UTC(2026, 10, 23),
      exhaustsAt: null,
      exhaustsWithinHorizon: false,
    })
    expect(body.exhaustsAt).toBeNull()
    expect(body.answer).toContain('resets at')
  })

  it('ignores a budget <customer> in another unit, and answers as before without a budget', async () => {
    await upsert({ key: 'c3', unit: 'USD', limits: [{ id: 'm', window: 'month', enforce: 'hard', amount: '1' }] })
    const body = await forecast('c3')
    expect(body.budget).toBeUndefined()
    expect(body.exhaustsAt).toBeUndefined()
    expect(body.projectedUsage).toBe(140)
  })
})
