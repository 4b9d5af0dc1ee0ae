// One truth for billable usage (DESIGN.md invariant 7): what an entitlement refused is stored,
// marked refused, and never billed. Usage recorded over HTTP → the gateway's in-process ingest
// worker (its claim decides accepted or refused per event and feature) → ClickHouse rows with
// that decision → the invoice of the closed cycle, analytics and the forecast read accepted
// usage only; analytics shows the refused usage apart. A run's consume row says which decision
// made it. And the migration that adds the columns upgrades a database holding older rows.
// Against both stores: the test clickhouse-server (18.16, a throwaway database) and chDB.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { migrate, migrations } from '../../src/infra/clickhouse/migrations.js'
import { sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import { dailyUsage, insertEventsOnce } from '../../src/infra/clickhouse/tables.js'
import { invoiceIdOf } from '../../src/invoices/service.js'
import { drainJournal } from '../../src/journal/drain.js'
import { projectJournalPatterns } from '../../src/journal/keys.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'
import { untilQueuesIdle } from '../support/queues.js'
import { openTestStore } from '../support/store.js'

const HOUR_MS = 3_600_000
const OCT = Date.UTC(2026, 9, 1)
const NOV = Date.UTC(2026, 10, 1)
const START = Date.UTC(2026, 9, 20, 12)

const CATALOG = {
  features: [
    { slug: 'api', title: 'API', unitOfMeasure: 'units', meterConfig: { eventSlug: 'api', aggregationMethod: 'sum', aggregationField: 'value' } },
    { slug: 'steps', title: 'Steps', unitOfMeasure: 'steps', meterConfig: { eventSlug: 'step', aggregationMethod: 'count' } },
  ],
  plans: [{ slug: 'metered', title: 'Metered' }],
  planVersions: [
    {
      plan: 'metered',
      version: 1,
      status: 'published',
      title: 'Metered',
      currency: 'USD',
      whenToBill: 'pay_in_arrear',
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'api', featureType: 'usage', config: { usageMode: 'unit', price: '1' }, limit: 10, metadata: { overageStrategy: 'none' } },
        { featureSlug: 'steps', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' } },
      ],
    },
  ],
  customers: [{ id: 'acme' }],
  subscriptions: [{ id: 'sub-acme', customerId: 'acme', phases: [{ plan: 'metered', version: 1, startAt: OCT }] }],
}

describe.each([['server'], ['embedded']] as const)('refused usage is never billed, ClickHouse store: %s', (kind) => {
  const suffix = randomBytes(6).toString('hex')
  const database = `test_refused_${kind}_${suffix}`
  const queue = `test-refused-${kind}-${suffix}`
  let gw: TestGateway
  let dataDir: string
  let projectId: string
  let apiKey: string

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-refused-'))
    gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: kind === 'server' ? inject('clickhouseUrl') : undefined,
        clickhouseDatabase: database,
        dataDir,
        events: { queueName: queue },
      },
      START,
    )
    expect(gw.clickhouse?.kind).toBe(kind)
    ;({ projectId, apiKey } = await gw.project())
    const applied = await gw.post('/v1/config/apply', CATALOG, apiKey)
    expect(applied.status, JSON.stringify(applied.body)).toBe(200)
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  /** Records one event and waits until the worker counted and inserted it, so events are decided in order. */
  const record = async (id: string, value: number) => {
    const res = await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'api', id, properties: { value } }, apiKey)
    expect(res.body).toEqual({ accepted: true })
    await untilQueuesIdle(gw.redis, [queue], 60_000)
  }
  const rowsOf = (customerId: string) =>
    gw.clickhouse!.query<{ event_id: string; feature_slug: string; v: string; status: string; decision: string }>(
      `SELECT event_id, feature_slug, toString(value) AS v, status, decision FROM ${database}.usage_events FINAL
       WHERE project_id = ${sqlLiteral(projectId)} AND customer_id = ${sqlLiteral(customerId)} ORDER BY ts_ms, event_id`,
    )

  test('overage none, limit 10, events of 8, 5 and 2: the 5 is refused, stored apart, and the invoice bills 10', async () => {
    await record('e8', 8)
    gw.clock.advance(1000)
    await record('e5', 5)
    gw.clock.advance(1000)
    await record('e2', 2)

    const list = await gw.post('/v1/access/entitlements/list', { customerId: 'acme' }, apiKey)
    const api = list.body.find((e: any) => e.featurePlanVersion.feature.slug === 'api')
    expect(api.metadata.usage).toMatchObject({ usage: '10', refused: '5', limit: '10', denied: true })

    // Every row says what the claim decided.
    expect((await rowsOf('acme')).map((r) => [r.event_id, Number(r.v), r.status, r.decision])).toEqual([
      ['e8', 8, 'accepted', 'claim'],
      ['e5', 5, 'refused', 'claim'],
      ['e2', 2, 'accepted', 'claim'],
    ])

    // Analytics: the accepted usage, the refused apart; the forecast's limit counts accepted usage.
    // (Their windows end before now: the last event is a second behind.)
    gw.clock.advance(1000)
    const usage = await gw.post('/v1/analytics/usage/get', { range: '30d', customer_id: 'acme' }, apiKey)
    expect(usage.status, JSON.stringify(usage.body)).toBe(200)
    expect(usage.body.usage).toEqual([
      expect.objectContaining({ feature_slug: 'api', usage: 10, refused: 5, spending: expect.objectContaining({ amount: '10' }) }),
    ])
    const forecast = await gw.post('/v1/analytics/usage/forecast', { customer_id: 'acme', feature_slug: 'api' }, apiKey)
    expect(forecast.status, JSON.stringify(forecast.body)).toBe(200)
    expect(forecast.body.limit).toMatchObject({ kind: 'entitlement', amount: 10, used: 10 })

    // The closed October cycle invoices the 10 accepted units: $10, not $15.
    gw.clock.set(NOV + HOUR_MS)
    const report = await gw.services.invoices.closeDueCycles(projectId, gw.clock())
    expect(report.errors).toEqual([])
    const invoiceId = invoiceIdOf(projectId, 'acme', 'sub-acme', OCT)
    expect(report.created).toContain(invoiceId)
    const invoice = await gw.get(`/v1/invoices/get/${invoiceId}`, apiKey)
    expect(invoice.status, JSON.stringify(invoice.body)).toBe(200)
    const line = invoice.body.lines.find((l: any) => l.kind === 'usage' && String(l.description).startsWith('api'))
    expect(line).toMatchObject({ quantity: 10, amount: 1_000_000_000 })
  })

  test("a run's consume row is accepted, by the consume of that run", async () => {
    const topUp = await gw.post('/v1/wallet/top-up', { customerId: 'acme', amount: '5', idempotencyKey: 'dep' }, apiKey)
    expect(topUp.status, JSON.stringify(topUp.body)).toBe(200)
    const run = await gw.post('/v1/runs/start', { customerId: 'acme', budgetAmountMinor: 100, idempotencyKey: 'r1' }, apiKey)
    expect(run.status, JSON.stringify(run.body)).toBe(200)
    const runId: string = run.body.runId
    const consumed = await gw.post(`/v1/runs/consume/${runId}`, { featureSlug: 'steps', idempotencyKey: 's1' }, apiKey)
    expect(consumed.body).toMatchObject({ accepted: true, reason: 'accepted' })
    const row = await waitFor('the consume row in ClickHouse', async () => {
      await drainJournal({ redis: gw.redis, store: gw.clickhouse!, match: projectJournalPatterns(projectId) })
      return (await rowsOf('acme')).find((r) => r.event_id === `${runId}:s1`)
    })
    expect(row).toMatchObject({ feature_slug: 'steps', status: 'accepted', decision: `consume:${runId}` })
  })
})

describe.each([['server'], ['embedded']] as const)('the migration to accepted and refused usage, ClickHouse store: %s', (kind) => {
  test('rows written before it read as accepted; the aggregates keep them and take refused usage apart from then on', async () => {
    const database = `test_upgrade_${kind}_${randomBytes(6).toString('hex')}`
    const history = await openTestStore(kind, database)
    try {
      const { store } = history
      await migrate(
        store,
        migrations.filter((m) => m.version <= 6),
      )
      const day = Date.UTC(2026, 9, 5, 10)
      // Rows as a release before the migration wrote them: no status, no decision.
      await store.insert(`${database}.usage_events`, [
        {
          project_id: 'p',
          event_id: 'old1',
          customer_id: 'c',
          event_slug: 'api',
          feature_slug: 'api',
          value: '4',
          properties: '{}',
          ts_ms: day,
          inserted_at: '2026-10-05 10:00:00',
        },
        {
          project_id: 'p',
          event_id: 'old2',
          customer_id: 'c',
          event_slug: 'api',
          feature_slug: 'api',
          value: '6',
          properties: '{}',
          ts_ms: day + 1,
          inserted_at: '2026-10-05 10:00:00',
        },
      ])
      const upgraded = await migrate(store)
      expect(upgraded.applied).toEqual(migrations.filter((m) => m.version > 6).map((m) => m.version))
      expect((await migrate(store)).applied).toEqual([])

      const old = await store.query<{ event_id: string; status: string; decision: string }>(
        `SELECT event_id, status, decision FROM ${database}.usage_events FINAL ORDER BY event_id`,
      )
      expect(old).toEqual([
        { event_id: 'old1', status: 'accepted', decision: '' },
        { event_id: 'old2', status: 'accepted', decision: '' },
      ])
      // New rows: one accepted, one refused, through the writer the ingest worker uses.
      await insertEventsOnce(store, [
        {
          project_id: 'p',
          event_id: 'new1',
          customer_id: 'c',
          event_slug: 'api',
          feature_slug: 'api',
          value: '1.5',
          properties: '{}',
          ts_ms: day + 2,
          status: 'accepted',
          decision: 'claim',
        },
        {
          project_id: 'p',
          event_id: 'new2',
          customer_id: 'c',
          event_slug: 'api',
          feature_slug: 'api',
          value: '100',
          properties: '{}',
          ts_ms: day + 3,
          status: 'refused',
          decision: 'claim',
        },
      ])
      // A writer of the release before (no status column in its insert) still writes accepted usage.
      await store.insert(`${database}.usage_events`, [
        {
          project_id: 'p',
          event_id: 'old3',
          customer_id: 'c',
          event_slug: 'api',
          feature_slug: 'api',
          value: '0.5',
          properties: '{}',
          ts_ms: day + 4,
          inserted_at: '2026-10-05 10:00:00',
        },
      ])
      expect(await dailyUsage(store, { projectId: 'p', customerId: 'c', fromDay: '2026-10-01', toDay: '2026-10-31' })).toEqual([
        { day: '2026-10-05', feature_slug: 'api', value: '12', count: 4, refusedValue: '100', refusedCount: 1 },
      ])
      const hourly = await store.query<{ v: string; n: string; r: string; rn: string }>(
        `SELECT toString(sum(value_sum)) AS v, toString(sum(event_count)) AS n, toString(sum(refused_sum)) AS r, toString(sum(refused_count)) AS rn
         FROM ${database}.usage_hourly WHERE project_id = 'p' AND customer_id = 'c'`,
      )
      expect(hourly.map((h) => [Number(h.v), Number(h.n), Number(h.r), Number(h.rn)])).toEqual([[12, 4, 100, 1]])
    } finally {
      await history.close()
    }
  })
})
