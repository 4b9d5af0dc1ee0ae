// POST /v1/invoices/list: invoices closed by the worker (or /v1/invoices/close) are found, newest
// first, filtered by customer, status and statement period, a page at a time with a cursor that
// stays put while new invoices arrive; bad input is the 400 envelope; another project's invoices
// never show. Real Redis; no ClickHouse (usage reads as 0, so each invoice is its seat fee).
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { customerInvoiceIndexKey, INVOICE_REINDEX_KEY, invoiceIndexKey } from '../../src/invoices/keys.js'
import { MAX_EXAMINED } from '../../src/invoices/list.js'
import { InvoiceListResponseSchema } from '../../src/invoices/schemas.js'
import { InvoiceService, invoiceIdOf } from '../../src/invoices/service.js'
import { startInvoiceWorker } from '../../src/workers/invoices.js'
import { expectError } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'

const OCT = Date.UTC(2026, 9, 1)
const NOV = Date.UTC(2026, 10, 1)
const DEC = Date.UTC(2026, 11, 1)
const JAN = Date.UTC(2027, 0, 1)
const FEB = Date.UTC(2027, 1, 1)
const HOUR_MS = 3_600_000
const DOCS = 'https://docs.metering.dev'
const CUSTOMERS = ['acme', 'globex', 'initech']

/** Three customers on a $10 monthly seat, billed in arrear, from October. */
const catalog = {
  features: [{ slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' }],
  plans: [{ slug: 'basic', title: 'Basic' }],
  planVersions: [
    {
      plan: 'basic',
      version: 1,
      status: 'published',
      title: 'Basic',
      currency: 'USD',
      whenToBill: 'pay_in_arrear',
      billingConfig: { billingInterval: 'month' },
      features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '10' } }],
    },
  ],
  customers: CUSTOMERS.map((id) => ({ id })),
  subscriptions: CUSTOMERS.map((c) => ({ id: `sub-${c}`, customerId: c, phases: [{ plan: 'basic', version: 1, startAt: OCT }] })),
}

type Listed = { id: string; customer_id: string; status: string; issue_date: number; statement_start_at: number; sent_at: unknown; paid_at: unknown }

let gw: TestGateway

beforeAll(async () => {
  gw = await startTestGateway({}, OCT + HOUR_MS)
})
afterAll(async () => {
  await gw?.close()
})

async function project(): Promise<{ projectId: string; key: string }> {
  const { projectId, apiKey } = await gw.project()
  const applied = await gw.post('/v1/config/apply', catalog, apiKey)
  expect(applied.status, JSON.stringify(applied.body)).toBe(200)
  return { projectId, key: apiKey }
}

async function list(key: string, body: object): Promise<{ invoices: Listed[]; nextCursor: string | null }> {
  const res = await gw.post('/v1/invoices/list', body, key)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(Value.Check(InvoiceListResponseSchema, res.body), JSON.stringify([...Value.Errors(InvoiceListResponseSchema, res.body)].slice(0, 3))).toBe(true)
  return res.body
}

/** Every page of a listing, following nextCursor. */
async function allPages(key: string, body: object): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = []
  let cursor: string | null | undefined
  let pages = 0
  do {
    const page = await list(key, cursor ? { ...body, cursor } : body)
    ids.push(...page.invoices.map((i) => i.id))
    cursor = page.nextCursor
    pages++
  } while (cursor && pages < 100)
  return { ids, pages }
}

/** Newest first: issue date, then cycle start, then id, all descending. */
const newestFirst = (a: Listed, b: Listed) =>
  b.issue_date - a.issue_date || b.statement_start_at - a.statement_start_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

const idsOf = (projectId: string, start: number, customers = CUSTOMERS) => customers.map((c) => invoiceIdOf(projectId, c, `sub-${c}`, start))

describe('POST /v1/invoices/list', () => {
  let a: { projectId: string; key: string }

  beforeAll(async () => {
    a = await project()
    // globex has cash in its wallet: its invoices are paid at close, the others' unpaid.
    const topUp = await gw.post('/v1/wallet/top-up', { customerId: 'globex', amount: '100', idempotencyKey: 'cash' }, a.key)
    expect(topUp.status, JSON.stringify(topUp.body)).toBe(200)
  })

  test('invoices the worker closed are listed, newest first, as GET answers them; /v1/invoices/close then has nothing to create', async () => {
    gw.clock.set(NOV + HOUR_MS)
    const reports: { created: string[] }[] = []
    const worker = startInvoiceWorker({
      invoices: gw.services.invoices,
      clock: gw.clock,
      logger: gw.logger,
      intervalMs: 10,
      projectId: a.projectId,
      onRun: (r) => reports.push(r),
    })
    try {
      await waitFor('a run of the invoice worker', () => reports.length >= 1, 20_000, { intervalMs: 10 })
      expect(reports[0]!.created.sort()).toEqual(idsOf(a.projectId, OCT).sort())
      // What the issue reported: after the worker, close creates nothing, so its answer names no invoice.
      expect((await gw.post('/v1/invoices/close', {}, a.key)).body).toEqual({ created: [], finalized: [], existing: 0, errors: [] })
      const october = await list(a.key, {})
      expect(october.invoices.map((i) => i.id).sort()).toEqual(idsOf(a.projectId, OCT).sort())
      expect(october.nextCursor).toBeNull()

      gw.clock.set(DEC + HOUR_MS)
      expect((await worker.runNow()).created.sort()).toEqual(idsOf(a.projectId, NOV).sort())
    } finally {
      await worker.close()
    }
    const all = await list(a.key, {})
    expect(all.invoices).toHaveLength(6)
    expect(all.invoices.map((i) => i.id)).toEqual([...all.invoices].sort(newestFirst).map((i) => i.id))
    // November's, issued in December, come first.
    expect(
      all.invoices
        .slice(0, 3)
        .map((i) => i.id)
        .sort(),
    ).toEqual(idsOf(a.projectId, NOV).sort())
    for (const invoice of all.invoices) {
      const got = await gw.get(`/v1/invoices/get/${invoice.id}`, a.key)
      expect(got.body.invoice).toEqual(invoice)
      // No placeholders: not handed to a provider; paid_at only once paid.
      expect(invoice.sent_at).toBeNull()
      expect(invoice.paid_at).toBe(invoice.status === 'paid' ? invoice.issue_date : null)
    }
    expect(all.invoices.filter((i) => i.status === 'paid').map((i) => i.customer_id)).toEqual(['globex', 'globex'])
  })

  test('filters: customer, status, statement period, and all at once', async () => {
    const ids = async (body: object) => (await list(a.key, body)).invoices.map((i) => i.id)
    expect(await ids({ customerId: 'acme' })).toEqual([invoiceIdOf(a.projectId, 'acme', 'sub-acme', NOV), invoiceIdOf(a.projectId, 'acme', 'sub-acme', OCT)])
    expect((await ids({ status: 'paid' })).sort()).toEqual(
      idsOf(a.projectId, NOV, ['globex'])
        .concat(idsOf(a.projectId, OCT, ['globex']))
        .sort(),
    )
    expect((await ids({ status: 'unpaid' })).sort()).toEqual(
      [...idsOf(a.projectId, OCT, ['acme', 'initech']), ...idsOf(a.projectId, NOV, ['acme', 'initech'])].sort(),
    )
    expect(await ids({ status: 'draft' })).toEqual([])
    expect((await ids({ statementFrom: NOV })).sort()).toEqual(idsOf(a.projectId, NOV).sort())
    expect((await ids({ statementTo: NOV })).sort()).toEqual(idsOf(a.projectId, OCT).sort())
    expect((await ids({ statementFrom: OCT, statementTo: OCT + 1 })).sort()).toEqual(idsOf(a.projectId, OCT).sort())
    expect(await ids({ statementFrom: DEC })).toEqual([])
    expect(await ids({ customerId: 'initech', status: 'unpaid', statementFrom: NOV, statementTo: DEC })).toEqual(idsOf(a.projectId, NOV, ['initech']))
    expect(await ids({ customerId: 'globex', status: 'unpaid' })).toEqual([])
    expect(await ids({ customerId: 'nobody' })).toEqual([])
  })

  test('a backlog closed at once is ordered by cycle; pages stay put while new invoices arrive', async () => {
    const c = await project()
    // October to December closed in one run: one issue date, ordered by cycle start, then id.
    expect((await gw.services.invoices.closeDueCycles(c.projectId, JAN + HOUR_MS)).created).toHaveLength(9)
    const everything = (await list(c.key, { limit: 100 })).invoices
    expect(everything.map((i) => i.id)).toEqual([...everything].sort(newestFirst).map((i) => i.id))
    expect(everything.map((i) => i.statement_start_at)).toEqual([DEC, DEC, DEC, NOV, NOV, NOV, OCT, OCT, OCT])
    const before = everything.map((i) => i.id)

    const first = await list(c.key, { limit: 2 })
    expect(first.invoices.map((i) => i.id)).toEqual(before.slice(0, 2))
    expect(first.nextCursor).toEqual(expect.any(String))
    // January's cycles close while the client pages: newer than every page it already has.
    expect((await gw.services.invoices.closeDueCycles(c.projectId, FEB + HOUR_MS)).created).toHaveLength(3)
    const rest = await allPages(c.key, { limit: 2, cursor: first.nextCursor })
    expect([...first.invoices.map((i) => i.id), ...rest.ids]).toEqual(before)
    expect(rest.pages).toBe(4) // 2 + 2 + 2 + 1: the last page says so (nextCursor null)

    const now = await allPages(c.key, { limit: 5 })
    expect(now.ids).toEqual([...idsOf(c.projectId, JAN).sort().reverse(), ...before])
    expect(new Set(now.ids).size).toBe(12)
    // One customer, one invoice per page.
    const acme = await allPages(c.key, { customerId: 'acme', limit: 1 })
    expect(acme.ids).toEqual([JAN, DEC, NOV, OCT].map((start) => invoiceIdOf(c.projectId, 'acme', 'sub-acme', start)))
    // A filter that skips most: every match, over short pages.
    const paid = await allPages(c.key, { status: 'unpaid', customerId: 'initech', statementTo: NOV, limit: 3 })
    expect(paid.ids).toEqual([invoiceIdOf(c.projectId, 'initech', 'sub-initech', OCT)])
  })

  test('bad input is the 400 envelope', async () => {
    const bad = async (body: unknown, path?: string) => {
      const res = await gw.post('/v1/invoices/list', body, a.key)
      expectError(res, 400, 'BAD_REQUEST', DOCS)
      if (path) expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain(path)
    }
    await bad({ limit: 0 }, '$.limit')
    await bad({ limit: 101 }, '$.limit')
    await bad({ limit: 2.5 }, '$.limit')
    await bad({ status: 'open' }, '$.status')
    await bad({ customerId: '' }, '$.customerId')
    await bad({ statementFrom: -1 }, '$.statementFrom')
    await bad({ page: 2 })
    await bad('{"limit":')
    await bad({ cursor: 'not a cursor!' }, '$.cursor')
    await bad({ cursor: Buffer.from('000000000000001:000000000000002:inv_x').toString('base64url') }, '$.cursor')
    await bad({ statementFrom: DEC, statementTo: NOV }, '$.statementTo')
    await bad({ statementFrom: NOV, statementTo: NOV }, '$.statementTo')
  })

  test("another project's invoices never show, whatever the filters or the cursor", async () => {
    const b = await project()
    expect((await gw.services.invoices.closeDueCycles(b.projectId, NOV + HOUR_MS)).created).toHaveLength(3)
    const mine = (await list(a.key, { limit: 100 })).invoices.map((i) => i.id)
    for (const id of idsOf(b.projectId, OCT)) expect(mine).not.toContain(id)
    expect((await list(b.key, { limit: 100 })).invoices.map((i) => i.id).sort()).toEqual(idsOf(b.projectId, OCT).sort())
    // Same customer ids in both projects: only the key's project's.
    expect((await list(b.key, { customerId: 'acme' })).invoices.map((i) => i.id)).toEqual(idsOf(b.projectId, OCT, ['acme']))
    // A cursor is only a position in the order: in project b it lists b's invoices older than it.
    const firstOfA = await list(a.key, { limit: 1 })
    const fromA = await list(b.key, { cursor: firstOfA.nextCursor })
    for (const invoice of fromA.invoices) expect(invoice.id.startsWith('inv_') && idsOf(b.projectId, OCT).includes(invoice.id)).toBe(true)
  })

  test('invoices drafted before the indexes existed are listed: a one-time reindex adds them', async () => {
    const d = await project()
    expect((await gw.services.invoices.closeDueCycles(d.projectId, NOV + HOUR_MS)).created).toHaveLength(3)
    // As a Redis written by an older version: no index, and the reindex never run.
    await gw.redis.del(invoiceIndexKey(d.projectId), ...CUSTOMERS.map((c) => customerInvoiceIndexKey(d.projectId, c)), INVOICE_REINDEX_KEY)
    const fresh = new InvoiceService(gw.redis, gw.clock, undefined, undefined)
    const listed = await fresh.list(d.projectId, { limit: 20 })
    expect(listed.ok && listed.value.invoices.map((i) => i.id).sort()).toEqual(idsOf(d.projectId, OCT).sort())
    expect(await gw.redis.exists(INVOICE_REINDEX_KEY)).toBe(1)
    expect((await list(d.key, { customerId: 'globex' })).invoices.map((i) => i.id)).toEqual(idsOf(d.projectId, OCT, ['globex']))
  })

  test('a filter that matches little answers short pages with a cursor: at most MAX_EXAMINED invoices are read per request', async () => {
    const { projectId, apiKey } = await gw.project()
    const minutes = {
      ...catalog,
      planVersions: [{ ...catalog.planVersions[0]!, billingConfig: { billingInterval: 'minute' } }],
      customers: [{ id: 'acme' }],
      subscriptions: [{ id: 'sub-acme', customerId: 'acme', phases: [{ plan: 'basic', version: 1, startAt: OCT }] }],
    }
    expect((await gw.post('/v1/config/apply', minutes, apiKey)).status).toBe(200)
    const cycles = MAX_EXAMINED + 10
    const closer = new InvoiceService(gw.redis, gw.clock, undefined, undefined, { maxCyclesPerRun: cycles })
    expect((await closer.closeDueCycles(projectId, OCT + cycles * 60_000)).created).toHaveLength(cycles)
    // Only the oldest cycle matches: the first page reads MAX_EXAMINED entries and finds nothing.
    const first = await list(apiKey, { statementTo: OCT + 1 })
    expect(first).toEqual({ invoices: [], nextCursor: expect.any(String) })
    const second = await list(apiKey, { statementTo: OCT + 1, cursor: first.nextCursor })
    expect(second.invoices.map((i) => i.id)).toEqual([invoiceIdOf(projectId, 'acme', 'sub-acme', OCT)])
    expect(second.nextCursor).toBeNull()
    expect((await allPages(apiKey, { limit: 100 })).ids).toHaveLength(cycles)
  }, 120_000)
})
