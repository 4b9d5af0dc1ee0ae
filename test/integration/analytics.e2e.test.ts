// The data path end to end: usage events recorded over HTTP (single and batch, with retried
// duplicates) → Redis → the gateway's in-process ingest worker → ClickHouse → POST
// /v1/analytics/usage/get and /forecast. Against both stores: the test clickhouse-server (18.16,
// a throwaway database) and chDB (26.x, in a child process under a temporary data dir). The
// gateway has an ingest queue of its own (other suites share the test Redis and read the default
// queue). Waiting for the worker polls the analytics route with a deadline.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { DAY_MS } from '../../src/analytics/forecast.js'
import { sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import { expectError } from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'

const HOUR_MS = 3_600_000
/** 2026-11-08 12:00 UTC: day 0 of the forecast's windows once the clock reaches 2026-11-22. */
const DAY0 = Date.UTC(2026, 10, 8)
const START = DAY0 + 12 * HOUR_MS
/** Not on an hour: usage/get reads whole hours from usage_hourly and the edges from the raw events. */
const GATEWAY_START = START + 17 * 60_000 + 23_456
const DRAIN_DEADLINE_MS = 30_000

describe.each([['server'], ['embedded']] as const)('ClickHouse store: %s', (kind) => {
  const suffix = randomBytes(6).toString('hex')
  const database = `test_${suffix}`
  let gw: TestGateway
  let dataDir: string

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-analytics-'))
    gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: kind === 'server' ? inject('clickhouseUrl') : undefined,
        clickhouseDatabase: database,
        dataDir,
        events: { queueName: `test-analytics-${suffix}` },
      },
      GATEWAY_START,
    )
    expect(gw.clickhouse?.kind).toBe(kind)
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  type UsageRow = { project_id: string; customer_id: string; feature_slug: string; usage: number; spending: unknown }

  async function usage(key: string, customerId: string, range: string): Promise<UsageRow[]> {
    const res = await gw.post('/v1/analytics/usage/get', { range, customer_id: customerId }, key)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return res.body.usage
  }

  /** Polls usage/get until `done` holds (the worker has drained what the test waits for), or fails at the deadline. */
  async function drained(key: string, customerId: string, range: string, done: (rows: UsageRow[]) => boolean): Promise<UsageRow[]> {
    let last: UsageRow[] = []
    return waitFor(
      'the worker to drain',
      async () => {
        last = await usage(key, customerId, range)
        return done(last) ? last : undefined
      },
      DRAIN_DEADLINE_MS,
      { intervalMs: 50, detail: () => JSON.stringify(last) },
    )
  }

  const total = (rows: UsageRow[]) => rows.reduce((s, r) => s + r.usage, 0)
  const perFeature = (rows: UsageRow[]) => Object.fromEntries(rows.map((r) => [r.feature_slug, r.usage]))

  describe('usage recorded over HTTP is served by /v1/analytics/usage/get once the worker drains it', () => {
    test('per-feature usage over 24h, 7d and 30d; retried duplicates count once; other customers and projects apart', async () => {
      const { projectId, apiKey: key } = await gw.project()
      const other = await gw.project()
      const now = gw.clock()
      const ok = { status: 200, body: { accepted: true } }
      const record = async (body: unknown) => {
        const res = await gw.post('/v1/usage/record', body, key)
        expect({ status: res.status, body: res.body }).toEqual(ok)
      }
      const batch = async (events: unknown[]) => {
        const res = await gw.post('/v1/usage/record-batch', { events }, key)
        expect(res.status).toBe(200)
        expect(res.body.results.every((r: { accepted: boolean }) => r.accepted)).toBe(true)
      }

      await record({ customerId: 'acme', eventSlug: 'tokens', id: 'e1', properties: { value: 1250 } })
      await batch([
        { customerId: 'acme', eventSlug: 'tokens', id: 'e2', properties: { value: '250.5' } },
        { customerId: 'acme', eventSlug: 'api-calls', idempotencyKey: 'k1' },
        { customerId: 'acme', eventSlug: 'api-calls', idempotencyKey: 'k2', timestamp: now - 2 * HOUR_MS - 17 },
        // 24 h and a millisecond ago: in 7d, not in 24h.
        { customerId: 'acme', eventSlug: 'api-calls', id: 'e3', timestamp: now - DAY_MS - 1 },
        // 10 days ago: in 30d only.
        { customerId: 'acme', eventSlug: 'tokens', id: 'old', timestamp: now - 10 * DAY_MS, properties: { value: 1000 } },
        { customerId: 'someone-else', eventSlug: 'tokens', id: 'e4', properties: { value: 5 } },
      ])
      // The client's retries: the same ids and keys again, single and in a batch. Accepted, stored once.
      await record({ customerId: 'acme', eventSlug: 'tokens', id: 'e1', properties: { value: 1250 } })
      await batch([
        { customerId: 'acme', eventSlug: 'tokens', id: 'e2', properties: { value: '250.5' } },
        { customerId: 'acme', eventSlug: 'api-calls', idempotencyKey: 'k1' },
        { customerId: 'acme', eventSlug: 'api-calls', idempotencyKey: 'k1' },
      ])
      // The same ids in another project are other events.
      const res = await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'tokens', id: 'e1', properties: { value: 7 } }, other.apiKey)
      expect(res.body).toEqual({ accepted: true })

      // The window is [now − range, now): move past the events stamped with the current time.
      gw.clock.advance(60_000)
      const month = await drained(key, 'acme', '30d', (rows) => total(rows) === 1250 + 250.5 + 3 + 1000)
      expect(month).toEqual([
        {
          project_id: projectId,
          feature_slug: 'api-calls',
          usage: 3,
          refused: 0,
          spending: { amount: '0', currency: 'USD', display_amount: '$0' },
          customer_id: 'acme',
        },
        {
          project_id: projectId,
          feature_slug: 'tokens',
          usage: 2500.5,
          refused: 0,
          spending: { amount: '0', currency: 'USD', display_amount: '$0' },
          customer_id: 'acme',
        },
      ])
      expect(perFeature(await usage(key, 'acme', '7d'))).toEqual({ 'api-calls': 3, tokens: 1500.5 })
      expect(perFeature(await usage(key, 'acme', '24h'))).toEqual({ 'api-calls': 2, tokens: 1500.5 })
      expect(perFeature(await usage(key, 'acme', '90d'))).toEqual({ 'api-calls': 3, tokens: 2500.5 })
      expect(perFeature(await usage(key, 'someone-else', '24h'))).toEqual({ tokens: 5 })
      expect(await usage(key, 'nobody', '90d')).toEqual([])
      expect(perFeature(await drained(other.apiKey, 'acme', '24h', (rows) => total(rows) === 7))).toEqual({ tokens: 7 })

      // In the store: every distinct event once, whatever was retried.
      const stored = await gw.clickhouse!.query<{ n: string }>(`SELECT count() AS n FROM ${database}.usage_events WHERE project_id = ${sqlLiteral(projectId)}`)
      expect(Number(stored[0]?.n)).toBe(7)

      // An event recorded later shows up too (the worker keeps draining).
      await record({ customerId: 'acme', eventSlug: 'api-calls', id: 'e5' })
      gw.clock.advance(1)
      expect(perFeature(await drained(key, 'acme', '24h', (rows) => perFeature(rows)['api-calls'] === 3))).toEqual({ 'api-calls': 3, tokens: 1500.5 })
    })

    test("asOf is the clock's time; usageAsOf the newest event of the data read, from the trailing raw hour or the aggregates, never past now", async () => {
      const { apiKey: key } = await gw.project()
      // Not on an hour: the window's last hour is partial (read from the raw events).
      const T = Date.UTC(2026, 10, 8, 15, 41, 7, 123)
      gw.clock.set(T)
      const got = async (path: string, body: Record<string, unknown>) => {
        const res = await gw.post(path, { customer_id: 'watch', ...body }, key)
        expect(res.status, JSON.stringify(res.body)).toBe(200)
        return res.body
      }
      const day = () => got('/v1/analytics/usage/get', { range: '24h' })
      const forecast = () => got('/v1/analytics/usage/forecast', { feature_slug: 'tokens' })
      /** Polls usage/get until its usageAsOf is `want` (the worker wrote the event), or fails at the deadline. */
      const until = (want: number) =>
        waitFor('usageAsOf to reach the newest event', async () => ((await day()).usageAsOf === want ? true : undefined), DRAIN_DEADLINE_MS, { intervalMs: 50 })
      const record = async (events: Record<string, unknown>[]) => {
        const res = await gw.post('/v1/usage/record-batch', { events: events.map((e) => ({ customerId: 'watch', eventSlug: 'tokens', ...e })) }, key)
        expect(res.body.results.every((r: { accepted: boolean }) => r.accepted)).toBe(true)
      }

      expect(await day()).toEqual({ usage: [], asOf: T, usageAsOf: null })
      expect(await forecast()).toMatchObject({ asOf: T, usageAsOf: null })

      // Whole hours only (the trailing partial hour has none): the aggregates find the hour, the raw events the instant.
      const fiveHoursAgo = T - 5 * HOUR_MS - 17
      await record([
        { id: 'w1', timestamp: T - 20 * HOUR_MS, properties: { value: 1 } },
        { id: 'w2', timestamp: fiveHoursAgo, properties: { value: 2 } },
        // Another customer's newer event is not this customer's data; one stamped ahead of the clock is not in [now − 24h, now) yet.
        { id: 'w3', customerId: 'other', timestamp: T - 1000 },
        { id: 'w4', timestamp: T + 2 * 60_000, properties: { value: 4 } },
      ])
      await until(fiveHoursAgo)
      gw.clock.advance(1)
      expect(await day()).toMatchObject({ asOf: T + 1, usageAsOf: fiveHoursAgo })
      // The forecast's hour of w4 holds no event before now: it looks an hour further back.
      expect(await forecast()).toMatchObject({ asOf: T + 1, usageAsOf: fiveHoursAgo })

      // An event in the trailing partial hour is the newest: its own read gives it.
      await record([{ id: 'w5', timestamp: T - 1000, properties: { value: 5 } }])
      await until(T - 1000)
      expect(await forecast()).toMatchObject({ usageAsOf: T - 1000 })

      // Once the clock passes w4, it is the newest.
      gw.clock.set(T + 3 * 60_000)
      expect(await day()).toMatchObject({ asOf: T + 3 * 60_000, usageAsOf: T + 2 * 60_000 })
      expect(await forecast()).toMatchObject({ asOf: T + 3 * 60_000, usageAsOf: T + 2 * 60_000 })
    })

    test("another project's project_id → 403; a key without analytics:read → 403", async () => {
      const { projectId, apiKey } = await gw.project()
      const res = await gw.post('/v1/analytics/usage/get', { range: '7d', customer_id: 'acme', project_id: 'not-mine' }, apiKey)
      expectError(res, 403, 'FORBIDDEN', 'https://docs.metering.dev')
      expect((await gw.post('/v1/analytics/usage/get', { range: '7d', customer_id: 'acme', project_id: projectId }, apiKey)).status).toBe(200)
      const narrow = await gw.post('/v1/keys/create', { projectId, scopes: ['budgets:read'] }, ROOT_KEY)
      const denied = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'acme', feature_slug: 'tokens' }, narrow.body.apiKey)
      expectError(denied, 403, 'FORBIDDEN', 'https://docs.metering.dev')
    })
  })

  describe('/v1/analytics/usage/forecast over events recorded on 14 days of the injected clock', () => {
    test("DESIGN's worked example: 10 a day for 14 days → projected 140 over 14 days, observed 13, baseline 10, trend 0; then an entitlement limit and when it runs out", async () => {
      const { projectId, apiKey: key } = await gw.project()
      // Day x = 0 … 13 (2026-11-08 … 2026-11-21): 4 + 6 a day, one single event and one batch,
      // the batch sent twice; noon, then the clock moves a day.
      gw.clock.set(START)
      for (let x = 0; x < 14; x++) {
        const single = await gw.post('/v1/usage/record', { customerId: 'fc', eventSlug: 'tokens', id: `d${x}-a`, properties: { value: 4 } }, key)
        expect(single.body).toEqual({ accepted: true })
        for (let attempt = 0; attempt < 2; attempt++) {
          const res = await gw.post(
            '/v1/usage/record-batch',
            { events: [{ customerId: 'fc', eventSlug: 'tokens', idempotencyKey: `d${x}-b`, properties: { value: 6 } }] },
            key,
          )
          expect(res.body.results).toEqual([{ index: 0, accepted: true }])
        }
        gw.clock.advance(DAY_MS)
      }
      // Now 2026-11-22 03:00 UTC: the windows are exactly the 14 days above.
      const today = DAY0 + 14 * DAY_MS
      gw.clock.set(today + 3 * HOUR_MS)
      await drained(key, 'fc', '30d', (rows) => total(rows) === 140)

      const res = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'fc', feature_slug: 'tokens', period_key: '2026-11' }, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      const f = res.body
      expect(f).toMatchObject({
        project_id: projectId,
        customer_id: 'fc',
        feature_slug: 'tokens',
        periodKey: '2026-11',
        horizonDays: 14,
        projectedUsage: 140,
        observedDays: 13,
        baselineUsage: 10,
        trendPerDay: 0,
        confidence: 'high',
        freshness: { generatedAt: today + 3 * HOUR_MS, dataFrom: DAY0, dataTo: today },
      })
      expect(f.warnings).toEqual([])
      expect(f.evidence).toHaveLength(14)
      expect(f.evidence[0]).toEqual({ id: 'day:2026-11-08', timestamp: DAY0 })
      expect(f.evidence[13]).toEqual({ id: 'day:2026-11-21', timestamp: today - DAY_MS })
      expect(typeof f.answer).toBe('string')

      const week = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'fc', feature_slug: 'tokens', horizon_days: 7 }, key)
      expect(week.body.projectedUsage).toBe(70)

      const none = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'fc', feature_slug: 'seats' }, key)
      expect(none.status).toBe(200)
      expect(none.body).toMatchObject({ observedDays: 0, projectedUsage: 0, confidence: 'low', evidence: [] })
      expect(none.body.warnings.some((w: string) => w.startsWith('No usage data'))).toBe(true)
      expect(f.limit).toBeUndefined()

      // With an entitlement to 200 tokens a month (subscribed since 2026-11-01, so the period is
      // November and 140 are used), the rest (60) runs out at 10 a day: 8.75 in the 21 hours left
      // today, 10 a day for five days, and 1.25 in the first 3 hours of 2026-11-28.
      const applied = await gw.post(
        '/v1/config/apply',
        {
          features: [{ slug: 'tokens', title: 'Tokens', unitOfMeasure: 'tokens' }],
          plans: [{ slug: 'pro', title: 'Pro' }],
          planVersions: [
            {
              plan: 'pro',
              version: 1,
              status: 'published',
              title: 'Pro',
              currency: 'USD',
              billingConfig: { billingInterval: 'month' },
              features: [{ featureSlug: 'tokens', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 200 }],
            },
          ],
          customers: [{ id: 'fc' }],
          subscriptions: [{ id: 'fc-sub', customerId: 'fc', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2026, 10, 1) }] }],
        },
        key,
      )
      expect(applied.status, JSON.stringify(applied.body)).toBe(200)
      const limited = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'fc', feature_slug: 'tokens' }, key)
      expect(limited.status, JSON.stringify(limited.body)).toBe(200)
      expect(limited.body).toMatchObject({ projectedUsage: 140, observedDays: 13, baselineUsage: 10, exhaustsAt: Date.UTC(2026, 10, 28, 3) })
      expect(limited.body.limit).toMatchObject({
        kind: 'entitlement',
        amount: 200,
        used: 140,
        remaining: 60,
        window: 'month',
        resetsAt: Date.UTC(2026, 11, 1),
        exhaustsAt: Date.UTC(2026, 10, 28, 3),
        exhaustsWithinHorizon: true,
      })
      // Spending is now priced from the plan: 140 tokens at $0.01 each (unit pricing) = $1.40.
      expect(await usage(key, 'fc', '30d')).toEqual([
        {
          project_id: projectId,
          feature_slug: 'tokens',
          usage: 140,
          refused: 0,
          spending: { amount: '1.4', currency: 'USD', display_amount: '$1.40' },
          customer_id: 'fc',
        },
      ])
    })
  })
})
