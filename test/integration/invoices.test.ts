// Invoices end to end: a catalog applied over HTTP, usage put into ClickHouse, cycles closed with
// a moved clock (InvoiceService.closeDueCycles), invoices read over HTTP. Against both stores:
// the test clickhouse-server (18.16, a throwaway database) and chDB (26.x, a child process).
// Usage goes into usage_events with insertEventsOnce, the writer the ingest worker uses, so the
// test controls each event's time exactly (late events included).
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { insertEventsOnce } from '../../src/infra/clickhouse/tables.js'
import { canonicalDecimal, sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import { InvoiceGetResponseSchema } from '../../src/invoices/schemas.js'
import { claimKey } from '../../src/journal/keys.js'
import { drainJournal } from '../../src/journal/drain.js'
import { invoiceKey, journalKey } from '../../src/invoices/keys.js'
import { InvoiceService, invoiceIdOf, providerCharge } from '../../src/invoices/service.js'
import type { StoredInvoice } from '../../src/invoices/types.js'
import { WalletService } from '../../src/wallet/service.js'
import { expectError } from '../support/commonRoutes.js'
import { waitFor } from '../support/processes.js'
import { untilQueuesIdle } from '../support/queues.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

/** 2026-10-01 00:00 UTC: the subscriptions start here; monthly cycles Oct, Nov, Dec. */
const OCT = Date.UTC(2026, 9, 1)
const NOV = Date.UTC(2026, 10, 1)
const DEC = Date.UTC(2026, 11, 1)
const JAN = Date.UTC(2027, 0, 1)
const HOUR_MS = 3_600_000

/** Tiers of the rating worked examples (src/billing/README.md). */
const tiers = [
  { firstUnit: 1, lastUnit: 1000, unitPrice: '0.01' },
  { firstUnit: 1001, lastUnit: 10000, unitPrice: '0.008', flatPrice: '5' },
  { firstUnit: 10001, lastUnit: null, unitPrice: '0.005', flatPrice: '20' },
]
const sumMeter = (slug: string) => ({ eventSlug: slug, aggregationMethod: 'sum', aggregationField: 'value' })
const feature = (slug: string, meterConfig?: object) => ({ slug, title: slug, unitOfMeasure: 'units', ...(meterConfig ? { meterConfig } : {}) })

/** Every price type and tier mode, fees on item units and usage from ClickHouse. */
const catalog = {
  features: [
    feature('seats'),
    feature('bundles'),
    feature('vol-seats'),
    feature('grad-seats'),
    feature('api', sumMeter('api')),
    feature('tok-vol', sumMeter('tok-vol')),
    feature('tok-grad', sumMeter('tok-grad')),
    feature('pkg', sumMeter('pkg')),
    feature('calls', { eventSlug: 'calls', aggregationMethod: 'count' }),
    feature('peak', { eventSlug: 'peak', aggregationMethod: 'max', aggregationField: 'value' }),
  ],
  plans: [
    { slug: 'arrear', title: 'Arrear' },
    { slug: 'advance', title: 'Advance' },
  ],
  planVersions: [
    {
      plan: 'arrear',
      version: 1,
      status: 'published',
      title: 'Arrear',
      currency: 'USD',
      whenToBill: 'pay_in_arrear',
      gracePeriod: 7,
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'seats', featureType: 'flat', config: { price: '20' } },
        { featureSlug: 'bundles', featureType: 'package', config: { price: '5', units: 1000 } },
        { featureSlug: 'vol-seats', featureType: 'tier', config: { tierMode: 'volume', tiers } },
        { featureSlug: 'grad-seats', featureType: 'tier', config: { tierMode: 'graduated', tiers } },
        { featureSlug: 'api', featureType: 'usage', config: { usageMode: 'unit', price: '0.002' } },
        { featureSlug: 'tok-vol', featureType: 'usage', config: { usageMode: 'tier', tierMode: 'volume', tiers } },
        { featureSlug: 'tok-grad', featureType: 'usage', config: { usageMode: 'tier', tierMode: 'graduated', tiers } },
        { featureSlug: 'pkg', featureType: 'usage', config: { usageMode: 'package', price: '5', units: 1000 } },
        { featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' } },
        { featureSlug: 'peak', featureType: 'usage', config: { usageMode: 'unit', price: '0.02' } },
      ],
    },
    {
      plan: 'advance',
      version: 1,
      status: 'published',
      title: 'Advance',
      currency: 'USD',
      whenToBill: 'pay_in_advance',
      billingConfig: { billingInterval: 'month' },
      metadata: { includedCreditAmount: 500_000_000 },
      features: [
        { featureSlug: 'seats', featureType: 'flat', config: { price: '20' } },
        { featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' } },
      ],
    },
  ],
  customers: [{ id: 'acme' }, { id: 'globex' }, { id: 'initech' }],
  subscriptions: [
    {
      id: 'sub-acme',
      customerId: 'acme',
      phases: [
        {
          plan: 'arrear',
          version: 1,
          startAt: OCT,
          items: [
            { featureSlug: 'seats', units: 3 },
            { featureSlug: 'bundles', units: 2500 },
            { featureSlug: 'vol-seats', units: 10001 },
            { featureSlug: 'grad-seats', units: 25000 },
          ],
        },
      ],
    },
    { id: 'sub-globex', customerId: 'globex', phases: [{ plan: 'advance', version: 1, startAt: OCT, items: [{ featureSlug: 'seats', units: 3 }] }] },
    // One month of trial: October is included, November on.
    {
      id: 'sub-initech',
      customerId: 'initech',
      phases: [{ plan: 'advance', version: 1, startAt: OCT, trialUnits: 1, items: [{ featureSlug: 'seats', units: 2 }] }],
    },
  ],
}

describe.each([['server'], ['embedded']] as const)('invoices, ClickHouse store: %s', (kind) => {
  const suffix = randomBytes(6).toString('hex')
  const database = `test_${suffix}`
  let gw: TestGateway
  let dataDir: string
  let projectId: string
  let key: string
  let invoices: InvoiceService
  let seq = 0

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-invoices-'))
    gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: kind === 'server' ? inject('clickhouseUrl') : undefined,
        clickhouseDatabase: database,
        dataDir,
        journalIntervalMs: 0,
        invoiceIntervalMs: 0,
        events: { queueName: `test-invoices-${suffix}` },
      },
      OCT + HOUR_MS,
    )
    expect(gw.clickhouse?.kind).toBe(kind)
    ;({ projectId, apiKey: key } = await gw.project())
    // Other suites' gateways drain every outbox list into their own databases: hold this
    // project's claim (as a drainer would) until the test drains it itself.
    await gw.redis.set(claimKey(journalKey(projectId)), 'invoices-test', 'PX', 600_000)
    const applied = await gw.post('/v1/config/apply', catalog, key)
    expect(applied.status, JSON.stringify(applied.body)).toBe(200)
    invoices = gw.services.invoices
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  async function usage(customerId: string, slug: string, tsMs: number, value: string, project = projectId) {
    await insertEventsOnce(gw.clickhouse!, [
      {
        project_id: project,
        event_id: `e${++seq}`,
        customer_id: customerId,
        event_slug: slug,
        feature_slug: slug,
        value,
        properties: '{}',
        ts_ms: tsMs,
      },
    ])
  }

  async function read(invoiceId: string, apiKey = key) {
    const res = await gw.get(`/v1/invoices/get/${invoiceId}`, apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return res.body as { invoice: Record<string, any>; lines: Record<string, any>[] }
  }

  const byFeature = (lines: Record<string, any>[], kind: string) =>
    Object.fromEntries(lines.filter((l) => l.kind === kind).map((l) => [String(l.description).split(':')[0], l.amount]))

  const acmeOct = () => invoiceIdOf(projectId, 'acme', 'sub-acme', OCT)
  const acmeNov = () => invoiceIdOf(projectId, 'acme', 'sub-acme', NOV)

  test('nothing is invoiced before a cycle ends', async () => {
    const report = await invoices.closeDueCycles(projectId, NOV - 1)
    expect(report).toMatchObject({ projects: 1, subscriptions: 3, created: [], finalized: [], existing: 0, errors: [] })
    // Without a project: every project with a catalog (found by SCAN), here at a time before any cycle ends anywhere.
    const all = await invoices.closeDueCycles(undefined, 0)
    expect(all.projects).toBeGreaterThanOrEqual(1)
    expect(all).toMatchObject({ created: [], finalized: [], existing: 0 })
  })

  test('a closed cycle: one line per plan feature, every price type and tier mode to the last 10^-8; the GET shape', async () => {
    await usage('acme', 'api', OCT + 5 * HOUR_MS, '1234.56789012')
    await usage('acme', 'tok-vol', OCT + 6 * HOUR_MS, '10000')
    await usage('acme', 'tok-vol', OCT + 7 * HOUR_MS, '1')
    await usage('acme', 'tok-grad', OCT + 8 * HOUR_MS, '1000.5')
    await usage('acme', 'pkg', OCT + 9 * HOUR_MS, '2500.5')
    for (let i = 0; i < 3; i++) await usage('acme', 'calls', OCT + (10 + i) * HOUR_MS, '99')
    await usage('acme', 'peak', OCT + 11 * HOUR_MS, '0.00000025')
    await usage('acme', 'peak', OCT + 12 * HOUR_MS, '0.00000075')
    // November's usage and another customer's do not count in October.
    await usage('acme', 'api', NOV, '1000')
    await usage('globex', 'api', OCT + HOUR_MS, '1000')

    gw.clock.set(NOV + HOUR_MS)
    const report = await invoices.closeDueCycles(projectId, gw.clock())
    expect(report.errors).toEqual([])
    expect(report.created).toContain(acmeOct())

    const { invoice, lines } = await read(acmeOct())
    expect(
      Value.Check(InvoiceGetResponseSchema, { invoice, lines }),
      JSON.stringify([...Value.Errors(InvoiceGetResponseSchema, { invoice, lines })].slice(0, 3)),
    ).toBe(true)
    expect(lines.map((l) => l.kind)).toEqual(['fee', 'fee', 'fee', 'fee', 'usage', 'usage', 'usage', 'usage', 'usage', 'usage'])
    expect(byFeature(lines, 'fee')).toEqual({
      seats: 6000000000, // 3 × $20
      bundles: 1500000000, // 2,500 units → 3 packages × $5
      'vol-seats': 7000500000, // 10,001 × 0.005 + 20
      'grad-seats': 18200000000, // 10 + 72 + 5 + 75 + 20
    })
    expect(byFeature(lines, 'usage')).toEqual({
      api: 246913578, // 1,234.56789012 × 0.002 = 2.46913578024 → half to even
      'tok-vol': 7000500000, // 10,001 → 70.005
      'tok-grad': 1500400000, // 1,000.5 → 15.004
      pkg: 1500000000, // 2,500.5 → 3 packages
      calls: 3000000, // count 3 × $0.01
      peak: 2, // max 0.00000075 × 0.02 = 0.000000015 → half to even: 2
    })
    expect(lines.find((l) => l.description.startsWith('api'))!.quantity).toBe(1234.56789012)
    const gross = 6000000000 + 1500000000 + 7000500000 + 18200000000 + 246913578 + 7000500000 + 1500400000 + 1500000000 + 3000000 + 2
    expect(invoice).toMatchObject({
      id: acmeOct(),
      project_id: projectId,
      subscription_id: 'sub-acme',
      customer_id: 'acme',
      status: 'unpaid',
      currency: 'USD',
      statement_start_at: OCT,
      statement_end_at: NOV,
      issue_date: NOV + HOUR_MS,
      due_at: NOV + HOUR_MS,
      past_due_at: NOV + HOUR_MS + 7 * 86_400_000,
      sent_at: null,
      paid_at: null,
      gross_amount: gross,
      amount_due: gross,
      amount_paid: 0,
      amount_included: 0,
    })
    for (const l of lines) {
      expect(l).toMatchObject({
        settlement_source: 'provider',
        settlement_status: 'due',
        collectable: true,
        amount_due: l.amount,
        amount_paid: 0,
        wallet_credit_id: null,
        wallet_credit_source: null,
        wallet_id: null,
        currency: 'USD',
        created_at: new Date(NOV + HOUR_MS).toISOString(),
      })
    }
    expect(new Set(lines.map((l) => l.entry_id)).size).toBe(lines.length)
    // The provider boundary: amount_due rounded once to cents, half to even.
    const stored = JSON.parse((await gw.redis.hget(invoiceKey(projectId, acmeOct()), 'invoice'))!) as StoredInvoice
    expect(gross).toBe(42951313580) // $429.5131358
    expect(providerCharge(stored)).toEqual({ amountMinor: 42951n, currency: 'USD', exponent: 2 })
  })

  test('re-running a cycle, sequentially or from several workers at once, never duplicates an invoice or its lines', async () => {
    const before = await read(acmeOct())
    const journalBefore = await gw.redis.llen(journalKey(projectId))
    const others = [0, 1, 2].map(() => new InvoiceService(gw.redis, gw.clock, gw.clickhouse, undefined))
    const reports = await Promise.all([
      invoices.closeDueCycles(projectId, NOV + 2 * HOUR_MS),
      ...others.map((o) => o.closeDueCycles(projectId, NOV + 3 * HOUR_MS)),
    ])
    for (const r of reports) expect(r).toMatchObject({ created: [], finalized: [], errors: [] })
    expect(await read(acmeOct())).toEqual(before)
    expect(await gw.redis.llen(journalKey(projectId))).toBe(journalBefore)
  })

  test('concurrent closes of a fresh cycle create exactly one invoice', async () => {
    const { projectId: p2, apiKey: k2 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p2)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k2)).status).toBe(200)
    const workers = [0, 1, 2, 3].map(() => new InvoiceService(gw.redis, gw.clock, gw.clickhouse, undefined))
    const reports = await Promise.all(workers.map((w) => w.closeDueCycles(p2, NOV + HOUR_MS)))
    const created = reports.flatMap((r) => [...r.created, ...r.finalized])
    expect(created.sort()).toEqual(['acme', 'globex', 'initech'].map((c) => invoiceIdOf(p2, c, `sub-${c}`, OCT)).sort())
    const entries = await gw.redis.lrange(journalKey(p2), 0, -1)
    const ids = entries.map((e) => JSON.parse(e.split('\t')[1]!).movement_id as string)
    expect(new Set(ids).size).toBe(ids.length)
    expect(entries.filter((e) => e.startsWith('invoice_lines\t')).length).toBe(ids.length)
  })

  test('pay in advance: the first invoice bills the first and the next cycle; the included credit and wallet credits settle lines', async () => {
    const { projectId: p3, apiKey: k3 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p3)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k3)).status).toBe(200)
    const wallet = new WalletService(gw.redis, gw.clock)
    const withWallet = new InvoiceService(gw.redis, gw.clock, gw.clickhouse, wallet)
    const globex = (start: number) => invoiceIdOf(p3, 'globex', 'sub-globex', start)

    // October, no credits yet: October's seats (nothing billed them before) and November's in advance.
    expect((await withWallet.closeDueCycles(p3, NOV + HOUR_MS)).errors).toEqual([])
    const oct = await read(globex(OCT), k3)
    expect(oct.lines.filter((l) => l.kind === 'fee').map((l) => l.amount)).toEqual([6000000000, 6000000000])
    expect(oct.lines.filter((l) => l.kind === 'fee')[1]!.description).toContain('in advance')
    expect(oct.invoice).toMatchObject({ status: 'unpaid', amount_due: 12000000000 })

    const granted = await wallet.grant(p3, { customerId: 'globex', amount: 5_000_000_000n, source: 'promo', idempotencyKey: 'promo-1' })
    expect(granted.ok, JSON.stringify(granted)).toBe(true)
    const creditId = granted.ok ? granted.value.creditId : ''
    // November: 1,500 calls × $0.01 = $15, $5 of it the plan's included credit; December's seats in advance: $60.
    for (let i = 0; i < 3; i++) await usage('globex', 'calls', NOV + HOUR_MS + i, '1', p3)
    await gw.clickhouse!.exec(`INSERT INTO ${database}.usage_events (project_id, event_id, customer_id, event_slug, feature_slug, value, properties, ts_ms, inserted_at)
      SELECT ${sqlLiteral(p3)}, concat('bulk-', toString(number)), 'globex', 'calls', 'calls', toDecimal128('1', 8), '{}', ${NOV + 2 * HOUR_MS} + number, toDateTime(0, 'UTC') FROM system.numbers LIMIT 1497`)
    expect((await withWallet.closeDueCycles(p3, DEC + HOUR_MS)).errors).toEqual([])
    const nov = await read(globex(NOV), k3)
    expect(nov.lines.map((l) => [l.kind, l.amount, l.settlement_source, l.settlement_status, l.wallet_credit_id, l.quantity])).toEqual([
      // December's seats (in advance): $50 of the $60 paid by the promo credit, the rest due.
      ['fee', 5000000000, 'promo', 'paid', creditId, 3],
      ['fee', 1000000000, 'provider', 'due', null, 0],
      // November's calls: $5 included, $10 due.
      ['usage', 500000000, 'plan_included', 'included', null, 1500],
      ['usage', 1000000000, 'provider', 'due', null, 0],
    ])
    expect(nov.lines[0]).toMatchObject({ amount_paid: 5000000000, amount_due: 0, wallet_credit_source: 'promo', wallet_id: 'globex', collectable: false })
    expect(nov.lines[2]).toMatchObject({ amount_included: 500000000, amount_due: 0, collectable: false })
    expect(nov.invoice).toMatchObject({
      status: 'unpaid',
      gross_amount: 7500000000,
      amount_paid: 5000000000,
      amount_included: 500000000,
      amount_due: 2000000000,
    })

    // Re-running with the wallet applies nothing twice.
    await withWallet.closeDueCycles(p3, DEC + 2 * HOUR_MS)
    expect(await read(globex(NOV), k3)).toEqual(nov)

    // Enough cash covers a whole invoice: paid, paid_at set, nothing due.
    const topUp = await wallet.topUp(p3, { customerId: 'globex', amount: 100_000_000_000n, idempotencyKey: 'cash-1' })
    expect(topUp.ok, JSON.stringify(topUp)).toBe(true)
    await withWallet.closeDueCycles(p3, JAN + HOUR_MS)
    const dec = await read(globex(DEC), k3)
    expect(dec.invoice).toMatchObject({ status: 'paid', paid_at: JAN + HOUR_MS, amount_due: 0, gross_amount: 6000000000, amount_paid: 6000000000 })
    // Cash is no credit: no credit id or source, but the wallet that paid.
    expect(dec.lines.map((l) => [l.kind, l.settlement_source, l.settlement_status, l.wallet_credit_id, l.wallet_credit_source, l.wallet_id])).toEqual([
      ['fee', 'cash_wallet', 'paid', null, null, 'globex'],
      ['usage', 'provider', 'due', null, null, null],
    ])
    const balance = await wallet.balance(p3, 'globex')
    expect(balance.ok && balance.value.available.ledger_amount).toBe(100_000_000_000 - 6_000_000_000)
  })

  test('a late event for a closed cycle goes on the next invoice as an adjustment; the closed invoice never changes', async () => {
    const oct = await read(acmeOct())
    // Late: 9,999.5 more tokens in October (graduated 1,000.5 → 11,000) and one more call.
    await usage('acme', 'tok-grad', OCT + 20 * HOUR_MS, '9999.5')
    await usage('acme', 'calls', OCT + 21 * HOUR_MS, '1')
    await usage('acme', 'tok-grad', NOV + 3 * HOUR_MS, '10')
    const report = await invoices.closeDueCycles(projectId, DEC + HOUR_MS)
    expect(report.errors).toEqual([])
    expect(await read(acmeOct())).toEqual(oct)
    const nov = await read(acmeNov())
    const adjustments = nov.lines.filter((l) => l.kind === 'adjustment')
    expect(adjustments.map((l) => [l.description.split(':')[0], l.quantity, l.amount])).toEqual([
      // 11,000 graduated = 10 + 72 + 5 + 5 + 20 = 112; billed 15.004 → 96.996
      ['tok-grad', 9999.5, 9699600000],
      ['calls', 1, 1000000],
    ])
    expect(byFeature(nov.lines, 'usage')).toMatchObject({ api: 200000000, 'tok-grad': 10000000 })
    expect(nov.invoice.statement_start_at).toBe(NOV)

    // Another late event in October after November closed: on December's invoice, rated against what was billed so far.
    await usage('acme', 'tok-grad', OCT + 22 * HOUR_MS, '1000')
    await invoices.closeDueCycles(projectId, JAN + HOUR_MS)
    const dec = await read(invoiceIdOf(projectId, 'acme', 'sub-acme', DEC))
    // 12,000 graduated = 117 vs 112 billed → 5
    expect(dec.lines.filter((l) => l.kind === 'adjustment').map((l) => [l.description.split(':')[0], l.quantity, l.amount])).toEqual([
      ['tok-grad', 1000, 500000000],
    ])
    // Billed once: January's invoice has no adjustment; and October is past the late-usage window (35 days) by then.
    await usage('acme', 'tok-grad', OCT + 23 * HOUR_MS, '1000')
    await invoices.closeDueCycles(projectId, Date.UTC(2027, 1, 1) + HOUR_MS)
    const jan = await read(invoiceIdOf(projectId, 'acme', 'sub-acme', JAN))
    expect(jan.lines.filter((l) => l.kind === 'adjustment')).toEqual([])
  })

  test('the lines are pushed onto the outbox with the invoice and reach ClickHouse through the journal drain', async () => {
    const list = journalKey(projectId)
    const entries = await gw.redis.lrange(list, 0, -1)
    const rows = entries.filter((e) => e.startsWith('invoice_lines\t')).map((e) => JSON.parse(e.split('\t')[1]!))
    const { lines } = await read(acmeOct())
    const mine = rows.filter((r) => r.invoice_id === acmeOct())
    expect(mine.map((r) => r.movement_id)).toEqual(lines.map((l) => l.entry_id))
    expect(mine.map((r) => r.amount)).toEqual(lines.map((l) => String(l.amount)))
    await gw.redis.del(claimKey(list))
    const drained = await drainJournal({ redis: gw.redis, store: gw.clickhouse!, match: list })
    expect(drained.failed).toBe(0)
    expect(drained.deadLettered).toBe(0)
    const stored = await gw.clickhouse!.query<{ n: string; total: string }>(
      `SELECT toString(count()) AS n, toString(sum(toDecimal128(amount, 0))) AS total FROM ${database}.invoice_lines FINAL
       WHERE project_id = ${sqlLiteral(projectId)} AND invoice_id = ${sqlLiteral(acmeOct())}`,
    )
    expect(stored[0]!.n).toBe(String(lines.length))
    expect(canonicalDecimal(stored[0]!.total)).toBe(String(lines.reduce((s, l) => s + BigInt(l.amount), 0n)))
    const all = await gw.clickhouse!.query<{ n: string }>(
      `SELECT toString(count()) AS n FROM ${database}.invoice_lines FINAL WHERE project_id = ${sqlLiteral(projectId)}`,
    )
    expect(Number(all[0]!.n)).toBe(rows.length)
  })

  test("a trial cycle: its own fee and usage are included (trial); the next cycle's fee, billed in advance, is due", async () => {
    const oct = await read(invoiceIdOf(projectId, 'initech', 'sub-initech', OCT))
    expect(oct.lines.map((l) => [l.kind, l.amount, l.settlement_source, l.settlement_status, l.amount_included, l.amount_due])).toEqual([
      ['fee', 4000000000, 'trial', 'included', 4000000000, 0], // October's 2 seats: trial
      ['fee', 4000000000, 'provider', 'due', 0, 4000000000], // November's, in advance: after the trial
      ['usage', 0, 'trial', 'included', 0, 0],
    ])
    expect(oct.invoice).toMatchObject({ status: 'unpaid', gross_amount: 8000000000, amount_included: 4000000000, amount_due: 4000000000 })
    // November, after the trial: no fee of its own (December's in advance), nothing included.
    const nov = await read(invoiceIdOf(projectId, 'initech', 'sub-initech', NOV))
    expect(nov.lines.map((l) => [l.kind, l.amount, l.settlement_source])).toEqual([
      ['fee', 4000000000, 'provider'],
      ['usage', 0, 'provider'],
    ])
  })

  test('a close that fails after the draft (the wallet down) leaves a draft; the next run finalizes that draft, applying credits once', async () => {
    const { projectId: p5, apiKey: k5 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p5)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k5)).status).toBe(200)
    const wallet = new WalletService(gw.redis, gw.clock)
    expect((await wallet.grant(p5, { customerId: 'globex', amount: 1_000_000_000n, source: 'promo', idempotencyKey: 'p' })).ok).toBe(true)
    const down = new InvoiceService(gw.redis, gw.clock, gw.clickhouse, { applyToInvoice: () => Promise.reject(new Error('wallet down')) })
    const failed = await down.closeDueCycles(p5, NOV + HOUR_MS)
    expect(failed.errors.map((e) => [e.subscriptionId, e.message])).toEqual([
      ['sub-acme', 'wallet down'],
      ['sub-globex', 'wallet down'],
      ['sub-initech', 'wallet down'],
    ])
    const id = invoiceIdOf(p5, 'globex', 'sub-globex', OCT)
    const draft = await read(id, k5)
    // Readable meanwhile: a draft, its totals before the wallet.
    expect(draft.invoice).toMatchObject({ status: 'draft', gross_amount: 12000000000, amount_due: 12000000000, amount_paid: 0 })
    expect((await gw.redis.lrange(journalKey(p5), 0, -1)).filter((e) => e.startsWith('invoice_lines\t'))).toEqual([])

    const up = new InvoiceService(gw.redis, gw.clock, gw.clickhouse, wallet)
    const [a, b] = await Promise.all([up.closeDueCycles(p5, NOV + 2 * HOUR_MS), up.closeDueCycles(p5, NOV + 2 * HOUR_MS)])
    expect([...a.finalized, ...b.finalized].sort()).toEqual(['acme', 'globex', 'initech'].map((c) => invoiceIdOf(p5, c, `sub-${c}`, OCT)).sort())
    const final = await read(id, k5)
    // Issued when first drafted; $10 of promo credit applied once.
    expect(final.invoice).toMatchObject({ status: 'unpaid', issue_date: NOV + HOUR_MS, amount_paid: 1000000000, amount_due: 11000000000 })
    const balance = await wallet.balance(p5, 'globex')
    expect(balance.ok && balance.value.credits.reduce((s, c) => s + BigInt(c.available.ledger_amount), 0n)).toBe(0n)
  })

  test('the worker closes due cycles on its interval at the injected clock', async () => {
    const { projectId: p4, apiKey: k4 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p4)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k4)).status).toBe(200)
    const { startInvoiceWorker } = await import('../../src/workers/invoices.js')
    const reports: unknown[] = []
    gw.clock.set(NOV + HOUR_MS)
    const worker = startInvoiceWorker({ invoices, clock: gw.clock, logger: gw.logger, intervalMs: 10, projectId: p4, onRun: (r) => reports.push(r) })
    try {
      await waitFor('two runs of the worker', () => reports.length >= 2, 10_000, { intervalMs: 10 })
      expect(reports[0]).toMatchObject({ projects: 1, errors: [] })
      expect((reports[0] as { created: string[] }).created.sort()).toEqual(['acme', 'globex', 'initech'].map((c) => invoiceIdOf(p4, c, `sub-${c}`, OCT)).sort())
      // The next run starts from each subscription's cursor: November has not ended.
      expect(reports[1]).toMatchObject({ created: [], finalized: [], existing: 0, errors: [] })
      expect((await worker.runNow()).created).toEqual([])
    } finally {
      await worker.close()
    }
  })

  test('POST /v1/invoices/close closes the ended cycles now and answers the ids to read; again, it creates nothing', async () => {
    const { projectId: p7, apiKey: k7 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p7)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k7)).status).toBe(200)
    gw.clock.set(NOV - 1)
    expect((await gw.post('/v1/invoices/close', {}, k7)).body).toEqual({ created: [], finalized: [], existing: 0, errors: [] })
    gw.clock.set(NOV + HOUR_MS)
    const acme = await gw.post('/v1/invoices/close', { customerId: 'acme' }, k7)
    expect(acme.body.created).toEqual([invoiceIdOf(p7, 'acme', 'sub-acme', OCT)])
    const closed = await gw.post('/v1/invoices/close', {}, k7)
    expect(closed.status).toBe(200)
    const ids = ['globex', 'initech'].map((c) => invoiceIdOf(p7, c, `sub-${c}`, OCT)).sort()
    expect([...closed.body.created].sort()).toEqual(ids)
    const read = await gw.get(`/v1/invoices/get/${ids[0]}`, k7)
    expect([read.status, read.body.invoice.id]).toEqual([200, ids[0]])
    expect((await gw.post('/v1/invoices/close', {}, k7)).body).toEqual({ created: [], finalized: [], existing: 0, errors: [] })
    expect((await gw.post('/v1/invoices/close', { customerId: 'acme', asOf: 1 }, k7)).status).toBe(400)
  })

  test('usage recorded over HTTP and drained by the ingest worker is what the invoice rates (count and sum meters, a late event)', async () => {
    const { projectId: p6, apiKey: k6 } = await gw.project()
    await gw.redis.set(claimKey(journalKey(p6)), 'invoices-test', 'PX', 600_000)
    expect((await gw.post('/v1/config/apply', catalog, k6)).status).toBe(200)
    const record = async (eventSlug: string, timestamp: number, id: string, value?: string) => {
      const res = await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug, id, timestamp, ...(value ? { properties: { value } } : {}) }, k6)
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { accepted: true } })
    }
    gw.clock.set(OCT + 10 * HOUR_MS)
    await record('api', OCT + 2 * HOUR_MS, 'a1', '1000.5')
    await record('api', OCT + 3 * HOUR_MS, 'a2', '499.5')
    await record('api', OCT + 3 * HOUR_MS, 'a2', '499.5') // a retry: counted once
    for (let i = 0; i < 4; i++) await record('calls', OCT + 4 * HOUR_MS, `c${i}`)
    await untilQueuesIdle(gw.redis, [`test-invoices-${suffix}`])
    gw.clock.set(NOV + HOUR_MS)
    expect((await invoices.closeDueCycles(p6, NOV + HOUR_MS)).errors).toEqual([])
    const oct = await read(invoiceIdOf(p6, 'acme', 'sub-acme', OCT), k6)
    expect(byFeature(oct.lines, 'usage')).toMatchObject({ api: 300000000, calls: 4000000 }) // 1,500 × $0.002; 4 × $0.01
    // A late call for October, recorded in November: on November's invoice.
    await record('calls', OCT + 5 * HOUR_MS, 'late-1')
    await untilQueuesIdle(gw.redis, [`test-invoices-${suffix}`])
    expect((await invoices.closeDueCycles(p6, DEC + HOUR_MS)).errors).toEqual([])
    const nov = await read(invoiceIdOf(p6, 'acme', 'sub-acme', NOV), k6)
    expect(nov.lines.filter((l) => l.kind === 'adjustment').map((l) => [l.description.split(':')[0], l.quantity, l.amount])).toEqual([['calls', 1, 1000000]])
    expect(await read(invoiceIdOf(p6, 'acme', 'sub-acme', OCT), k6)).toEqual(oct)
  })

  test("GET: 404 for an unknown invoice and for another project's", async () => {
    expectError(await gw.get('/v1/invoices/get/inv_000000000000000000000000', key), 404, 'NOT_FOUND', 'https://docs.metering.dev')
    const other = await gw.project()
    expectError(await gw.get(`/v1/invoices/get/${acmeOct()}`, other.apiKey), 404, 'NOT_FOUND', 'https://docs.metering.dev')
  })
})
