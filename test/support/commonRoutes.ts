// The auth, envelope and body tests every route gets, from one helper (Unkey's
// runCommonRouteTests). Each call registers one describe block against a running test
// gateway; the caller starts that gateway with COMMON_GATEWAY's options so the docs URL and
// the body limit the assertions expect are the ones the gateway uses.
import { randomBytes } from 'node:crypto'
import http, { type IncomingHttpHeaders } from 'node:http'
import { beforeAll, describe, expect, test } from 'vitest'
import { drainCap } from '../../src/http/body.js'
import type { Access } from '../../src/http/route.js'
import { routes } from '../../src/http/routes/index.js'
import { checksDepthInHandler, MAX_JSON_DEPTH } from '../../src/kernel/validation.js'
import { SCOPES } from '../../src/keys/service.js'
import { ROOT_KEY, type TestGateway } from './gateway.js'

/** Options the gateway under common tests must be started with. */
export const COMMON_GATEWAY = { maxBodyBytes: 4096, docsUrl: 'https://docs.example.test' } as const

/**
 * What the helper sets up for each route, in a project of its own: a budget with one open
 * hold (h_1 of 1 on a hard `never` limit of 100, an hour to live, so moving the clock a few
 * seconds changes nothing), a second key (budgets:read only) that routes may revoke, and
 * COMMON_CATALOG.
 */
export const COMMON_BUDGET = {
  key: 'common-budget',
  limits: [{ id: 'total', window: 'never', enforce: 'hard', amount: '100' }],
  holds: { defaultTtlMs: 3_600_000, maxTtlMs: 86_400_000 },
} as const

/**
 * And a small catalog (POST /v1/config/apply): one metered feature, a published plan version,
 * and a customer subscribed to it since 2024, so the catalog's read routes have something to read.
 */
export const COMMON_CATALOG = {
  features: [{ slug: 'common-calls', title: 'Calls', unitOfMeasure: 'calls' }],
  plans: [{ slug: 'common', title: 'Common' }],
  planVersions: [
    {
      plan: 'common',
      version: 1,
      status: 'published',
      title: 'Common',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      features: [{ featureSlug: 'common-calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 1000 }],
    },
  ],
  customers: [{ id: 'common-customer' }],
  subscriptions: [{ id: 'common-sub', customerId: 'common-customer', phases: [{ plan: 'common', version: 1, startAt: Date.UTC(2024, 0, 1) }] }],
} as const

export interface CommonContext {
  projectId: string
  /** The project's key, every scope. */
  apiKey: string
  keyId: string
  budgetKey: string
  /** The open hold on the budget. */
  holdId: string
  /** A budgets:read key of the project that stays valid unless a route revokes it. */
  victimKeyId: string
  victimApiKey: string
  /** The catalog's customer and its published plan version. */
  customerId: string
  planVersionId: string
}

export interface CommonRoute {
  method: 'GET' | 'POST'
  path: string
  /** Looked up in src/http/routes when absent. */
  access?: Access
  /** A body the route accepts (200) in the context; the base the bad bodies are made from. */
  validBody?: unknown | ((ctx: CommonContext) => unknown)
  /** Values of the path's `:name` parameters that the route accepts (200) in the context. */
  pathParams?: (ctx: CommonContext) => Record<string, string>
  /** Query parameters of the valid request (GET routes that take a query). */
  query?: (ctx: CommonContext) => Record<string, string>
  /** Makes what the valid request reads (e.g. an invoice), once the context exists. */
  setup?: (ctx: CommonContext, gw: TestGateway) => Promise<void>
}

export interface AnyResponse {
  status: number
  body: any
  headers: Headers | IncomingHttpHeaders
}

export function headerOf(headers: Headers | IncomingHttpHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined
  const value = headers[name.toLowerCase()]
  return Array.isArray(value) ? value.join(', ') : value
}

/**
 * Asserts the spec's error envelope, exactly: `{error:{code,docs,message,requestId,details?}}`,
 * nothing else at either level, `docs` pointing at the code's page and the request id also in
 * the `x-request-id` header.
 */
export function expectError(res: AnyResponse, status: number, code: string, docsUrl: string = COMMON_GATEWAY.docsUrl): void {
  const context = `${status} ${code}; got ${res.status} ${JSON.stringify(res.body)}`
  expect(res.status, context).toBe(status)
  expect(headerOf(res.headers, 'content-type'), context).toMatch(/^application\/json/)
  expect(res.body !== null && typeof res.body === 'object', context).toBe(true)
  expect(Object.keys(res.body), context).toEqual(['error'])
  const error = res.body.error
  for (const key of Object.keys(error)) expect(['code', 'docs', 'message', 'requestId', 'details'], `unexpected error.${key}`).toContain(key)
  expect(error.code, context).toBe(code)
  expect(error.docs).toBe(`${docsUrl}/api-reference/errors/code/${code}`)
  expect(typeof error.message).toBe('string')
  expect(error.message.length).toBeGreaterThan(0)
  expect(typeof error.requestId).toBe('string')
  expect(error.requestId.length).toBeGreaterThan(0)
  if ('details' in error) expect(error.details !== null && typeof error.details === 'object' && !Array.isArray(error.details)).toBe(true)
  expect(headerOf(res.headers, 'x-request-id')).toBe(error.requestId)
}

/** A 400 whose details.issues names `path`. */
export function expectIssue(res: AnyResponse, path: string, docsUrl?: string): void {
  expectError(res, 400, 'BAD_REQUEST', docsUrl)
  const issues = res.body.error.details?.issues
  expect(Array.isArray(issues), 'details.issues is an array').toBe(true)
  for (const issue of issues) {
    expect(typeof issue.path).toBe('string')
    expect(typeof issue.message).toBe('string')
  }
  expect(
    issues.map((i: { path: string }) => i.path),
    `issues name ${path}`,
  ).toContain(path)
}

export interface RawRequest {
  method: string
  path: string
  headers?: Record<string, string>
  /** Sent with a Content-Length (unless headers say otherwise). */
  body?: string | Buffer
  /** Sent chunked (Transfer-Encoding: chunked), each awaited, then the request is ended. */
  chunks?: (string | Buffer)[]
  /**
   * Sent chunked, chunk after chunk, until more than `limit` bytes are out; the request is
   * then left open (never ended), so only the server's early answer (or its closing the
   * connection) can finish the exchange.
   */
  streamPast?: { limit: number; chunkBytes: number }
  /** Fails the request when no complete answer came by then. */
  deadlineMs?: number
}

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  text: string
  body: any
  /** Bytes of body the client had written when the answer came. */
  written: number
}

/**
 * One request over its own connection with node:http, for what fetch cannot send: no
 * Content-Type, an explicit Content-Length, a chunked body, a body the server answers early.
 */
export function rawRequest(baseUrl: string, request: RawRequest): Promise<RawResponse> {
  const url = new URL(request.path, baseUrl)
  const headers: Record<string, string> = { ...request.headers }
  if (request.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) {
    headers['content-length'] = String(Buffer.byteLength(request.body))
  }
  if (request.chunks !== undefined || request.streamPast !== undefined) headers['transfer-encoding'] = 'chunked'
  const deadlineMs = request.deadlineMs ?? 5000
  return new Promise<RawResponse>((resolve, reject) => {
    let settled = false
    let answered = false
    let written = 0
    const finish = (fn: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      fn()
    }
    const req = http.request(
      { host: url.hostname, port: Number(url.port), method: request.method, path: url.pathname + url.search, headers, agent: false },
      (res) => {
        answered = true
        const parts: Buffer[] = []
        res.on('data', (part: Buffer) => parts.push(part))
        res.on('error', (err) => finish(() => reject(err)))
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8')
          let body: unknown = text
          try {
            body = JSON.parse(text)
          } catch {
            /* not JSON: keep the text */
          }
          req.destroy()
          finish(() => resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body, written }))
        })
      },
    )
    // Writing after the server answered and closed may fail (EPIPE, ECONNRESET): the answer counts.
    req.on('error', (err) => {
      if (!answered) finish(() => reject(err))
    })
    const timer = setTimeout(() => {
      req.destroy()
      finish(() => reject(new Error(`${request.method} ${request.path}: no complete answer within ${deadlineMs} ms (${written} bytes written)`)))
    }, deadlineMs)

    const write = (chunk: string | Buffer) =>
      new Promise<void>((done) => {
        written += Buffer.byteLength(chunk)
        req.write(chunk, () => done())
      })
    const send = async () => {
      if (request.streamPast) {
        const { limit, chunkBytes } = request.streamPast
        while (!answered && !settled && written <= limit) await write('x'.repeat(chunkBytes))
        return // left open on purpose
      }
      if (request.chunks) {
        for (const chunk of request.chunks) {
          if (answered || settled) return
          await write(chunk)
        }
        req.end()
        return
      }
      if (request.body !== undefined) written += Buffer.byteLength(request.body)
      req.end(request.body)
    }
    send().catch((err: unknown) => {
      if (!answered) finish(() => reject(err))
    })
  })
}

/** A value of `levels` nested objects: `{a: {a: … {}}}`, `nested(1)` is `{}`. */
export function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {}
  for (let i = 1; i < levels; i++) value = { a: value }
  return value
}

/** The path of the first object past MAX_JSON_DEPTH in `nested(n)` put at `at`, itself at level `atLevel` of the body. */
export function tooDeepPath(at: string, atLevel: number): string {
  return at + '.a'.repeat(MAX_JSON_DEPTH + 1 - atLevel)
}

function accessOf(route: CommonRoute): Access {
  if (route.access) return route.access
  const found = routes.find((r) => r.method === route.method && r.path === route.path)
  if (!found) throw new Error(`runCommonRouteTests: ${route.method} ${route.path} is not in src/http/routes; pass access`)
  return found.access
}

/**
 * Registers the common tests for one route: authentication (401), authorization (403), the
 * error envelope and request id on every failure, and for POST routes every kind of bad body
 * (400, 413), each followed by a check that the project's state did not change. The last
 * test sends the valid body and expects it to be applied for the first time.
 */
export function runCommonRouteTests(getGw: () => TestGateway, route: CommonRoute, options: { docsUrl?: string; maxBodyBytes?: number } = {}): void {
  const docsUrl = options.docsUrl ?? COMMON_GATEWAY.docsUrl
  const maxBodyBytes = options.maxBodyBytes ?? COMMON_GATEWAY.maxBodyBytes
  const access = accessOf(route)
  const isPost = route.method === 'POST'
  const routeBody = routes.find((r) => r.method === route.method && r.path === route.path)?.body
  /** The route's handler checks depth per element (record-batch): an extra deep property is then refused by the schema. */
  const depthInHandler = routeBody !== undefined && checksDepthInHandler(routeBody)

  describe(`${route.method} ${route.path} (common route tests)`, () => {
    let gw: TestGateway
    let ctx: CommonContext

    const validBody = (): unknown => (typeof route.validBody === 'function' ? (route.validBody as (c: CommonContext) => unknown)(ctx) : (route.validBody ?? {}))
    /** The key that passes authentication and authorization on this route. */
    const goodKey = (): string => (access.kind === 'root' ? ROOT_KEY : ctx.apiKey)
    /** The route's path, its parameters filled in. */
    const path = (): string => {
      const params = route.pathParams?.(ctx) ?? {}
      const query = route.query ? `?${new URLSearchParams(route.query(ctx))}` : ''
      return route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name] ?? `:${name}`)) + query
    }
    const call = (key: string | undefined, headers?: Record<string, string>, body: unknown = validBody()): Promise<AnyResponse> => {
      if (isPost) return gw.post(path(), body, key, headers)
      if (!headers) return gw.get(path(), key)
      return rawRequest(gw.url, { method: 'GET', path: path(), headers: { ...(key === undefined ? {} : { authorization: `Bearer ${key}` }), ...headers } })
    }
    const rootCall = async (path: string, body: unknown): Promise<any> => {
      const res = await gw.post(path, body, ROOT_KEY)
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200)
      return res.body
    }
    const createKey = (scopes: string[], expiresAt?: number): Promise<{ keyId: string; apiKey: string }> =>
      rootCall('/v1/keys/create', { projectId: ctx.projectId, scopes, ...(expiresAt === undefined ? {} : { expiresAt }) })

    /**
     * Everything a bad request could have changed: the budget (limits, usage, holds), whether the
     * second key lives, and the customer's entitlements (their metadata shows the access flags).
     */
    const snapshot = async (): Promise<unknown> => {
      const view = await gw.post('/v1/budgets/get', { key: ctx.budgetKey }, ctx.apiKey)
      expect(view.status, JSON.stringify(view.body)).toBe(200)
      delete view.body.balance.asOf
      const victim = await gw.post('/v1/budgets/get', { key: ctx.budgetKey }, ctx.victimApiKey)
      const entitlements = await gw.post('/v1/access/entitlements/list', { customerId: ctx.customerId }, ctx.apiKey)
      expect(entitlements.status, JSON.stringify(entitlements.body)).toBe(200)
      return { budget: view.body, secondKeyStatus: victim.status, entitlements: entitlements.body }
    }
    /** Runs a request that must fail, and checks that the state is as it was before it. */
    const unchangedBy = async <T>(bad: () => Promise<T>): Promise<T> => {
      const before = await snapshot()
      const result = await bad()
      expect(await snapshot(), 'state after the rejected request').toEqual(before)
      return result
    }

    beforeAll(async () => {
      gw = getGw()
      const project = await gw.project()
      const upsert = await gw.post('/v1/budgets/upsert', COMMON_BUDGET, project.apiKey)
      expect(upsert.status, JSON.stringify(upsert.body)).toBe(200)
      const hold = await gw.post(
        '/v1/budgets/authorize',
        { key: COMMON_BUDGET.key, amount: '1', ttlMs: 3_600_000, idempotencyKey: 'common-hold' },
        project.apiKey,
      )
      expect(hold.status, JSON.stringify(hold.body)).toBe(200)
      const catalog = await gw.post('/v1/config/apply', COMMON_CATALOG, project.apiKey)
      expect(catalog.status, JSON.stringify(catalog.body)).toBe(200)
      const versions = await gw.post('/v1/plan-versions/list', {}, project.apiKey)
      expect(versions.status, JSON.stringify(versions.body)).toBe(200)
      ctx = {
        ...project,
        budgetKey: COMMON_BUDGET.key,
        holdId: hold.body.holdId,
        victimKeyId: '',
        victimApiKey: '',
        customerId: COMMON_CATALOG.customers[0].id,
        planVersionId: versions.body.planVersions[0].id,
      }
      const victim = await createKey(['budgets:read'])
      ctx.victimKeyId = victim.keyId
      ctx.victimApiKey = victim.apiKey
      await route.setup?.(ctx, gw)
    })

    // ---- 401: who is calling cannot be established ----------------------------------------

    test('no Authorization header → 401', async () => {
      if (access.kind === 'public') return
      const res = await unchangedBy(() => call(undefined))
      expectError(res, 401, 'UNAUTHORIZED', docsUrl)
    })

    test.each([
      ['Bearer with nothing after it', 'Bearer'],
      ['Bearer and a space', 'Bearer '],
      ['another scheme', 'Basic dXNlcjpwYXNz'],
      ['a key without the scheme', 'mk_' + 'A'.repeat(43)],
      ['a malformed key', 'Bearer not-a-key'],
      ['a key one character short', 'Bearer mk_' + 'A'.repeat(42)],
      ['a key with a character outside base64url', 'Bearer mk_' + 'A'.repeat(42) + '+'],
      ['two keys', 'Bearer mk_' + 'A'.repeat(43) + ' mk_' + 'B'.repeat(43)],
    ])('malformed credentials (%s) → 401', async (_name, authorization) => {
      if (access.kind === 'public') return
      const res = await unchangedBy(() => call(undefined, { authorization }))
      expectError(res, 401, 'UNAUTHORIZED', docsUrl)
    })

    test('an unknown well-formed key → 401', async () => {
      if (access.kind === 'public') return
      const unknown = 'mk_' + randomBytes(32).toString('base64url')
      expect(unknown).toMatch(/^mk_[A-Za-z0-9_-]{43}$/)
      const res = await unchangedBy(() => call(unknown))
      expectError(res, 401, 'UNAUTHORIZED', docsUrl)
    })

    test('a revoked key → 401', async () => {
      if (access.kind === 'public') return
      const key = await createKey(['*'])
      // Used once first, so that the gateway has it cached when it is revoked.
      expect((await gw.post('/v1/budgets/get', { key: ctx.budgetKey }, key.apiKey)).status).toBe(200)
      await rootCall('/v1/keys/revoke', { keyId: key.keyId })
      const res = await unchangedBy(() => call(key.apiKey))
      expectError(res, 401, 'UNAUTHORIZED', docsUrl)
    })

    test('an expired key → 401 once the clock passes expiresAt', async () => {
      if (access.kind === 'public') return
      const expiresAt = gw.clock() + 1000
      const key = await createKey(['*'], expiresAt)
      expect((await gw.post('/v1/budgets/get', { key: ctx.budgetKey }, key.apiKey)).status, 'valid before expiresAt').toBe(200)
      gw.clock.set(expiresAt)
      const res = await unchangedBy(() => call(key.apiKey))
      expectError(res, 401, 'UNAUTHORIZED', docsUrl)
    })

    // ---- 403: known caller, access refused ---------------------------------------------------

    test('a key lacking the scope → 403', async () => {
      if (access.kind === 'public') return
      // A root route takes no project key at all, whatever its scopes.
      const scopes = access.kind === 'root' ? ['*'] : SCOPES.filter((s) => s !== access.scope)
      const key = await createKey(scopes)
      const res = await unchangedBy(() => call(key.apiKey))
      expectError(res, 403, 'FORBIDDEN', docsUrl)
    })

    test(
      access.kind === 'project' ? 'the root key on a project route → 403' : 'the root key passes authentication (a bad body is 400, not 401/403)',
      async () => {
        if (access.kind === 'public') return
        if (access.kind === 'project') {
          const res = await unchangedBy(() => call(ROOT_KEY))
          expectError(res, 403, 'FORBIDDEN', docsUrl)
        } else if (isPost) {
          const res = await unchangedBy(() => call(ROOT_KEY, undefined, { zzUnknown: true }))
          expectError(res, 400, 'BAD_REQUEST', docsUrl)
        }
      },
    )

    // ---- 400 / 413: bad bodies -----------------------------------------------------------------

    if (isPost) {
      test('wrong content type → 400', async () => {
        const res = await unchangedBy(() => call(goodKey(), { 'content-type': 'text/plain' }, JSON.stringify(validBody())))
        expectIssue(res, '$', docsUrl)
      })

      test('no content type → 400', async () => {
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}` },
            body: JSON.stringify(validBody()),
          }),
        )
        expectIssue(res, '$', docsUrl)
      })

      test('a content type that only starts like JSON → 400', async () => {
        const res = await unchangedBy(() => call(goodKey(), { 'content-type': 'application/jsonp' }, JSON.stringify(validBody())))
        expectIssue(res, '$', docsUrl)
      })

      test('malformed JSON → 400 with details.issues', async () => {
        const text = JSON.stringify(validBody())
        const res = await unchangedBy(() => call(goodKey(), undefined, text.slice(0, -1)))
        expectIssue(res, '$', docsUrl)
        expect(res.body.error.details.issues.length).toBeGreaterThan(0)
      })

      test('an empty body → 400', async () => {
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}`, 'content-type': 'application/json' },
            body: '',
          }),
        )
        expectIssue(res, '$', docsUrl)
      })

      test.each([
        ['an array', []],
        ['a string', 'text'],
        ['null', null],
        ['a number', 42],
      ])('a body that is %s, not an object → 400 at $', async (_name, body) => {
        const res = await unchangedBy(() => call(goodKey(), undefined, JSON.stringify(body)))
        expectIssue(res, '$', docsUrl)
      })

      test('an unknown property → 400 naming $.<prop>', async () => {
        const body = { ...(validBody() as object), zzUnknown: 1 }
        const res = await unchangedBy(() => call(goodKey(), undefined, body))
        expectIssue(res, '$.zzUnknown', docsUrl)
      })

      test('a property of the wrong type → 400 naming its path', async () => {
        const body = { ...(validBody() as Record<string, unknown>) }
        const [name, value] = Object.entries(body)[0] ?? []
        expect(name, 'the valid body needs at least one property').toBeDefined()
        body[name!] = typeof value === 'string' ? 12345 : 'wrong type'
        const res = await unchangedBy(() => call(goodKey(), undefined, body))
        expectIssue(res, `$.${name}`, docsUrl)
      })

      test('a chunked body under the limit is read whole (400 naming its unknown property)', async () => {
        const text = JSON.stringify({ ...(validBody() as object), zzChunked: true })
        const chunks = text.match(/[\s\S]{1,7}/g) ?? []
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}`, 'content-type': 'application/json' },
            chunks,
          }),
        )
        expectIssue(res, '$.zzChunked', docsUrl)
      })

      const oversized = () => JSON.stringify({ ...(validBody() as object), pad: 'x'.repeat(maxBodyBytes) })

      test(`a body of exactly maxBodyBytes is read (not 413)`, async () => {
        const start = JSON.stringify({ ...(validBody() as object), pad: '' })
        const text = start.slice(0, -2) + 'x'.repeat(maxBodyBytes - Buffer.byteLength(start)) + '"}'
        expect(Buffer.byteLength(text)).toBe(maxBodyBytes)
        const res = await unchangedBy(() => call(goodKey(), undefined, text))
        expectIssue(res, '$.pad', docsUrl)
      })

      test('a Content-Length above the limit → 413', async () => {
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}`, 'content-type': 'application/json' },
            body: oversized(),
          }),
        )
        expectError(res, 413, 'PAYLOAD_TOO_LARGE', docsUrl)
      })

      test('a Content-Length above the limit → 413 even without a key (the size is checked first)', async () => {
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { 'content-type': 'application/json' },
            body: oversized(),
          }),
        )
        expectError(res, 413, 'PAYLOAD_TOO_LARGE', docsUrl)
      })

      test('an oversized body through fetch → 413 (read to its end first, so fetch sees the answer)', async () => {
        const res = await unchangedBy(() => call(goodKey(), undefined, oversized()))
        expectError(res, 413, 'PAYLOAD_TOO_LARGE', docsUrl)
        expect(headerOf(res.headers, 'connection'), 'the connection stays open for the next request').not.toBe('close')
      })

      test('a chunked body without Content-Length that passes the limit → 413 once it ends', async () => {
        const chunks = Array.from({ length: Math.ceil((2 * maxBodyBytes) / 1000) }, () => 'x'.repeat(1000))
        const res = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}`, 'content-type': 'application/json' },
            chunks,
          }),
        )
        expectError(res, 413, 'PAYLOAD_TOO_LARGE', docsUrl)
        expect(res.written, 'the whole body was sent: the answer waited for it').toBe(chunks.length * 1000)
      })

      test('a chunked body that never ends → 413 closing the connection once past the drain cap (no hang)', async () => {
        const outcome = await unchangedBy(() =>
          rawRequest(gw.url, {
            method: 'POST',
            path: route.path,
            headers: { authorization: `Bearer ${goodKey()}`, 'content-type': 'application/json' },
            streamPast: { limit: drainCap(maxBodyBytes), chunkBytes: 1000 },
          }).catch((error: Error) => error),
        )
        // The answer usually arrives; a client still writing may see the connection reset first.
        if (outcome instanceof Error) expect(outcome.message).not.toMatch(/no complete answer/)
        else {
          // (No Connection: close to look for: this client asked for it, so the server does not repeat it.)
          expectError(outcome, 413, 'PAYLOAD_TOO_LARGE', docsUrl)
          expect(outcome.written, 'answered once the body passed the drain cap').toBeGreaterThan(drainCap(maxBodyBytes))
        }
      })

      test(`a body nested past ${MAX_JSON_DEPTH} levels → 400 naming the first value too deep`, async () => {
        const res = await unchangedBy(() => call(goodKey(), undefined, { ...(validBody() as object), zzDeep: nested(MAX_JSON_DEPTH) }))
        expectIssue(res, depthInHandler ? '$.zzDeep' : tooDeepPath('$.zzDeep', 2), docsUrl)
      })

      test('a body of arrays nested as deep as the size limit allows → 400, not 500', async () => {
        const prefix = JSON.stringify({ ...(validBody() as object), zzDeep: 0 }).slice(0, -2)
        const levels = Math.floor((maxBodyBytes - Buffer.byteLength(prefix) - 1) / 2)
        const res = await unchangedBy(() => call(goodKey(), undefined, prefix + '['.repeat(levels) + ']'.repeat(levels) + '}'))
        expectIssue(res, depthInHandler ? '$.zzDeep' : '$.zzDeep' + '[0]'.repeat(MAX_JSON_DEPTH - 1), docsUrl)
      })

      test('the gateway still serves this route after the 413s', async () => {
        const res = await call(goodKey(), undefined, { zzAfter413: 1 })
        expectIssue(res, '$.zzAfter413', docsUrl)
      })
    }

    // ---- finally: the valid request is applied, once ----------------------------------------

    test('the valid request succeeds after all the rejected ones (200, first application, request id)', async () => {
      const res = await call(goodKey())
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(headerOf(res.headers, 'x-request-id')).toBeTruthy()
      if (res.body && typeof res.body === 'object' && 'replayed' in res.body) expect(res.body.replayed, 'applied for the first time').toBe(false)
    })
  })
}
