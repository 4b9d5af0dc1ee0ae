import { afterAll, beforeAll, expect, test } from 'vitest'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway()
})
afterAll(async () => {
  await gw.close()
})

test('a project authorizes a hold over HTTP', async () => {
  const { apiKey } = await gw.project()
  const up = await gw.post('/v1/budgets/upsert', { key: 'b', limits: [{ id: 'd', window: 'day', enforce: 'hard', amount: '5' }] }, apiKey)
  expect(up.status).toBe(200)
  const a = await gw.post('/v1/budgets/authorize', { key: 'b', amount: '2', idempotencyKey: 'x' }, apiKey)
  expect(a.status).toBe(200)
  // h_<n>, n = max(last + 1, now ms × 1000): the gateway's clock starts at 2025-01-15T12:00Z.
  expect(a.body.holdId).toBe(`h_${Date.UTC(2025, 0, 15, 12, 0, 0) * 1000}`)
})
