// limit.reached end to end: usage recorded over HTTP → the gateway's in-process ingest worker,
// whose claim counts each event against the customer's entitlement and, for the count that takes
// usage to the limit, reports the decision → the notification queue → a signed webhook to a real
// receiver on 127.0.0.1; the rows go to ClickHouse (the test clickhouse-server 18.16 in a
// throwaway database, and chDB). The gateway has ingest and notification queues of its own
// (other suites share the test Redis). More cases: notifications.decision.test.ts.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { verifySignature } from '../../src/notifications/signature.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { startReceiver, waitFor, type Receiver } from './notifications.receiver.js'
import { untilQueuesIdle } from '../support/queues.js'

const HOUR_MS = 3_600_000
/** 2026-11-15 12:34 UTC; the subscription started 2026-11-01, monthly limits reset 2026-12-01. */
const START = Date.UTC(2026, 10, 15, 12, 34)
const RESETS_AT = Date.UTC(2026, 11, 1)

const suffix = randomBytes(6).toString('hex')
let r: Receiver

const CATALOG = {
  // Meters that sum properties.value: the ClickHouse rows' value is what the meter counts.
  features: [
    {
      slug: 'tokens',
      title: 'Tokens',
      unitOfMeasure: 'tokens',
      meterConfig: { eventSlug: 'tokens', aggregationMethod: 'sum', aggregationField: 'value', windowSize: 'MINUTE' },
    },
    {
      slug: 'calls',
      title: 'Calls',
      unitOfMeasure: 'calls',
      meterConfig: { eventSlug: 'calls', aggregationMethod: 'sum', aggregationField: 'value', windowSize: 'MINUTE' },
    },
  ],
  plans: [{ slug: 'pro', title: 'Pro' }],
  planVersions: [
    {
      plan: 'pro',
      version: 1,
      status: 'published',
      title: 'Pro',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'tokens', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 100 },
        { featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' } },
      ],
    },
  ],
  customers: [{ id: 'lc' }, { id: 'other' }],
  subscriptions: [
    { id: 'lc-sub', customerId: 'lc', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2026, 10, 1) }] },
    { id: 'other-sub', customerId: 'other', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2026, 10, 1) }] },
  ],
}

beforeAll(async () => {
  process.env.METERING_NOTIFICATIONS_QUEUE = `test-notifications-${suffix}`
  process.env.METERING_WEBHOOK_QUEUE = `test-webhooks-${suffix}`
  process.env.METERING_WEBHOOK_BACKOFF_MS = '40'
  r = await startReceiver()
})
afterAll(async () => {
  await r?.close()
})

describe.each([['server'], ['embedded']] as const)('limit.reached, ClickHouse store: %s', (kind) => {
  const database = `test_${kind}_${suffix}`
  let gw: TestGateway
  let dataDir: string
  beforeAll(async () => {
    // Queues of this file alone, so that "idle" speaks of its own work only.
    process.env.METERING_NOTIFICATIONS_QUEUE = `test-notifications-${kind}-${suffix}`
    process.env.METERING_WEBHOOK_QUEUE = `test-webhooks-${kind}-${suffix}`
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-limits-'))
    gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: kind === 'server' ? inject('clickhouseUrl') : undefined,
        clickhouseDatabase: database,
        dataDir,
        events: { queueName: `test-limits-${kind}-${suffix}` },
      },
      START,
    )
    expect(gw.clickhouse?.kind).toBe(kind)
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  test('sent exactly once when recorded usage reaches the entitlement limit, even as more usage follows', async () => {
    const { projectId, apiKey } = await gw.project()
    const applied = await gw.post('/v1/config/apply', CATALOG, apiKey)
    expect(applied.status, JSON.stringify(applied.body)).toBe(200)
    const hook = await gw.post('/v1/webhooks/upsert', { url: r.url, events: ['limit.reached'] }, apiKey)
    expect(hook.status, JSON.stringify(hook.body)).toBe(200)
    const secret: string = hook.body.secret
    const ofProject = () => r.received.filter((x) => JSON.parse(x.body).projectId === projectId)

    const record = async (customerId: string, eventSlug: string, id: string, value: number) => {
      const res = await gw.post('/v1/usage/record', { customerId, eventSlug, id, properties: { value } }, apiKey)
      expect(res.body).toEqual({ accepted: true })
    }
    /** Waits until ClickHouse holds `total` tokens of the customer this month (the batch was inserted, so its check ran or runs now). */
    const drained = async (customerId: string, total: number) => {
      await waitFor(`${total} tokens of ${customerId} in ClickHouse`, async () => {
        const res = await gw.post('/v1/analytics/usage/get', { range: '30d', customer_id: customerId }, apiKey)
        const tokens = res.body.usage?.find((u: { feature_slug: string }) => u.feature_slug === 'tokens')?.usage ?? 0
        return tokens === total ? true : undefined
      })
    }

    // 60 of 100: nothing.
    await record('lc', 'tokens', 'a1', 60)
    await record('other', 'tokens', 'o1', 100) // another customer: its own notification
    await record('lc', 'calls', 'c1', 1_000_000) // a feature without a limit: none
    gw.clock.advance(1)
    await drained('lc', 60)
    await waitFor("the other customer's notification", () => (ofProject().length >= 1 ? true : undefined))
    await untilQueuesIdle(gw.redis, [`test-limits-${kind}-${suffix}`, process.env.METERING_NOTIFICATIONS_QUEUE!, process.env.METERING_WEBHOOK_QUEUE!]) // ingest, checks and deliveries done
    expect(ofProject().map((x) => JSON.parse(x.body).data.customerId)).toEqual(['other'])

    // 60 + 40 = 100: reached (at the limit counts).
    gw.clock.advance(HOUR_MS)
    await record('lc', 'tokens', 'a2', 40)
    gw.clock.advance(1)
    await drained('lc', 100)
    const reached = await waitFor('limit.reached of lc', () => ofProject().find((x) => JSON.parse(x.body).data.customerId === 'lc'))
    expect(reached.headers['x-metering-event']).toBe('limit.reached')
    expect(verifySignature(secret, reached.headers['x-metering-signature'] as string, reached.body, Math.floor(gw.clock() / 1000))).toBe(true)
    const payload = JSON.parse(reached.body)
    expect(payload).toMatchObject({
      type: 'limit.reached',
      projectId,
      data: { customerId: 'lc', featureSlug: 'tokens', limit: 100, used: 100, window: 'month', resetsAt: RESETS_AT, denied: true, source: 'ingest' },
    })
    expect(payload.data.entitlementId).toMatch(/^ent_/)
    expect(payload.id).toMatch(/^ntf_[0-9a-f]{32}$/)

    // More usage (refused: overage none at the limit), single and batch, and a retried event: no second notification this period.
    await record('lc', 'tokens', 'a3', 5)
    await gw.post(
      '/v1/usage/record-batch',
      {
        events: [
          { customerId: 'lc', eventSlug: 'tokens', id: 'a4', properties: { value: 7 } },
          { customerId: 'lc', eventSlug: 'tokens', id: 'a2', properties: { value: 40 } },
        ],
      },
      apiKey,
    )
    gw.clock.advance(1)
    await untilQueuesIdle(gw.redis, [`test-limits-${kind}-${suffix}`, process.env.METERING_NOTIFICATIONS_QUEUE!, process.env.METERING_WEBHOOK_QUEUE!]) // ingest, checks and deliveries done
    const lc = ofProject().filter((x) => JSON.parse(x.body).data.customerId === 'lc')
    expect(lc).toHaveLength(1)
    expect(ofProject()).toHaveLength(2)

    // The next period (December) starts from zero: reaching the limit there is a new notification.
    gw.clock.set(RESETS_AT + HOUR_MS)
    await record('lc', 'tokens', 'd1', 100)
    gw.clock.advance(1)
    const december = await waitFor('the December notification', () => {
      const all = ofProject().filter((x) => JSON.parse(x.body).data.customerId === 'lc')
      return all.length === 2 ? all[1] : undefined
    })
    expect(JSON.parse(december.body).data).toMatchObject({ used: 100, resetsAt: Date.UTC(2027, 0, 1) })
    expect(december.headers['x-metering-delivery']).not.toBe(reached.headers['x-metering-delivery'])
  })
})
