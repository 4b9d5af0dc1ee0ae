// Webhook delivery against a real gateway, real Redis and real HTTP receivers on 127.0.0.1:0:
// endpoints configured over the routes, limit.crossed of a budget record delivered signed, the
// signature verified with the secret (and refused with another), retries with a stable
// delivery id, a dead receiver ending in the failed list without holding other endpoints back.
// The gateway has notification queues of its own and a short backoff (environment variables
// of src/notifications/options.ts; each test file runs in its own process).
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { verifySignature } from '../../src/notifications/signature.js'
import { expectIssue } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { deadUrl, startReceiver, waitFor, type Receiver } from './notifications.receiver.js'
import { untilQueuesIdle } from '../support/queues.js'

const suffix = randomBytes(6).toString('hex')
const ATTEMPTS = 4
const DOCS = 'https://docs.metering.dev'

let gw: TestGateway
const receivers: Receiver[] = []

beforeAll(async () => {
  process.env.METERING_NOTIFICATIONS_QUEUE = `test-notifications-${suffix}`
  process.env.METERING_WEBHOOK_QUEUE = `test-webhooks-${suffix}`
  process.env.METERING_WEBHOOK_ATTEMPTS = String(ATTEMPTS)
  process.env.METERING_WEBHOOK_BACKOFF_MS = '40'
  process.env.METERING_WEBHOOK_TIMEOUT_MS = '2000'
  gw = await startTestGateway({}, Date.now())
})
afterAll(async () => {
  await gw?.close()
  for (const r of receivers) await r.close()
})

async function receiver(fallback = 200): Promise<Receiver> {
  const r = await startReceiver(fallback)
  receivers.push(r)
  return r
}

async function ok(path: string, body: unknown, key: string): Promise<any> {
  const res = await gw.post(path, body, key)
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200)
  return res.body
}

/** A budget with a soft limit of 10 in a new project, and a record of 15 that crosses it. */
async function crossBudget(key: string, idempotencyKey = 'cross'): Promise<void> {
  await ok('/v1/budgets/upsert', { key: 'wallet', limits: [{ id: 'cap', window: 'never', enforce: 'soft', amount: '10' }] }, key)
  const recorded = await ok('/v1/budgets/record', { key: 'wallet', amount: '15', idempotencyKey }, key)
  expect(recorded.crossed, JSON.stringify(recorded)).toHaveLength(1)
}

describe('webhook endpoints: /v1/webhooks/upsert, list, delete', () => {
  test('a generated secret is answered once; list never shows secrets; an update keeps the secret; delete', async () => {
    const { apiKey } = await gw.project()
    const created = await ok('/v1/webhooks/upsert', { url: 'https://example.test/hooks', events: ['limit.reached'] }, apiKey)
    expect(created).toMatchObject({ url: 'https://example.test/hooks', events: ['limit.reached'], enabled: true, created: true })
    expect(created.id).toMatch(/^wh_[0-9a-f]{24}$/)
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/)

    const updated = await ok(
      '/v1/webhooks/upsert',
      { id: created.id, url: 'https://example.test/v2', events: ['limit.reached', 'limit.crossed'], enabled: false },
      apiKey,
    )
    expect(updated).toMatchObject({ id: created.id, url: 'https://example.test/v2', enabled: false, created: false, createdAt: created.createdAt })
    expect(updated.secret).toBeUndefined()

    gw.clock.advance(1)
    const named = await ok(
      '/v1/webhooks/upsert',
      { id: 'billing-hook', url: 'http://127.0.0.1:1/x', secret: 'my-own-secret-0123456789', events: ['limit.crossed'] },
      apiKey,
    )
    expect(named).toMatchObject({ id: 'billing-hook', created: true })
    expect(named.secret).toBeUndefined()

    const listed = await ok('/v1/webhooks/list', {}, apiKey)
    expect(listed.webhooks.map((w: { id: string }) => w.id)).toEqual([created.id, 'billing-hook'])
    expect(JSON.stringify(listed)).not.toContain('secret')
    expect((await ok('/v1/webhooks/list', { event: 'limit.reached' }, apiKey)).webhooks.map((w: { id: string }) => w.id)).toEqual([created.id])

    expect(await ok('/v1/webhooks/delete', { id: 'billing-hook' }, apiKey)).toEqual({ id: 'billing-hook', deleted: true })
    expect(await ok('/v1/webhooks/delete', { id: 'billing-hook' }, apiKey)).toEqual({ id: 'billing-hook', deleted: false })
    expect((await ok('/v1/webhooks/list', {}, apiKey)).webhooks).toHaveLength(1)

    // Another project sees none of them.
    const other = await gw.project()
    expect((await ok('/v1/webhooks/list', {}, other.apiKey)).webhooks).toEqual([])
    expect(await ok('/v1/webhooks/delete', { id: created.id }, other.apiKey)).toEqual({ id: created.id, deleted: false })
  })

  test.each<[string, Record<string, unknown>, string]>([
    ['an ftp URL', { url: 'ftp://example.test/x' }, '$.url'],
    ['a URL without a host', { url: 'http://?x' }, '$.url'],
    ['a URL that does not parse', { url: 'http://exa mple.test/' }, '$.url'],
    ['credentials in the URL', { url: 'https://user:pw@example.test/' }, '$.url'],
    ['no events', { events: [] }, '$.events'],
    ['an unknown event', { events: ['limit.gone'] }, '$.events[0]'],
    ['a short secret', { secret: 'short' }, '$.secret'],
    ['an id with a space', { id: 'a b' }, '$.id'],
  ])('upsert with %s → 400 at %s, nothing stored', async (_name, change, path) => {
    const { apiKey } = await gw.project()
    const res = await gw.post('/v1/webhooks/upsert', { url: 'https://example.test/ok', events: ['limit.reached'], ...change }, apiKey)
    expectIssue(res, path, DOCS)
    expect((await ok('/v1/webhooks/list', {}, apiKey)).webhooks).toEqual([])
  })
})

describe('delivery', () => {
  test('limit.crossed of a budget record is POSTed signed: verifies with the secret, not with another', async () => {
    const { projectId, apiKey } = await gw.project()
    const r = await receiver()
    const hook = await ok('/v1/webhooks/upsert', { url: r.url, events: ['limit.crossed'] }, apiKey)
    const reachedOnly = await receiver()
    await ok('/v1/webhooks/upsert', { url: reachedOnly.url, events: ['limit.reached'] }, apiKey)
    await crossBudget(apiKey)

    const got = await waitFor('the delivery', () => r.received[0])
    expect(got.headers['content-type']).toBe('application/json')
    expect(got.headers['x-metering-event']).toBe('limit.crossed')
    expect(got.headers['x-metering-delivery']).toMatch(/^dlv_[0-9a-f]{32}$/)
    const signature = got.headers['x-metering-signature'] as string
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    const nowS = Math.floor(Date.now() / 1000)
    expect(verifySignature(hook.secret, signature, got.body, nowS)).toBe(true)
    expect(verifySignature('whsec_another-secret-altogether', signature, got.body, nowS)).toBe(false)
    expect(verifySignature(hook.secret, signature, got.body.replace('"15', '"16'), nowS)).toBe(false)
    expect(verifySignature(hook.secret, signature, got.body, nowS + 3600)).toBe(false)

    const payload = JSON.parse(got.body)
    expect(payload).toMatchObject({
      type: 'limit.crossed',
      projectId,
      data: { budgetKey: 'wallet', crossed: [{ limitId: 'cap', enforce: 'soft', amount: '10', consumed: '15' }] },
    })
    expect(payload.id).toMatch(/^ntf_/)
    expect(typeof payload.createdAt).toBe('number')
    // One delivery; the endpoint subscribed to limit.reached only gets nothing.
    await untilQueuesIdle(gw.redis, [process.env.METERING_NOTIFICATIONS_QUEUE!, process.env.METERING_WEBHOOK_QUEUE!]) // every delivery done
    expect(r.received).toHaveLength(1)
    expect(reachedOnly.received).toHaveLength(0)
  })

  test('a receiver answering 500 twice then 200: three attempts, one delivery id, each signed', async () => {
    const { apiKey } = await gw.project()
    const r = await receiver()
    r.statuses = [500, 500]
    const hook = await ok('/v1/webhooks/upsert', { url: r.url, events: ['limit.crossed'] }, apiKey)
    await crossBudget(apiKey)
    await waitFor('the third attempt', () => (r.received.length >= 3 ? true : undefined))
    await untilQueuesIdle(gw.redis, [process.env.METERING_NOTIFICATIONS_QUEUE!, process.env.METERING_WEBHOOK_QUEUE!]) // every delivery done
    expect(r.received).toHaveLength(3)
    const ids = new Set(r.received.map((x) => x.headers['x-metering-delivery']))
    expect(ids.size).toBe(1)
    expect(new Set(r.received.map((x) => x.body)).size).toBe(1)
    for (const attempt of r.received)
      expect(verifySignature(hook.secret, attempt.headers['x-metering-signature'] as string, attempt.body, Math.floor(Date.now() / 1000))).toBe(true)
    // Backoff: the second retry waited longer than the first.
    const [a, b, c] = r.received.map((x) => x.at)
    expect(b! - a!).toBeGreaterThanOrEqual(30)
    expect(c! - b!).toBeGreaterThanOrEqual(60)
    expect((await ok('/v1/webhooks/failures/list', {}, apiKey)).failures).toEqual([])
  })

  test(`a dead receiver ends in the failed list after ${ATTEMPTS} attempts; a 500-only receiver too; a good endpoint of the same project is not held back`, async () => {
    const { projectId, apiKey } = await gw.project()
    const dead = await ok('/v1/webhooks/upsert', { id: 'dead', url: await deadUrl(), events: ['limit.crossed'] }, apiKey)
    const failing = await receiver(500)
    await ok('/v1/webhooks/upsert', { id: 'failing', url: failing.url, events: ['limit.crossed'] }, apiKey)
    const good = await receiver()
    await ok('/v1/webhooks/upsert', { id: 'good', url: good.url, events: ['limit.crossed'] }, apiKey)
    await crossBudget(apiKey)

    await waitFor('the good delivery', () => good.received[0])
    const failures = await waitFor('two failed deliveries', async () => {
      const body = await ok('/v1/webhooks/failures/list', {}, apiKey)
      return body.failures.length === 2 ? body.failures : undefined
    })
    expect(good.received).toHaveLength(1)
    expect(failing.received).toHaveLength(ATTEMPTS)
    const byEndpoint = Object.fromEntries(failures.map((f: { endpointId: string }) => [f.endpointId, f]))
    expect(byEndpoint.dead).toMatchObject({
      url: dead.url,
      attempts: ATTEMPTS,
      lastStatus: null,
      type: 'limit.crossed',
      notification: { projectId, budgetKey: 'wallet' },
    })
    expect(byEndpoint.dead.deliveryId).toMatch(/^dlv_[0-9a-f]{32}$/)
    expect(byEndpoint.failing).toMatchObject({ attempts: ATTEMPTS, lastStatus: 500, lastError: 'HTTP 500' })
    expect(byEndpoint.failing.deliveryId).toBe(failing.received[0]!.headers['x-metering-delivery'])
    expect(byEndpoint.failing.notificationId).toBe(byEndpoint.dead.notificationId)
    expect(new Set(failures.map((f: { deliveryId: string }) => f.deliveryId)).size).toBe(2)
    expect((await ok('/v1/webhooks/failures/list', { limit: 1 }, apiKey)).failures).toHaveLength(1)
  })

  test('a disabled endpoint gets nothing', async () => {
    const { apiKey } = await gw.project()
    const off = await receiver()
    await ok('/v1/webhooks/upsert', { url: off.url, events: ['limit.crossed'], enabled: false }, apiKey)
    const on = await receiver()
    await ok('/v1/webhooks/upsert', { url: on.url, events: ['limit.crossed'] }, apiKey)
    await crossBudget(apiKey)
    await waitFor('the enabled endpoint', () => on.received[0])
    await untilQueuesIdle(gw.redis, [process.env.METERING_NOTIFICATIONS_QUEUE!, process.env.METERING_WEBHOOK_QUEUE!]) // every delivery done
    expect(off.received).toHaveLength(0)
  })
})
