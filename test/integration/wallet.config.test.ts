// Credits in the config document (src/wallet/README.md, "Credits in the config document"):
// granted once by id after the catalog, checked with the catalog's problems and JSON paths first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectIssue } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

const DOCS = 'https://docs.metering.dev'
let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({ docsUrl: DOCS }, Date.UTC(2025, 2, 12, 10))
})
afterAll(async () => {
  await gw?.close()
})

describe('credits in the config document', () => {
  it('are granted once by id, after the catalog; a dry run grants nothing', async () => {
    const { apiKey } = await gw.project()
    const expiresAt = gw.clock() + 86_400_000
    const doc = {
      customers: [{ id: 'acme', name: 'Acme' }],
      credits: [
        { id: 'launch-acme', customerId: 'acme', amount: '25', priority: 80, expiresAt },
        { id: 'sorry-acme', customerId: 'acme', amount: '5', source: 'goodwill' },
      ],
    }
    const dry = await gw.post('/v1/config/apply', { ...doc, dryRun: true }, apiKey)
    expect([dry.status, dry.body.summary.credits]).toEqual([200, { created: ['launch-acme', 'sorry-acme'], updated: [], unchanged: [] }])
    expect((await gw.get('/v1/wallet/balance?customerId=acme', apiKey)).body.available.amount).toBe('0')

    const applied = await gw.post('/v1/config/apply', doc, apiKey)
    expect([applied.status, applied.body.summary.credits, applied.body.summary.customers.created]).toEqual([
      200,
      { created: ['launch-acme', 'sorry-acme'], updated: [], unchanged: [] },
      ['acme'],
    ])
    const again = await gw.post('/v1/config/apply', doc, apiKey)
    expect([again.status, again.body.summary.credits]).toEqual([200, { created: [], updated: [], unchanged: ['launch-acme', 'sorry-acme'] }])
    const b = (await gw.get('/v1/wallet/balance?customerId=acme', apiKey)).body
    expect(b.available.amount).toBe('30')
    expect(b.credits.map((c: any) => [c.source, c.priority, c.issued.amount, c.expires_at])).toEqual([
      ['promo', 80, '25', new Date(expiresAt).toISOString()],
      ['goodwill', 50, '5', null],
    ])
    // A document without credits answers as before (no summary.credits).
    const plain = await gw.post('/v1/config/apply', { customers: [{ id: 'acme', name: 'Acme' }] }, apiKey)
    expect([plain.status, 'credits' in plain.body.summary]).toEqual([200, false])
  })

  it('problems come back with their paths, and nothing is applied', async () => {
    const { apiKey } = await gw.project()
    expect((await gw.post('/v1/config/apply', { customers: [{ id: 'acme' }], credits: [{ id: 'c1', customerId: 'acme', amount: '1' }] }, apiKey)).status).toBe(
      200,
    )
    const changed = await gw.post('/v1/config/apply', { credits: [{ id: 'c1', customerId: 'acme', amount: '2' }] }, apiKey)
    expectIssue(changed, '$.credits[0]', DOCS)
    expect(changed.body.error.details.kind).toBe('slug_conflict')
    const unknown = await gw.post('/v1/config/apply', { customers: [{ id: 'new-one' }], credits: [{ id: 'c2', customerId: 'ghost', amount: '1' }] }, apiKey)
    expectIssue(unknown, '$.credits[0].customerId', DOCS)
    expect(unknown.body.error.details.kind).toBe('unresolved_reference')
    const twice = await gw.post(
      '/v1/config/apply',
      {
        credits: [
          { id: 'c3', customerId: 'acme', amount: '1' },
          { id: 'c3', customerId: 'acme', amount: '1' },
        ],
      },
      apiKey,
    )
    expectIssue(twice, '$.credits[1].id', DOCS)
    expectIssue(
      await gw.post('/v1/config/apply', { credits: [{ id: 'c4', customerId: 'acme', amount: '1', expiresAt: 1 }] }, apiKey),
      '$.credits[0].expiresAt',
      DOCS,
    )
    expectIssue(
      await gw.post('/v1/config/apply', { credits: [{ id: 'c5', customerId: 'acme', amount: '1', currency: 'EUR' }] }, apiKey),
      '$.credits[0].currency',
      DOCS,
    )
    expectIssue(await gw.post('/v1/config/apply', { credits: [{ id: 'c6', customerId: 'acme', amount: 'x' }] }, apiKey), '$.credits[0].amount', DOCS)
    // Nothing of the refused documents was applied: the customer new-one does not exist, the wallet holds c1 only.
    expect((await gw.post('/v1/subscriptions/get', { customerId: 'new-one' }, apiKey)).body.error.details.reason).toBe('customer_not_found')
    expect((await gw.get('/v1/wallet/balance?customerId=acme', apiKey)).body.available.amount).toBe('1')
  })
})
