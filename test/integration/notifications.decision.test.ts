// Notifications come from the decision itself (src/notifications/README.md): limit.reached is
// raised by the script that takes a customer's usage of a feature to its limit (the ingest
// worker's claim, a run's consume), with the exact used, limit and period that script decided,
// once per customer, feature and period; invoice.created / invoice.updated when the invoice
// worker finalizes an invoice (updated: the earlier invoice whose late usage it adjusts);
// budget.exceeded when a hard limit denies a budget, once per limit and period; limit.crossed as
// before. Each delivered as a signed webhook to a real receiver on 127.0.0.1, its body checked
// against the payload schema the OpenAPI document publishes for its type.
// The gateway runs the ingest worker (ClickHouse: the test clickhouse-server) and the
// notification worker, with queues of this file's own.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { insertEventsOnce } from '../../src/infra/clickhouse/tables.js'
import { invoiceIdOf } from '../../src/invoices/service.js'
import { WEBHOOK_PAYLOADS } from '../../src/notifications/schemas.js'
import { verifySignature } from '../../src/notifications/signature.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { untilQueuesIdle } from '../support/queues.js'
import { startReceiver, waitFor, type Receiver } from './notifications.receiver.js'

const HOUR_MS = 3_600_000
const NOV = Date.UTC(2026, 10, 1)
const DEC = Date.UTC(2026, 11, 1)
const JAN = Date.UTC(2027, 0, 1)
const START = Date.UTC(2026, 10, 15, 12, 34)

const CATALOG = {
  features: [
    {
      slug: 'tokens',
      title: 'Tokens',
      unitOfMeasure: 'tokens',
      meterConfig: { eventSlug: 'tokens', aggregationMethod: 'sum', aggregationField: 'value' },
    },
    { slug: 'steps', title: 'Steps', unitOfMeasure: 'steps', meterConfig: { eventSlug: 'step', aggregationMethod: 'count' } },
  ],
  plans: [{ slug: 'pro', title: 'Pro' }],
  planVersions: [
    {
      plan: 'pro',
      version: 1,
      status: 'published',
      title: 'Pro',
      currency: 'USD',
      whenToBill: 'pay_in_arrear',
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'tokens', featureType: 'usage', config: { usageMode: 'unit', price: '0.001' }, limit: 100_000, metadata: { overageStrategy: 'none' } },
        { featureSlug: 'steps', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 2, metadata: { overageStrategy: 'none' } },
      ],
    },
  ],
  customers: [{ id: 'lc' }, { id: 'rc' }],
  subscriptions: [
    { id: 'lc-sub', customerId: 'lc', phases: [{ plan: 'pro', version: 1, startAt: NOV }] },
    { id: 'rc-sub', customerId: 'rc', phases: [{ plan: 'pro', version: 1, startAt: NOV }] },
  ],
}

const ALL_TYPES = ['limit.reached', 'limit.crossed', 'budget.exceeded', 'invoice.created', 'invoice.updated']

describe('notifications from the decision', () => {
  const suffix = randomBytes(6).toString('hex')
  const database = `test_decision_${suffix}`
  const queues = {
    ingest: `test-decision-ingest-${suffix}`,
    notifications: `test-decision-notifications-${suffix}`,
    webhooks: `test-decision-webhooks-${suffix}`,
  }
  let r: Receiver
  let gw: TestGateway
  let dataDir: string
  let projectId: string
  let apiKey: string
  let secret: string

  beforeAll(async () => {
    process.env.METERING_NOTIFICATIONS_QUEUE = queues.notifications
    process.env.METERING_WEBHOOK_QUEUE = queues.webhooks
    process.env.METERING_WEBHOOK_BACKOFF_MS = '40'
    r = await startReceiver()
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-decision-'))
    gw = await startTestGateway(
      { clickhouse: 'on', clickhouseUrl: inject('clickhouseUrl'), clickhouseDatabase: database, dataDir, events: { queueName: queues.ingest } },
      START,
    )
    ;({ projectId, apiKey } = await gw.project())
    const applied = await gw.post('/v1/config/apply', CATALOG, apiKey)
    expect(applied.status, JSON.stringify(applied.body)).toBe(200)
    const hook = await gw.post('/v1/webhooks/upsert', { url: r.url, events: ['limit.reached'] }, apiKey)
    expect(hook.status, JSON.stringify(hook.body)).toBe(200)
    secret = hook.body.secret
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await r?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  /** The bodies received for this project, of one type, parsed; each checked against its published payload schema. */
  const received = (type: string) =>
    r.received
      .filter((x) => x.headers['x-metering-event'] === type)
      .map((x) => JSON.parse(x.body))
      .filter((b) => b.projectId === projectId)
      .map((b) => {
        const schema = WEBHOOK_PAYLOADS[type as keyof typeof WEBHOOK_PAYLOADS]
        expect(Value.Check(schema, b), `${type}: ${JSON.stringify([...Value.Errors(schema, b)].slice(0, 3))}`).toBe(true)
        return b
      })
  const settled = () => untilQueuesIdle(gw.redis, [queues.ingest, queues.notifications, queues.webhooks], 60_000)
  const record = async (customerId: string, id: string, value: number) => {
    const res = await gw.post('/v1/usage/record', { customerId, eventSlug: 'tokens', id, properties: { value } }, apiKey)
    expect(res.body).toEqual({ accepted: true })
    await settled()
  }
  const usageOf = async (customerId: string, featureSlug: string) => {
    const list = await gw.post('/v1/access/entitlements/list', { customerId }, apiKey)
    return list.body.find((e: any) => e.featurePlanVersion.feature.slug === featureSlug).metadata.usage
  }

  test('limit 100,000 (none), events of 60,000, 50,000 and 1: nothing; reaching the limit later sends the exact decision, once per period', async () => {
    await record('lc', 't1', 60_000)
    await record('lc', 't2', 50_000)
    await record('lc', 't3', 1)
    expect(await usageOf('lc', 'tokens')).toMatchObject({ usage: '60001', refused: '50000', denied: false })
    expect(received('limit.reached')).toEqual([])

    gw.clock.advance(HOUR_MS)
    await record('lc', 't4', 39_999)
    expect(await usageOf('lc', 'tokens')).toMatchObject({ usage: '100000', denied: true })
    const first = await waitFor('limit.reached of lc', () => r.received.find((x) => x.headers['x-metering-event'] === 'limit.reached'))
    expect(verifySignature(secret, first.headers['x-metering-signature'] as string, first.body, Math.floor(gw.clock() / 1000))).toBe(true)
    const [reached] = received('limit.reached')
    expect(reached).toMatchObject({
      type: 'limit.reached',
      projectId,
      createdAt: gw.clock(),
      data: {
        customerId: 'lc',
        featureSlug: 'tokens',
        limit: 100_000,
        used: 100_000,
        exact: { limit: '100000', used: '100000' },
        window: 'month',
        periodStartAt: NOV,
        resetsAt: DEC,
        denied: true,
        overageStrategy: 'none',
        source: 'ingest',
      },
    })
    expect(reached.data.entitlementId).toMatch(/^ent_/)
    expect(reached.id).toMatch(/^ntf_[0-9a-f]{32}$/)

    // Refused usage, a batch with a retried event: the period's notification was sent; no other.
    await record('lc', 't5', 1)
    const batch = await gw.post(
      '/v1/usage/record-batch',
      {
        events: [
          { customerId: 'lc', eventSlug: 'tokens', id: 't6', properties: { value: 7 } },
          { customerId: 'lc', eventSlug: 'tokens', id: 't4', properties: { value: 39_999 } },
        ],
      },
      apiKey,
    )
    expect(batch.status).toBe(200)
    await settled()
    expect(received('limit.reached')).toHaveLength(1)

    // December is another period: reaching the limit there is another notification.
    gw.clock.set(DEC + HOUR_MS)
    await record('lc', 'd1', 100_000)
    const december = await waitFor('the December notification', () => (received('limit.reached').length === 2 ? received('limit.reached')[1] : undefined))
    expect(december.data).toMatchObject({ used: 100_000, periodStartAt: DEC, resetsAt: JAN })
  })

  test('a run consume that reaches the limit sends limit.reached with the run; a denied consume sends nothing more', async () => {
    const topUp = await gw.post('/v1/wallet/top-up', { customerId: 'rc', amount: '10', idempotencyKey: 'dep' }, apiKey)
    expect(topUp.status, JSON.stringify(topUp.body)).toBe(200)
    const run = await gw.post('/v1/runs/start', { customerId: 'rc', budgetAmountMinor: 500, idempotencyKey: 'run-1' }, apiKey)
    expect(run.status, JSON.stringify(run.body)).toBe(200)
    const runId: string = run.body.runId
    const consume = (key: string) => gw.post(`/v1/runs/consume/${runId}`, { featureSlug: 'steps', idempotencyKey: key }, apiKey)
    expect((await consume('s1')).body).toMatchObject({ accepted: true, reason: 'accepted' })
    await settled()
    expect(received('limit.reached').filter((b) => b.data.customerId === 'rc')).toEqual([])
    expect((await consume('s2')).body).toMatchObject({ accepted: true, reason: 'accepted' })
    const reached = await waitFor('limit.reached of the run', () => received('limit.reached').find((b) => b.data.customerId === 'rc'))
    expect(reached).toMatchObject({
      createdAt: gw.clock(),
      data: {
        featureSlug: 'steps',
        limit: 2,
        used: 2,
        exact: { limit: '2', used: '2' },
        denied: true,
        source: 'run',
        runId,
        periodStartAt: DEC,
        resetsAt: JAN,
      },
    })
    expect((await consume('s3')).body).toMatchObject({ accepted: false, reason: 'entitlement_denied' })
    await settled()
    expect(received('limit.reached').filter((b) => b.data.customerId === 'rc')).toHaveLength(1)
  })

  test('budget.exceeded once per limit and period, limit.crossed as before, invoice.created and invoice.updated from the invoice worker', async () => {
    const hook = await gw.post('/v1/webhooks/upsert', { url: r.url, events: ALL_TYPES }, apiKey)
    expect(hook.status, JSON.stringify(hook.body)).toBe(200)
    const budget = await gw.post(
      '/v1/budgets/upsert',
      { key: 'lc-daily', unit: 'USD', limits: [{ id: 'day', window: 'day', enforce: 'hard', amount: '10' }] },
      apiKey,
    )
    expect(budget.status, JSON.stringify(budget.body)).toBe(200)
    const denied = await gw.post('/v1/budgets/authorize', { key: 'lc-daily', amount: '10.5', idempotencyKey: 'a1' }, apiKey)
    expect(denied.status).toBe(402)
    const exceeded = await waitFor('budget.exceeded', () => received('budget.exceeded')[0])
    expect(exceeded.data).toMatchObject({
      budgetKey: 'lc-daily',
      operation: 'authorize',
      amount: '10.5',
      blocked: { limitId: 'day', window: 'day', remaining: '10' },
    })
    expect(exceeded.data.limit).toMatchObject({ id: 'day', amount: '10', resetsAt: DEC + 86_400_000 })
    expect((await gw.post('/v1/budgets/charge', { key: 'lc-daily', amount: '11', idempotencyKey: 'c1' }, apiKey)).status).toBe(402)
    const recorded = await gw.post('/v1/budgets/record', { key: 'lc-daily', amount: '12', idempotencyKey: 'r1' }, apiKey)
    expect(recorded.status).toBe(200)
    const crossed = await waitFor('limit.crossed', () => received('limit.crossed')[0])
    expect(crossed.data).toMatchObject({ budgetKey: 'lc-daily', crossed: [{ limitId: 'day', amount: '10', consumed: '12' }] })
    await settled()
    expect(received('budget.exceeded')).toHaveLength(1)

    // November closes: its invoice is created. Usage of November that arrives late is adjusted on
    // December's invoice: December's is created, November's updated.
    const report = await gw.services.invoices.closeDueCycles(projectId, gw.clock(), 'lc')
    const november = invoiceIdOf(projectId, 'lc', 'lc-sub', NOV)
    expect(report.created).toContain(november)
    const created = await waitFor('invoice.created of November', () => received('invoice.created').find((b) => b.data.invoiceId === november))
    expect(created.data).toMatchObject({
      customerId: 'lc',
      subscriptionId: 'lc-sub',
      currency: 'USD',
      statementStartAt: NOV,
      statementEndAt: DEC,
      amountDue: '100', // 100,000 accepted tokens × $0.001
    })
    await insertEventsOnce(gw.clickhouse!, [
      {
        project_id: projectId,
        event_id: 'late-1',
        customer_id: 'lc',
        event_slug: 'tokens',
        feature_slug: 'tokens',
        value: '2000',
        properties: '{}',
        ts_ms: DEC - HOUR_MS,
      },
    ])
    gw.clock.set(JAN + HOUR_MS)
    await gw.services.invoices.closeDueCycles(projectId, gw.clock(), 'lc')
    const december = invoiceIdOf(projectId, 'lc', 'lc-sub', DEC)
    await waitFor('invoice.created of December', () => received('invoice.created').find((b) => b.data.invoiceId === december))
    const updated = await waitFor('invoice.updated of November', () => received('invoice.updated').find((b) => b.data.invoiceId === november))
    expect(updated.data).toMatchObject({
      customerId: 'lc',
      adjustedBy: december,
      adjustments: [{ featureSlug: 'tokens', quantity: '2000', amount: '2' }],
    })
    await settled()
    expect(received('invoice.created').filter((b) => b.data.invoiceId === november)).toHaveLength(1)
  })
})
