// The wallet (src/wallet/README.md) over HTTP: the balance's shape (spec 2.6, checked with its
// TypeBox schema), grants and top-ups once per idempotency key, credits before cash in priority
// order then earliest expiry, expiry by the clock (journaled), the project check and the scopes.
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { journalKey } from '../../src/wallet/keys.js'
import { WalletBalanceSchema } from '../../src/wallet/types.js'
import { expectError } from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'

const DOCS = 'https://docs.metering.dev'
let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({ docsUrl: DOCS }, Date.UTC(2025, 2, 12, 10, 0, 0))
})
afterAll(async () => {
  await gw?.close()
})

async function balance(key: string, customerId: string): Promise<any> {
  const res = await gw.get(`/v1/wallet/balance?customerId=${encodeURIComponent(customerId)}`, key)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(Value.Check(WalletBalanceSchema, res.body), JSON.stringify([...Value.Errors(WalletBalanceSchema, res.body)])).toBe(true)
  return res.body
}

describe('wallet balance', () => {
  it('has the spec shape: Amounts with ledger_amount, amount, currency, display_amount; ISO 8601 dates', async () => {
    const T = gw.clock()
    const { apiKey } = await gw.project()
    expect(await balance(apiKey, 'empty')).toEqual({
      currency: 'USD',
      available: { ledger_amount: 0, amount: '0', currency: 'USD', display_amount: '$0.00' },
      held: { ledger_amount: 0, amount: '0', currency: 'USD', display_amount: '$0.00' },
      credits: [],
      asOf: T,
    })
    const top = await gw.post('/v1/wallet/top-up', { customerId: 'c1', amount: '1234.5', idempotencyKey: 't' }, apiKey)
    expect(top.status, JSON.stringify(top.body)).toBe(200)
    const grant = await gw.post(
      '/v1/wallet/credits/grant',
      { customerId: 'c1', amount: '12.5', source: 'promo', expiresAt: T + 86_400_000, idempotencyKey: 'g' },
      apiKey,
    )
    expect(grant.status, JSON.stringify(grant.body)).toBe(200)
    expect(await balance(apiKey, 'c1')).toEqual({
      currency: 'USD',
      available: { ledger_amount: 124700000000, amount: '1247', currency: 'USD', display_amount: '$1,247.00' },
      held: { ledger_amount: 0, amount: '0', currency: 'USD', display_amount: '$0.00' },
      credits: [
        {
          id: grant.body.creditId,
          source: 'promo',
          priority: 50,
          issued: { ledger_amount: 1250000000, amount: '12.5', currency: 'USD', display_amount: '$12.50' },
          available: { ledger_amount: 1250000000, amount: '12.5', currency: 'USD', display_amount: '$12.50' },
          created_at: new Date(T).toISOString(),
          expires_at: new Date(T + 86_400_000).toISOString(),
        },
      ],
      asOf: T,
    })
    // Past 2^53 units (about 90 million USD) ledger_amount is a string of digits, exact.
    const big = await gw.post('/v1/wallet/top-up', { customerId: 'rich', amount: '123456789012.12345678', idempotencyKey: 'b' }, apiKey)
    expect(big.status, JSON.stringify(big.body)).toBe(200)
    const rich = await balance(apiKey, 'rich')
    expect(rich.available).toEqual({
      ledger_amount: '12345678901212345678',
      amount: '123456789012.12345678',
      currency: 'USD',
      display_amount: '$123,456,789,012.12345678',
    })
  })

  it("asOf is the clock's time at each call: top-up, its replay, grant, balance; a credit due by then is already expired", async () => {
    const { apiKey } = await gw.project()
    const T = gw.clock()
    const top = await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '5', idempotencyKey: 'k' }, apiKey)
    expect([top.status, top.body.asOf]).toEqual([200, T])
    gw.clock.advance(3)
    const replay = await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '5', idempotencyKey: 'k' }, apiKey)
    expect([replay.body.replayed, replay.body.asOf]).toEqual([true, T + 3])
    gw.clock.advance(4)
    const grant = await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '2', source: 'promo', expiresAt: T + 100, idempotencyKey: 'g' }, apiKey)
    expect([grant.status, grant.body.asOf, grant.body.available.amount]).toEqual([200, T + 7, '7'])
    gw.clock.set(T + 100)
    const read = await balance(apiKey, 'c')
    expect([read.asOf, read.available.amount, read.credits]).toEqual([T + 100, '5', []])
    gw.clock.set(T)
  })

  it('grant and top-up apply once per idempotency key; another request with the key is 409; currencies do not mix', async () => {
    const { apiKey, projectId } = await gw.project()
    const first = await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '5', idempotencyKey: 'k' }, apiKey)
    expect([first.status, first.body.replayed, first.body.available.amount]).toEqual([200, false, '5'])
    const again = await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '5', idempotencyKey: 'k' }, apiKey)
    expect([again.status, again.body.replayed, again.body.available.amount]).toEqual([200, true, '5'])
    expectError(await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '6', idempotencyKey: 'k' }, apiKey), 409, 'CONFLICT', DOCS)
    const g1 = await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '2', source: 'promo', idempotencyKey: 'g' }, apiKey)
    const g2 = await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '2', source: 'promo', idempotencyKey: 'g' }, apiKey)
    expect([g2.status, g2.body.replayed, g2.body.creditId, g2.body.available.amount]).toEqual([200, true, g1.body.creditId, '7'])
    expectError(
      await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '2', source: 'manual', idempotencyKey: 'g' }, apiKey),
      409,
      'CONFLICT',
      DOCS,
    )
    expectError(await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '1', currency: 'EUR', idempotencyKey: 'eur' }, apiKey), 409, 'CONFLICT', DOCS)
    expectError(await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '0', idempotencyKey: 'zero' }, apiKey), 400, 'BAD_REQUEST', DOCS)
    expectError(
      await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '1', source: 'promo', expiresAt: gw.clock(), idempotencyKey: 'past' }, apiKey),
      400,
      'BAD_REQUEST',
      DOCS,
    )
    expectError(
      await gw.post('/v1/wallet/credits/grant', { customerId: 'c', amount: '1', source: 'stolen', idempotencyKey: 'src' }, apiKey),
      400,
      'BAD_REQUEST',
      DOCS,
    )
    expect((await balance(apiKey, 'c')).available.amount).toBe('7')
    const rows = (await gw.redis.lrange(journalKey(projectId), 0, -1)).map((r) => JSON.parse(r.split('\t')[1]!))
    expect(rows.map((r) => [r.kind, r.amount, r.source])).toEqual([
      ['top_up', '500000000', 'cash_wallet'],
      ['credit_grant', '200000000', 'promo'],
    ])
  })

  it('credits go before cash, by priority then earliest expiry; expired credits stop counting and are journaled', async () => {
    const T = gw.clock()
    const { apiKey, projectId } = await gw.project()
    const grant = (id: string, amount: string, priority: number, expiresAt?: number) =>
      gw.post(
        '/v1/wallet/credits/grant',
        { customerId: 'c', amount, source: 'promo', priority, idempotencyKey: id, ...(expiresAt ? { expiresAt } : {}) },
        apiKey,
      )
    await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '10', idempotencyKey: 'cash' }, apiKey)
    const low = (await grant('low', '1', 10)).body.creditId
    const late = (await grant('late', '1', 90, T + 20_000)).body.creditId
    const soon = (await grant('soon', '1', 90, T + 10_000)).body.creditId
    expect((await balance(apiKey, 'c')).credits.map((c: any) => c.id)).toEqual([soon, late, low])
    // A run of $2.50 holds `soon`, `late`, then half of `low`.
    const run = await gw.post('/v1/runs/start', { customerId: 'c', budgetAmountMinor: 250, idempotencyKey: 'r' }, apiKey)
    expect(run.status, JSON.stringify(run.body)).toBe(200)
    let b = await balance(apiKey, 'c')
    expect([b.available.amount, b.held.amount]).toEqual(['10.5', '2.5'])
    expect(b.credits.map((c: any) => [c.id, c.available.amount])).toEqual([
      [soon, '0'],
      [late, '0'],
      [low, '0.5'],
    ])
    // It ends having consumed nothing: everything goes back where it came from.
    expect((await gw.post(`/v1/runs/end/${run.body.runId}`, { status: 'canceled' }, apiKey)).status).toBe(200)
    b = await balance(apiKey, 'c')
    expect(b.credits.map((c: any) => [c.id, c.available.amount])).toEqual([
      [soon, '1'],
      [late, '1'],
      [low, '1'],
    ])
    // `soon` expires at its instant: it no longer counts, and its remainder is journaled.
    gw.clock.set(T + 10_000)
    b = await balance(apiKey, 'c')
    expect([b.available.amount, b.credits.map((c: any) => c.id)]).toEqual(['12', [late, low]])
    const rows = (await gw.redis.lrange(journalKey(projectId), 0, -1)).map((r) => JSON.parse(r.split('\t')[1]!))
    expect(rows.filter((r) => r.kind === 'credit_expiry').map((r) => [r.credit_id, r.amount, r.ts_ms])).toEqual([[soon, '100000000', T + 10_000]])
    expect(rows.every((r) => r.project_id === projectId && r.customer_id === 'c' && typeof r.movement_id === 'string')).toBe(true)
    expect(new Set(rows.map((r) => r.movement_id)).size).toBe(rows.length)
  })

  it("projectId must be the key's project; the routes need their scopes", async () => {
    const { apiKey, projectId } = await gw.project()
    expect((await gw.get(`/v1/wallet/balance?customerId=c&projectId=${projectId}`, apiKey)).status).toBe(200)
    expectError(await gw.get('/v1/wallet/balance?customerId=c&projectId=someone-else', apiKey), 403, 'FORBIDDEN', DOCS)
    expectError(await gw.get('/v1/wallet/balance', apiKey), 400, 'BAD_REQUEST', DOCS)
    const reader = await gw.post('/v1/keys/create', { projectId, scopes: ['wallet:read', 'runs:read'] }, ROOT_KEY)
    expect(reader.status, JSON.stringify(reader.body)).toBe(200)
    expect((await gw.get('/v1/wallet/balance?customerId=c', reader.body.apiKey)).status).toBe(200)
    expectError(await gw.post('/v1/wallet/top-up', { customerId: 'c', amount: '1', idempotencyKey: 'x' }, reader.body.apiKey), 403, 'FORBIDDEN', DOCS)
    expectError(await gw.post('/v1/runs/start', { customerId: 'c', budgetAmountMinor: 1, idempotencyKey: 'x' }, reader.body.apiKey), 403, 'FORBIDDEN', DOCS)
  })
})
