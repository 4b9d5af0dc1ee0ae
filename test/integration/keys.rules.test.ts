// Keys cannot outlive or outrank their creator: a key created by an expiring key expires no
// later than it, and revoking a key revokes every key it created, transitively, on every
// gateway; a revocation cut short (the parent marked, its children not) is finished by
// revoking again. Real gateways over the shared test Redis, each on a manual clock.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { apiKeyChildrenKey, apiKeyIdKey, apiKeyKey } from '../../src/keys/keys.js'
import { KeyService } from '../../src/keys/service.js'
import { expectError } from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'

const DOCS = 'https://docs.keys-rules.test'
const MINUTE = 60_000
let gw: TestGateway
let gwB: TestGateway
beforeAll(async () => {
  ;[gw, gwB] = await Promise.all([startTestGateway({ docsUrl: DOCS }), startTestGateway({ docsUrl: DOCS })])
})
afterAll(async () => {
  await Promise.all([gw?.close(), gwB?.close()])
})

interface Key {
  keyId: string
  apiKey: string
  expiresAt: number | null
}

/** A key the root key creates in the project, able to create keys and read budgets. */
async function rootKey(g: TestGateway, projectId: string, expiresAt: number | null = null): Promise<Key> {
  const res = await g.post('/v1/keys/create', { projectId, scopes: ['keys:write', 'budgets:read'], expiresAt }, ROOT_KEY)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body
}

/** A key created by `creator`, with its scopes by default. */
async function childOf(g: TestGateway, creator: Key, projectId: string, body: Record<string, unknown> = {}): Promise<Key> {
  const res = await g.post('/v1/keys/create', { projectId, ...body }, creator.apiKey)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body
}

/** Passes authentication: 404 for a budget that is not there, not 401 or 403. */
async function expectKeyWorks(g: TestGateway, apiKey: string): Promise<void> {
  const res = await g.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey)
  expect(res.status, JSON.stringify(res.body)).toBe(404)
}

/** 401 on a read route and on both key routes, as any revoked or expired key. */
async function expectKeyRejected(g: TestGateway, apiKey: string, projectId: string): Promise<void> {
  expectError(await g.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey), 401, 'UNAUTHORIZED', DOCS)
  expectError(await g.post('/v1/keys/create', { projectId }, apiKey), 401, 'UNAUTHORIZED', DOCS)
  expectError(await g.post('/v1/keys/revoke', { keyId: 'key_unknown' }, apiKey), 401, 'UNAUTHORIZED', DOCS)
}

/** Polls until the gateway refuses the key (its revocation message arrives by pub/sub), within 1 s. */
async function expectRefusedWithinASecond(g: TestGateway, apiKey: string): Promise<void> {
  const deadline = performance.now() + 1000
  let status = 0
  do {
    status = (await g.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey)).status
  } while (status !== 401 && performance.now() < deadline)
  expect(status).toBe(401)
}

describe('a key expires no later than the key creating it', () => {
  test('a child asking for no expiry (absent or null) inherits its creator’s; an earlier one is kept', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId, gw.clock() + 10 * MINUTE)
    expect((await childOf(gw, parent, projectId)).expiresAt).toBe(parent.expiresAt)
    expect((await childOf(gw, parent, projectId, { expiresAt: null })).expiresAt).toBe(parent.expiresAt)
    expect((await childOf(gw, parent, projectId, { expiresAt: parent.expiresAt })).expiresAt).toBe(parent.expiresAt)
    const earlier = gw.clock() + MINUTE
    expect((await childOf(gw, parent, projectId, { expiresAt: earlier })).expiresAt).toBe(earlier)
  })

  test('a later expiry → 400 expires_after_creator naming the creator’s expiry, and nothing is created', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId, gw.clock() + 10 * MINUTE)
    const res = await gw.post('/v1/keys/create', { projectId, expiresAt: parent.expiresAt! + 1 }, parent.apiKey)
    expectError(res, 400, 'BAD_REQUEST', DOCS)
    expect(res.body.error.details).toMatchObject({ reason: 'expires_after_creator', creatorKeyId: parent.keyId, creatorExpiresAt: parent.expiresAt })
    expect(await gw.redis.scard(apiKeyChildrenKey(parent.keyId))).toBe(0)
  })

  test('a grandchild is bounded by the expiry its parent inherited', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId, gw.clock() + 10 * MINUTE)
    const child = await childOf(gw, parent, projectId)
    expect((await childOf(gw, child, projectId)).expiresAt).toBe(parent.expiresAt)
    const res = await gw.post('/v1/keys/create', { projectId, expiresAt: parent.expiresAt! + MINUTE }, child.apiKey)
    expect(res.body.error.details.reason).toBe('expires_after_creator')
  })

  test('once the clock passes the creator’s expiry, the creator and its child are both 401 (cached or not)', async () => {
    const g = await startTestGateway({ docsUrl: DOCS })
    try {
      const { projectId } = await g.project()
      const parent = await rootKey(g, projectId, g.clock() + 5 * MINUTE)
      const child = await childOf(g, parent, projectId)
      await expectKeyWorks(g, parent.apiKey)
      await expectKeyWorks(g, child.apiKey)
      g.clock.advance(5 * MINUTE - 1)
      await expectKeyWorks(g, child.apiKey)
      g.clock.advance(1)
      await expectKeyRejected(g, parent.apiKey, projectId)
      await expectKeyRejected(g, child.apiKey, projectId)
    } finally {
      await g.close()
    }
  })

  test('the root key’s keys keep their own expiry, none or any; a key with no expiry bounds nothing', async () => {
    const { projectId } = await gw.project()
    const far = gw.clock() + 365 * 24 * 60 * MINUTE
    expect((await rootKey(gw, projectId)).expiresAt).toBeNull()
    expect((await rootKey(gw, projectId, far)).expiresAt).toBe(far)
    const unbounded = await rootKey(gw, projectId)
    expect((await childOf(gw, unbounded, projectId)).expiresAt).toBeNull()
    expect((await childOf(gw, unbounded, projectId, { expiresAt: far })).expiresAt).toBe(far)
  })
})

describe('revoking a key revokes the keys it created', () => {
  test('revoking a parent makes its child and grandchild 401 on this gateway and on another that had them cached', async () => {
    const { projectId, apiKey: projectKey } = await gw.project()
    const parent = await rootKey(gw, projectId)
    const child = await childOf(gw, parent, projectId)
    const grandchild = await childOf(gw, child, projectId)
    for (const key of [parent, child, grandchild]) {
      await expectKeyWorks(gw, key.apiKey)
      await expectKeyWorks(gwB, key.apiKey)
    }
    const res = await gw.post('/v1/keys/revoke', { keyId: parent.keyId }, ROOT_KEY)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    for (const key of [parent, child, grandchild]) await expectKeyRejected(gw, key.apiKey, projectId)
    // B's clock never moves, so only the revocation messages can make it forget the keys.
    for (const key of [parent, child, grandchild]) await expectRefusedWithinASecond(gwB, key.apiKey)
    await expectKeyRejected(gwB, grandchild.apiKey, projectId)
    // The project's first key, created by no key of the tree, is untouched.
    await expectKeyWorks(gw, projectKey)
    await expectKeyWorks(gwB, projectKey)
  })

  test('revoking a child leaves its parent working and revokes the grandchild', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId)
    const child = await childOf(gw, parent, projectId)
    const grandchild = await childOf(gw, child, projectId)
    const sibling = await childOf(gw, parent, projectId)
    const res = await gw.post('/v1/keys/revoke', { keyId: child.keyId }, parent.apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    await expectKeyRejected(gw, child.apiKey, projectId)
    await expectKeyRejected(gw, grandchild.apiKey, projectId)
    await expectKeyWorks(gw, parent.apiKey)
    await expectKeyWorks(gw, sibling.apiKey)
    // The parent still creates keys.
    await expectKeyWorks(gw, (await childOf(gw, parent, projectId)).apiKey)
  })

  test('a revocation cut short after marking the parent is finished by revoking again', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId)
    const child = await childOf(gw, parent, projectId)
    const grandchild = await childOf(gw, child, projectId)
    // What a crash right after the first step leaves: the parent revoked, its tree not.
    const sha = await gw.redis.get(apiKeyIdKey(parent.keyId))
    await gw.redis.hset(apiKeyKey(sha!), 'revoked', '1')
    await expectKeyWorks(gwB, grandchild.apiKey)
    expect((await gw.post('/v1/keys/revoke', { keyId: parent.keyId }, ROOT_KEY)).status).toBe(200)
    await expectKeyRejected(gw, child.apiKey, projectId)
    await expectKeyRejected(gw, grandchild.apiKey, projectId)
    await expectRefusedWithinASecond(gwB, grandchild.apiKey)
  })

  test('a key revoked in Redis but still in a gateway’s cache cannot create keys there', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId)
    await expectKeyWorks(gwB, parent.apiKey)
    // Revoked in Redis without its message reaching B: B's cache still holds the key, but
    // creating a key reads the creator from Redis.
    const sha = await gw.redis.get(apiKeyIdKey(parent.keyId))
    await gw.redis.hset(apiKeyKey(sha!), 'revoked', '1')
    expectError(await gwB.post('/v1/keys/create', { projectId }, parent.apiKey), 401, 'UNAUTHORIZED', DOCS)
    expect(await gw.redis.scard(apiKeyChildrenKey(parent.keyId))).toBe(0)
  })

  test('a creator revoked while its child is being written takes the child with it', async () => {
    const { projectId } = await gw.project()
    const parent = await rootKey(gw, projectId)
    // The real Redis, with the creator's revocation run just before the child's record is
    // written: after the child joined its creator's set, before its id names it, so the
    // revocation walks past it and only the creator's re-check can catch it.
    let revoked = false
    const redis = new Proxy(gw.redis, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target)
        if (typeof value !== 'function') return value
        if (prop !== 'hset') return value.bind(target)
        return async (...args: unknown[]) => {
          if (!revoked) {
            revoked = true
            expect((await gw.services.keys.revokeKey(parent.keyId)).ok).toBe(true)
          }
          return value.apply(target, args)
        }
      },
    })
    const keys = new KeyService(redis, gw.clock)
    const result = await keys.createKey(projectId, { createdBy: parent.keyId })
    expect(result).toMatchObject({ ok: false, kind: 'unauthenticated' })
    const [childId] = await gw.redis.smembers(apiKeyChildrenKey(parent.keyId))
    const childSha = await gw.redis.get(apiKeyIdKey(childId!))
    expect(await gw.redis.hget(apiKeyKey(childSha!), 'revoked')).toBe('1')
  })
})
