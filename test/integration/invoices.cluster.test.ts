// Invoices on the 3-master Redis Cluster: the draft and finalize scripts touch keys of one hash
// tag (the project's), together with the wallet's, so a cycle closes unchanged on a Cluster; the
// list reads the invoice indexes (same tag) and the one-time reindex SCANs every master.
// No ClickHouse here: the plan has fees only (usage would read as 0 without a store).
import { afterAll, expect, test } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { journalKey } from '../../src/invoices/keys.js'
import { readInvoice } from '../../src/invoices/redis.js'
import { InvoiceService, invoiceIdOf } from '../../src/invoices/service.js'
import { WalletService } from '../../src/wallet/service.js'
import { testCluster, uniquePrefix } from '../support/redis.js'

const cluster = testCluster()
afterAll(() => cluster.quit())

test('a cycle closes on a Redis Cluster: one invoice, credits applied, lines journaled; a re-run changes nothing', async () => {
  const start = Date.UTC(2026, 0, 1)
  const clock = manualClock(start)
  const project = uniquePrefix()
  const catalog = new CatalogService(cluster, clock, new BudgetService(cluster, clock))
  const applied = await catalog.apply(
    project,
    {
      features: [{ slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' }],
      plans: [{ slug: 'team', title: 'Team' }],
      planVersions: [
        {
          plan: 'team',
          version: 1,
          status: 'published',
          title: 'Team',
          currency: 'USD',
          whenToBill: 'pay_in_arrear',
          billingConfig: { billingInterval: 'week' },
          features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '12.5' } }],
        },
      ],
      customers: [{ id: 'acme' }],
      subscriptions: [{ id: 'sub-1', customerId: 'acme', phases: [{ plan: 'team', version: 1, startAt: start, items: [{ featureSlug: 'seats', units: 4 }] }] }],
    },
    'test',
  )
  expect(applied.ok, JSON.stringify(applied)).toBe(true)
  const wallet = new WalletService(cluster, clock)
  expect((await wallet.grant(project, { customerId: 'acme', amount: 2_000_000_000n, source: 'promo', idempotencyKey: 'g' })).ok).toBe(true)

  const invoices = new InvoiceService(cluster, clock, undefined, wallet)
  const week = 7 * 86_400_000
  const report = await invoices.closeDueCycles(project, start + 2 * week)
  expect(report.errors).toEqual([])
  const ids = [0, 1].map((k) => invoiceIdOf(project, 'acme', 'sub-1', start + k * week))
  expect(report.created).toEqual(ids)
  const first = await readInvoice(cluster, project, ids[0]!)
  // 4 × $12.50 = $50: $20 promo, $30 due.
  expect(first?.invoice).toMatchObject({ status: 'unpaid', gross_amount: '5000000000', amount_paid: '2000000000', amount_due: '3000000000' })
  expect(first?.lines.map((l) => [l.settlement_source, l.amount])).toEqual([
    ['promo', '2000000000'],
    ['provider', '3000000000'],
  ])
  const second = await readInvoice(cluster, project, ids[1]!)
  expect(second?.invoice).toMatchObject({ amount_paid: '0', amount_due: '5000000000' })
  const journal = (await cluster.lrange(journalKey(project), 0, -1)).filter((e) => e.startsWith('invoice_lines\t'))
  expect(journal).toHaveLength(3)

  expect(await invoices.closeDueCycles(project, start + 2 * week + 1)).toMatchObject({ created: [], finalized: [], errors: [] })
  expect((await cluster.lrange(journalKey(project), 0, -1)).filter((e) => e.startsWith('invoice_lines\t'))).toEqual(journal)
})

test('the list reads the invoice indexes on a Cluster: newest first, filtered, a page at a time', async () => {
  const start = Date.UTC(2026, 0, 1)
  const clock = manualClock(start)
  const project = uniquePrefix()
  const catalog = new CatalogService(cluster, clock, new BudgetService(cluster, clock))
  const applied = await catalog.apply(
    project,
    {
      features: [{ slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' }],
      plans: [{ slug: 'team', title: 'Team' }],
      planVersions: [
        {
          plan: 'team',
          version: 1,
          status: 'published',
          title: 'Team',
          currency: 'USD',
          whenToBill: 'pay_in_arrear',
          billingConfig: { billingInterval: 'week' },
          features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '1' } }],
        },
      ],
      customers: [{ id: 'acme' }, { id: 'globex' }],
      subscriptions: ['acme', 'globex'].map((c) => ({ id: `sub-${c}`, customerId: c, phases: [{ plan: 'team', version: 1, startAt: start }] })),
    },
    'test',
  )
  expect(applied.ok, JSON.stringify(applied)).toBe(true)
  const invoices = new InvoiceService(cluster, clock, undefined, undefined)
  const week = 7 * 86_400_000
  expect((await invoices.closeDueCycles(project, start + 3 * week)).created).toHaveLength(6)
  const page = async (query: Parameters<InvoiceService['list']>[1]) => {
    const listed = await invoices.list(project, query)
    if (!listed.ok) throw new Error(JSON.stringify(listed))
    return listed.value
  }
  const acme = (k: number) => invoiceIdOf(project, 'acme', 'sub-acme', start + k * week)
  const first = await page({ customerId: 'acme', limit: 2 })
  expect(first.invoices.map((i) => i.id)).toEqual([acme(2), acme(1)])
  const second = await page({ customerId: 'acme', limit: 2, cursor: first.nextCursor! })
  expect(second).toEqual({ invoices: [expect.objectContaining({ id: acme(0), sent_at: null, paid_at: null })], nextCursor: null })
  expect((await page({ limit: 10, statementFrom: start + 2 * week })).invoices.map((i) => i.customer_id).sort()).toEqual(['acme', 'globex'])
})
