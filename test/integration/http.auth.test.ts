// Who may do what: projects only by root; keys by root for any project and by a keys:write
// project key for its own; revocation reaching another gateway within a second over pub/sub;
// and the per-key request rate limit (429 with Retry-After) on the manual clock.
import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { expectError, headerOf } from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'

const DOCS = 'https://docs.auth.test'
let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({ docsUrl: DOCS })
})
afterAll(async () => {
  await gw?.close()
})

/** A call with the key that must pass authentication: not 401 or 403 (404 for a budget that is not there). */
async function expectKeyWorks(g: TestGateway, apiKey: string): Promise<void> {
  const res = await g.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey)
  expect(res.status, JSON.stringify(res.body)).toBe(404)
}

async function expectKeyRejected(g: TestGateway, apiKey: string): Promise<void> {
  const res = await g.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey)
  expectError(res, 401, 'UNAUTHORIZED', DOCS)
}

describe('projects/create', () => {
  test('the root key creates a project whose key works', async () => {
    const res = await gw.post('/v1/projects/create', { name: 'acme' }, ROOT_KEY)
    expect(res.status).toBe(200)
    expect(res.body.projectId).toMatch(/^proj_/)
    expect(res.body.apiKey).toMatch(/^mk_[A-Za-z0-9_-]{43}$/)
    expect(typeof res.body.keyId).toBe('string')
    await expectKeyWorks(gw, res.body.apiKey)
  })

  test('a project key (every scope) → 403', async () => {
    const { apiKey } = await gw.project()
    expectError(await gw.post('/v1/projects/create', { name: 'x' }, apiKey), 403, 'FORBIDDEN', DOCS)
  })

  test('a keys:write project key → 403', async () => {
    const { projectId } = await gw.project()
    const key = await gw.post('/v1/keys/create', { projectId, scopes: ['keys:write'] }, ROOT_KEY)
    expectError(await gw.post('/v1/projects/create', {}, key.body.apiKey), 403, 'FORBIDDEN', DOCS)
  })

  test('no key → 401', async () => {
    expectError(await gw.post('/v1/projects/create', { name: 'x' }), 401, 'UNAUTHORIZED', DOCS)
  })
})

describe('keys/create', () => {
  test('the root key creates keys for any project, with the asked scopes and expiry', async () => {
    const a = await gw.project()
    const b = await gw.project()
    for (const p of [a, b]) {
      const res = await gw.post(
        '/v1/keys/create',
        { projectId: p.projectId, scopes: ['budgets:read'], expiresAt: gw.clock() + 60_000, name: 'reader' },
        ROOT_KEY,
      )
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body).toMatchObject({ projectId: p.projectId, scopes: ['budgets:read'], expiresAt: gw.clock() + 60_000 })
      await expectKeyWorks(gw, res.body.apiKey)
      // budgets:read only: a write is refused.
      const write = await gw.post('/v1/budgets/upsert', { key: 'b', limits: [] }, res.body.apiKey)
      expectError(write, 403, 'FORBIDDEN', DOCS)
    }
  })

  test('a key defaults to every scope and no expiry', async () => {
    const p = await gw.project()
    const res = await gw.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)
    expect(res.status).toBe(200)
    expect(res.body.scopes).toEqual(['*'])
    expect(res.body.expiresAt).toBeNull()
    expect((await gw.post('/v1/budgets/upsert', { key: 'b', limits: [] }, res.body.apiKey)).status).toBe(200)
  })

  test('a keys:write project key creates keys for its own project only (another project → 403)', async () => {
    const own = await gw.project()
    const other = await gw.project()
    const writer = (await gw.post('/v1/keys/create', { projectId: own.projectId, scopes: ['keys:write', 'budgets:read'] }, ROOT_KEY)).body
    const created = await gw.post('/v1/keys/create', { projectId: own.projectId, scopes: ['budgets:read'] }, writer.apiKey)
    expect(created.status, JSON.stringify(created.body)).toBe(200)
    expect(created.body.projectId).toBe(own.projectId)
    await expectKeyWorks(gw, created.body.apiKey)
    expectError(await gw.post('/v1/keys/create', { projectId: other.projectId }, writer.apiKey), 403, 'FORBIDDEN', DOCS)
  })

  test('a project key grants at most the scopes it holds (its own by default)', async () => {
    const p = await gw.project()
    const writer = (await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['keys:write', 'budgets:read'] }, ROOT_KEY)).body
    const escalation = await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['budgets:write'] }, writer.apiKey)
    expectError(escalation, 403, 'FORBIDDEN', DOCS)
    expect(escalation.body.error.details.reason).toBe('scope_not_held')
    expectError(await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['*'] }, writer.apiKey), 403, 'FORBIDDEN', DOCS)
    const byDefault = await gw.post('/v1/keys/create', { projectId: p.projectId }, writer.apiKey)
    expect(byDefault.status).toBe(200)
    expect(byDefault.body.scopes).toEqual(['keys:write', 'budgets:read'])
  })

  test('a project key without keys:write → 403, even for its own project', async () => {
    const p = await gw.project()
    const key = (await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['budgets:read', 'budgets:write'] }, ROOT_KEY)).body
    expectError(await gw.post('/v1/keys/create', { projectId: p.projectId }, key.apiKey), 403, 'FORBIDDEN', DOCS)
  })

  test('the root key on a project that does not exist → 404', async () => {
    expectError(await gw.post('/v1/keys/create', { projectId: 'proj_does_not_exist' }, ROOT_KEY), 404, 'NOT_FOUND', DOCS)
  })

  test('an unknown scope → 400 at $.scopes[0]', async () => {
    const p = await gw.project()
    const res = await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['budgets:admin'] }, ROOT_KEY)
    expectError(res, 400, 'BAD_REQUEST', DOCS)
    expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain('$.scopes[0]')
  })
})

describe('keys/revoke', () => {
  test('the root key revokes a key of any project; the key then gets 401; revoking again is fine', async () => {
    const p = await gw.project()
    const key = (await gw.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)).body
    await expectKeyWorks(gw, key.apiKey)
    const res = await gw.post('/v1/keys/revoke', { keyId: key.keyId }, ROOT_KEY)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ keyId: key.keyId, revoked: true })
    await expectKeyRejected(gw, key.apiKey)
    expect((await gw.post('/v1/keys/revoke', { keyId: key.keyId }, ROOT_KEY)).status).toBe(200)
    // The project's other key is untouched.
    await expectKeyWorks(gw, p.apiKey)
  })

  test("a keys:write project key revokes its own project's keys", async () => {
    const p = await gw.project()
    const writer = (await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['keys:write'] }, ROOT_KEY)).body
    const victim = (await gw.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)).body
    await expectKeyWorks(gw, victim.apiKey)
    const res = await gw.post('/v1/keys/revoke', { keyId: victim.keyId }, writer.apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    await expectKeyRejected(gw, victim.apiKey)
  })

  test("revoking another project's key → 404, and that key keeps working", async () => {
    const mine = await gw.project()
    const theirs = await gw.project()
    const res = await gw.post('/v1/keys/revoke', { keyId: theirs.keyId }, mine.apiKey)
    expectError(res, 404, 'NOT_FOUND', DOCS)
    await expectKeyWorks(gw, theirs.apiKey)
  })

  test('revoking an unknown key id → 404', async () => {
    expectError(await gw.post('/v1/keys/revoke', { keyId: 'key_unknown' }, ROOT_KEY), 404, 'NOT_FOUND', DOCS)
  })

  test('a project key without keys:write → 403', async () => {
    const p = await gw.project()
    const reader = (await gw.post('/v1/keys/create', { projectId: p.projectId, scopes: ['budgets:read'] }, ROOT_KEY)).body
    expectError(await gw.post('/v1/keys/revoke', { keyId: p.keyId }, reader.apiKey), 403, 'FORBIDDEN', DOCS)
    await expectKeyWorks(gw, p.apiKey)
  })
})

describe('revocation reaches every gateway', () => {
  let gwA: TestGateway
  let gwB: TestGateway
  beforeAll(async () => {
    ;[gwA, gwB] = await Promise.all([startTestGateway({ docsUrl: DOCS }), startTestGateway({ docsUrl: DOCS })])
  })
  afterAll(async () => {
    await Promise.all([gwA?.close(), gwB?.close()])
  })

  test('a key revoked on gateway A is refused by gateway B, which had it cached, within 1 s', async () => {
    const p = await gwA.project()
    const key = (await gwA.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)).body
    // B verifies the key once and caches it; B's clock never moves, so only the revocation
    // message can make it forget the key.
    await expectKeyWorks(gwB, key.apiKey)
    await expectKeyWorks(gwB, key.apiKey)

    const sha = createHash('sha256').update(key.apiKey).digest('hex')
    // Other test files revoke keys on the same Redis channel: wait for this key's message.
    const heard = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        gwB.services.keys.off('revoked', onRevoked)
        reject(new Error('gateway B heard no revocation within 1 s'))
      }, 1000)
      const onRevoked = (revoked: string) => {
        if (revoked !== sha) return
        clearTimeout(timer)
        gwB.services.keys.off('revoked', onRevoked)
        resolve(performance.now())
      }
      gwB.services.keys.on('revoked', onRevoked)
    })
    const start = performance.now()
    expect((await gwA.post('/v1/keys/revoke', { keyId: key.keyId }, ROOT_KEY)).status).toBe(200)
    const heardAt = await heard
    expect(heardAt - start).toBeLessThan(1000)
    await expectKeyRejected(gwB, key.apiKey)
    expect(performance.now() - start, 'revocation effective on B within 1 s').toBeLessThan(1000)
    await expectKeyRejected(gwA, key.apiKey)
    // The project's other key still works on B.
    await expectKeyWorks(gwB, p.apiKey)
  })

  test('polling: B answers 401 within a 1 s deadline after A revokes', async () => {
    const p = await gwA.project()
    const key = (await gwA.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)).body
    await expectKeyWorks(gwB, key.apiKey)
    expect((await gwA.post('/v1/keys/revoke', { keyId: key.keyId }, ROOT_KEY)).status).toBe(200)
    const deadline = performance.now() + 1000
    let status = 0
    do {
      status = (await gwB.post('/v1/budgets/get', { key: 'no-such-budget' }, key.apiKey)).status
    } while (status !== 401 && performance.now() < deadline)
    expect(status).toBe(401)
  })
})

describe('per-key rate limit', () => {
  let limited: TestGateway
  beforeAll(async () => {
    limited = await startTestGateway({ docsUrl: DOCS, rateLimit: 5 })
  })
  afterAll(async () => {
    await limited?.close()
  })

  test('the 6th request of a key in one second → 429 with Retry-After; the next second lets it through', async () => {
    const p = await limited.project()
    expect(
      (await limited.post('/v1/budgets/upsert', { key: 'rl', limits: [{ id: 'd', window: 'never', enforce: 'hard', amount: '10' }] }, p.apiKey)).status,
    ).toBe(200)
    for (let i = 0; i < 4; i++) expect((await limited.post('/v1/budgets/get', { key: 'rl' }, p.apiKey)).status).toBe(200)

    const refused = await limited.post('/v1/budgets/authorize', { key: 'rl', amount: '1', idempotencyKey: 'rl-1' }, p.apiKey)
    expectError(refused, 429, 'TOO_MANY_REQUESTS', DOCS)
    const retryAfter = headerOf(refused.headers, 'retry-after')
    expect(retryAfter).toMatch(/^[1-9][0-9]*$/)
    expect(Number(retryAfter)).toBe(1)
    expectError(await limited.post('/v1/budgets/get', { key: 'rl' }, p.apiKey), 429, 'TOO_MANY_REQUESTS', DOCS)

    // Another key of the same project has its own allowance.
    const other = (await limited.post('/v1/keys/create', { projectId: p.projectId }, ROOT_KEY)).body
    const view = await limited.post('/v1/budgets/get', { key: 'rl' }, other.apiKey)
    expect(view.status).toBe(200)
    // The refused authorize held nothing.
    expect(view.body.balance.held).toBe('0')

    limited.clock.advance(1000)
    const again = await limited.post('/v1/budgets/authorize', { key: 'rl', amount: '1', idempotencyKey: 'rl-1' }, p.apiKey)
    expect(again.status, JSON.stringify(again.body)).toBe(200)
    expect(again.body.replayed).toBe(false)
  })

  test('Retry-After counts the rest of the window, rounded up to whole seconds', async () => {
    const p = await limited.project()
    limited.clock.advance(1000 - (limited.clock() % 1000) + 250) // 250 ms into a window
    for (let i = 0; i < 5; i++) expect((await limited.post('/v1/budgets/get', { key: 'none' }, p.apiKey)).status).toBe(404)
    const refused = await limited.post('/v1/budgets/get', { key: 'none' }, p.apiKey)
    expectError(refused, 429, 'TOO_MANY_REQUESTS', DOCS)
    expect(headerOf(refused.headers, 'retry-after')).toBe('1')
    limited.clock.advance(749)
    expectError(await limited.post('/v1/budgets/get', { key: 'none' }, p.apiKey), 429, 'TOO_MANY_REQUESTS', DOCS)
    limited.clock.advance(1)
    expect((await limited.post('/v1/budgets/get', { key: 'none' }, p.apiKey)).status).toBe(404)
  })

  test('unauthenticated requests are refused with 401, not counted against a key', async () => {
    const p = await limited.project()
    limited.clock.advance(1000 - (limited.clock() % 1000))
    for (let i = 0; i < 10; i++) expectError(await limited.post('/v1/budgets/get', { key: 'none' }), 401, 'UNAUTHORIZED', DOCS)
    for (let i = 0; i < 5; i++) expect((await limited.post('/v1/budgets/get', { key: 'none' }, p.apiKey)).status).toBe(404)
  })
})
