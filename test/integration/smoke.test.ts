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
  expect(a.body.holdId).toBe('h_1')
})
