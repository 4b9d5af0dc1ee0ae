// Every route gets the common auth/envelope/body tests (one helper, iterated over the route
// list, so a new route without an entry in VALID_BODIES fails here), and the HTTP surface
// around the routes: 404/405, health, metrics, OpenAPI, request ids, value ranges with their
// exact JSON paths, isolation between projects, and a fuzz run that must not hurt the process.
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { routes } from '../../src/http/routes/index.js'
import { invoiceIdOf } from '../../src/invoices/service.js'
import { OPENAPI_PATH, renderOpenApi } from '../../scripts/openapi.js'
import {
  COMMON_BUDGET,
  COMMON_GATEWAY,
  expectError,
  expectIssue,
  headerOf,
  rawRequest,
  runCommonRouteTests,
  type CommonContext,
  type RawResponse,
} from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'
import { prng } from '../support/prng.js'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway({ ...COMMON_GATEWAY })
})
afterAll(async () => {
  await gw?.close()
})

/**
 * A body each route accepts in the helper's context (by operationId). Each one differs from
 * the context's state in a way a bad request that slipped through would show: upsert lowers
 * the limit, settle and release close h_1, revoke kills the second key.
 */
const VALID_BODIES: Record<string, (ctx: CommonContext) => unknown> = {
  'projects.create': () => ({ name: 'common' }),
  'keys.create': (ctx) => ({ projectId: ctx.projectId, scopes: ['budgets:read'] }),
  'keys.revoke': (ctx) => ({ keyId: ctx.victimKeyId }),
  'budgets.upsert': (ctx) => ({ ...COMMON_BUDGET, key: ctx.budgetKey, limits: [{ id: 'total', window: 'never', enforce: 'hard', amount: '50' }] }),
  'budgets.get': (ctx) => ({ key: ctx.budgetKey }),
  'budgets.series': (ctx) => ({ key: ctx.budgetKey, fromMs: Date.UTC(2024, 0, 1), toMs: Date.UTC(2024, 0, 2), interval: 'hour' }),
  'budgets.authorize': (ctx) => ({ key: ctx.budgetKey, amount: '2', ttlMs: 3_600_000, idempotencyKey: 'common-authorize' }),
  'budgets.settle': (ctx) => ({ key: ctx.budgetKey, holdId: ctx.holdId, amount: '1' }),
  'budgets.release': (ctx) => ({ key: ctx.budgetKey, holdId: ctx.holdId }),
  'budgets.charge': (ctx) => ({ key: ctx.budgetKey, amount: '3', idempotencyKey: 'common-charge' }),
  'budgets.record': (ctx) => ({ key: ctx.budgetKey, amount: '4', idempotencyKey: 'common-record' }),
  'config.apply': (ctx) => ({ budgets: [{ ...COMMON_BUDGET, key: ctx.budgetKey, limits: [{ id: 'total', window: 'never', enforce: 'hard', amount: '60' }] }] }),
  'features.list': () => undefined,
  'customers.list': () => ({ prefix: 'c', limit: 10 }),
  'plans.versions.list': () => ({ onlyPublished: true }),
  'planVersions.list': () => ({ onlyLatest: true }),
  'planVersions.get': () => undefined,
  'access.entitlements.list': (ctx) => ({ customerId: ctx.customerId }),
  'entitlements.get': (ctx) => ({ customerId: ctx.customerId }),
  'subscriptions.get': (ctx) => ({ customerId: ctx.customerId }),
  'access.update': (ctx) => ({ customerId: ctx.customerId, updates: { customerUsageLimitReached: true } }),
  'usage.record': (ctx) => ({ customerId: ctx.customerId, eventSlug: 'common.call', idempotencyKey: 'common-usage', properties: { value: 2 } }),
  'usage.recordBatch': (ctx) => ({ events: [{ customerId: ctx.customerId, eventSlug: 'common.call', id: 'common-batch-1' }] }),
  'usage.deadLetters.list': () => ({ limit: 10 }),
  'usage.deadLetters.replay': () => ({ ids: ['common-dead-letter'] }),
  'analytics.usage.get': (ctx) => ({ range: '7d', customer_id: ctx.customerId }),
  'analytics.usage.forecast': (ctx) => ({ customer_id: ctx.customerId, feature_slug: 'common.call', horizon_days: 7 }),
  'analytics.usage.series': (ctx) => ({ customer_id: ctx.customerId, from_ms: Date.UTC(2024, 0, 1), to_ms: Date.UTC(2024, 0, 8), interval: 'day' }),
  'webhooks.upsert': () => ({ url: 'http://127.0.0.1:9/common-hook', id: 'common-hook', events: ['limit.reached'] }),
  'webhooks.list': () => ({ event: 'limit.reached' }),
  'webhooks.delete': () => ({ id: 'common-hook' }),
  'webhooks.failures.list': () => ({ limit: 10 }),
  'webhooks.failures.replay': () => ({ deliveryIds: ['dlv_common'] }),
  'paymentMethods.create': (ctx) => ({
    paymentProvider: 'sandbox',
    customerId: ctx.customerId,
    successUrl: 'https://shop.example/ok',
    cancelUrl: 'https://shop.example/cancel',
  }),
  'paymentMethods.list': (ctx) => ({ customerId: ctx.customerId }),
  'invoices.get': () => undefined,
  'invoices.close': (ctx) => ({ customerId: ctx.customerId }),
  'invoices.list': (ctx) => ({ customerId: ctx.customerId, limit: 5 }),
  'admin.invoices.close': (ctx) => ({ projectId: ctx.projectId, customerId: ctx.customerId }),
  'runs.start': (ctx) => ({ customerId: ctx.customerId, budgetAmountMinor: 100, idempotencyKey: 'common-run-2' }),
  'runs.consume': () => ({ featureSlug: 'common-calls', idempotencyKey: 'common-consume' }),
  'runs.end': () => ({ status: 'completed' }),
  'runs.get': () => undefined,
  'wallet.balance': () => undefined,
  'wallet.credits.grant': (ctx) => ({ customerId: ctx.customerId, amount: '1', source: 'promo', idempotencyKey: 'common-grant' }),
  'wallet.topUp': (ctx) => ({ customerId: ctx.customerId, amount: '1', idempotencyKey: 'common-top-up' }),
}

/** Routes whose common tests run in a file of their own, on a gateway with what they need (by operationId). */
const COVERED_ELSEWHERE: Record<string, string> = { 'admin.sql': 'test/integration/cli.adminRoutes.test.ts (a gateway with a ClickHouse store)' }

/** Path parameters each parameterized route accepts in the helper's context (by operationId). */
const PATH_PARAMS: Record<string, (ctx: CommonContext) => Record<string, string>> = {
  'planVersions.get': (ctx) => ({ planVersionId: ctx.planVersionId }),
  // The common subscription's first monthly cycle (from 2024-01-01), closed by SETUP below.
  'invoices.get': (ctx) => ({ invoiceId: invoiceIdOf(ctx.projectId, ctx.customerId, 'common-sub', Date.UTC(2024, 0, 1)) }),
  // The run runSetup started for the route's project.
  'runs.consume': (ctx) => ({ runId: commonRunId(ctx) }),
  'runs.end': (ctx) => ({ runId: commonRunId(ctx) }),
  'runs.get': (ctx) => ({ runId: commonRunId(ctx) }),
}

/** The run runSetup started, by project (run ids are `run_<n>`, n = max(last + 1, now ms × 1000)). */
const commonRuns = new Map<string, string>()
function commonRunId(ctx: CommonContext): string {
  const runId = commonRuns.get(ctx.projectId)
  if (runId === undefined) throw new Error(`no common run in project ${ctx.projectId}`)
  return runId
}

/** Query parameters of GET routes that take a query (by operationId). */
const QUERIES: Record<string, (ctx: CommonContext) => Record<string, string>> = {
  'wallet.balance': (ctx) => ({ customerId: ctx.customerId }),
}

/** $10 in the common customer's wallet and a run of $5 (commonRunId) that lives an hour. */
async function runSetup(ctx: CommonContext, gw: TestGateway): Promise<void> {
  const topUp = await gw.post('/v1/wallet/top-up', { customerId: ctx.customerId, amount: '10', idempotencyKey: 'common-setup' }, ctx.apiKey)
  expect(topUp.status, JSON.stringify(topUp.body)).toBe(200)
  const run = await gw.post(
    '/v1/runs/start',
    { customerId: ctx.customerId, budgetAmountMinor: 500, idempotencyKey: 'common-run', ttlMs: 3_600_000 },
    ctx.apiKey,
  )
  expect(run.status, JSON.stringify(run.body)).toBe(200)
  expect(run.body.runId).toMatch(/^run_[1-9][0-9]*$/)
  commonRuns.set(ctx.projectId, run.body.runId)
}

/** What a route's valid request needs made first (by operationId). */
const SETUP: Record<string, (ctx: CommonContext, gw: TestGateway) => Promise<void>> = {
  'invoices.get': async (ctx, gw) => {
    await gw.services.invoices.closeDueCycles(ctx.projectId, gw.clock())
  },
  'runs.start': runSetup,
  'runs.consume': runSetup,
  'runs.end': runSetup,
  'runs.get': runSetup,
}

describe('every route gets the common route tests', () => {
  test('the coverage table names exactly the registered routes', () => {
    expect([...Object.keys(VALID_BODIES), ...Object.keys(COVERED_ELSEWHERE)].sort()).toEqual(routes.map((r) => r.operationId).sort())
  })
  for (const route of routes) {
    if (COVERED_ELSEWHERE[route.operationId]) continue
    const validBody = VALID_BODIES[route.operationId]
    if (!validBody) {
      test(`${route.method} ${route.path} has a valid body in VALID_BODIES`, () => {
        expect.fail(`${route.operationId} was added without common route coverage: add it to VALID_BODIES`)
      })
      continue
    }
    if (route.path.includes(':') && !PATH_PARAMS[route.operationId]) {
      test(`${route.method} ${route.path} has its path parameters in PATH_PARAMS`, () => {
        expect.fail(`${route.operationId} takes path parameters: add them to PATH_PARAMS`)
      })
      continue
    }
    runCommonRouteTests(() => gw, {
      method: route.method,
      path: route.path,
      access: route.access,
      validBody,
      pathParams: PATH_PARAMS[route.operationId],
      query: QUERIES[route.operationId],
      setup: SETUP[route.operationId],
    })
  }
})

describe('routing', () => {
  test.each([
    ['GET', '/v1/nope'],
    ['POST', '/v1/budgets/nope'],
    ['POST', '/v1/budgets/get/extra'],
    ['GET', '/'],
    ['POST', '/v2/budgets/get'],
  ])('unknown route %s %s → 404 envelope', async (method, path) => {
    const res = await rawRequest(gw.url, {
      method,
      path,
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      ...(method === 'POST' ? { body: '{}' } : {}),
    })
    expectError(res, 404, 'NOT_FOUND', COMMON_GATEWAY.docsUrl)
  })

  test.each([
    ['GET', '/v1/budgets/authorize', 'POST'],
    ['PUT', '/v1/budgets/get', 'POST'],
    ['DELETE', '/v1/keys/revoke', 'POST'],
    ['PATCH', '/v1/projects/create', 'POST'],
    ['POST', '/healthz', 'GET'],
    ['POST', '/readyz', 'GET'],
    ['PUT', '/livez', 'GET'],
    ['POST', '/metrics', 'GET'],
    ['DELETE', '/v1/openapi.json', 'GET'],
  ])('wrong method %s %s → 405 envelope with Allow: %s', async (method, path, allow) => {
    const res = await rawRequest(gw.url, {
      method,
      path,
      headers: { 'content-type': 'application/json' },
      ...(method === 'GET' || method === 'DELETE' ? {} : { body: '{}' }),
    })
    expectError(res, 405, 'METHOD_NOT_ALLOWED', COMMON_GATEWAY.docsUrl)
    expect(headerOf(res.headers, 'allow')).toBe(allow)
  })

  test('every registered route answers its own method (not 404/405)', async () => {
    for (const route of routes) {
      const res = route.method === 'POST' ? await gw.post(route.path, {}) : await gw.get(route.path)
      expect([404, 405], `${route.method} ${route.path} answered ${res.status}`).not.toContain(res.status)
    }
  })
})

describe('built-in endpoints', () => {
  test.each(['/healthz', '/readyz'])('GET %s → 200 with what it checked and a request id', async (path) => {
    const res = await gw.get(path)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: 'ok', checks: { gateway: 'ok', redis: 'ok' } })
    expect(headerOf(res.headers, 'x-request-id')).toBeTruthy()
  })

  test('GET /livez → 200', async () => {
    const res = await gw.get('/livez')
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: 'ok' })
  })

  test('GET /metrics counts requests per route and status and keeps a latency histogram per route', async () => {
    const metric = (text: string, line: string): number => {
      const found = text.split('\n').find((l) => l.startsWith(line + ' '))
      return found === undefined ? 0 : Number(found.slice(line.length + 1))
    }
    const { apiKey } = await gw.project()
    const before = (await gw.get('/metrics')).body as string
    for (let i = 0; i < 3; i++) expect((await gw.post('/v1/budgets/get', { key: 'no-such-budget' }, apiKey)).status).toBe(404)
    expect((await gw.post('/v1/budgets/get', { key: 1 }, apiKey)).status).toBe(400)
    const res = await gw.get('/metrics')
    expect(res.status).toBe(200)
    expect(headerOf(res.headers, 'content-type')).toMatch(/^text\/plain/)
    const after = res.body as string
    const route = 'route="/v1/budgets/get"'
    expect(metric(after, `metering_http_requests_total{${route},status="404"}`) - metric(before, `metering_http_requests_total{${route},status="404"}`)).toBe(3)
    expect(metric(after, `metering_http_requests_total{${route},status="400"}`) - metric(before, `metering_http_requests_total{${route},status="400"}`)).toBe(1)
    expect(after).toContain('# TYPE metering_http_requests_total counter')
    expect(after).toContain('# TYPE metering_http_request_duration_seconds histogram')
    const count = metric(after, `metering_http_request_duration_seconds_count{${route}}`)
    expect(count - metric(before, `metering_http_request_duration_seconds_count{${route}}`)).toBe(4)
    expect(metric(after, `metering_http_request_duration_seconds_bucket{${route},le="+Inf"}`)).toBe(count)
    expect(after).toMatch(new RegExp(`^metering_http_request_duration_seconds_sum\\{${route.replace(/[/.]/g, '\\$&')}\\} [0-9.e-]+$`, 'm'))
    // Buckets are cumulative.
    const buckets = after
      .split('\n')
      .filter((l) => l.startsWith(`metering_http_request_duration_seconds_bucket{${route},`))
      .map((l) => Number(l.split(' ').pop()))
    expect(buckets.length).toBeGreaterThan(2)
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!).toBeGreaterThanOrEqual(buckets[i - 1]!)
  })

  test('GET /v1/openapi.json serves the committed document, generated from the routes', async () => {
    const res = await gw.get('/v1/openapi.json')
    expect(res.status).toBe(200)
    expect(headerOf(res.headers, 'content-type')).toMatch(/^application\/json/)
    expect(res.body).toEqual(JSON.parse(renderOpenApi()))
    expect(res.body).toEqual(JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')))
  })
})

describe('request ids', () => {
  test('success answers carry a generated x-request-id, different for each request', async () => {
    const { apiKey } = await gw.project()
    const a = await gw.post('/v1/budgets/upsert', { key: 'rid', limits: [] }, apiKey)
    const b = await gw.post('/v1/budgets/get', { key: 'rid' }, apiKey)
    expect(a.status).toBe(200)
    expect(b.status).toBe(200)
    const ids = [headerOf(a.headers, 'x-request-id'), headerOf(b.headers, 'x-request-id')]
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
    expect(ids[0]).not.toBe(ids[1])
  })

  test('a client-supplied x-request-id is echoed, on success and in the error envelope', async () => {
    const { apiKey } = await gw.project()
    const ok = await gw.post('/v1/budgets/upsert', { key: 'echo', limits: [] }, apiKey, { 'x-request-id': 'client-trace.42:a_b' })
    expect(ok.status).toBe(200)
    expect(headerOf(ok.headers, 'x-request-id')).toBe('client-trace.42:a_b')
    const bad = await gw.post('/v1/budgets/get', { key: 'echo', extra: 1 }, apiKey, { 'x-request-id': 'client-trace.43' })
    expectError(bad, 400, 'BAD_REQUEST', COMMON_GATEWAY.docsUrl)
    expect(bad.body.error.requestId).toBe('client-trace.43')
    const unauthenticated = await gw.post('/v1/budgets/get', { key: 'echo' }, undefined, { 'x-request-id': 'client-trace.44' })
    expectError(unauthenticated, 401, 'UNAUTHORIZED', COMMON_GATEWAY.docsUrl)
    expect(unauthenticated.body.error.requestId).toBe('client-trace.44')
    const missing = await gw.get('/v1/nope', undefined)
    expectError(missing, 404, 'NOT_FOUND', COMMON_GATEWAY.docsUrl)
  })

  test.each([
    ['too long', 'r'.repeat(129)],
    ['with spaces', 'a b c'],
    ['with quotes and angle brackets', '"><script>'],
  ])('a supplied x-request-id %s is not echoed; a generated one is used', async (_name, given) => {
    const res = await rawRequest(gw.url, { method: 'GET', path: '/healthz', headers: { 'x-request-id': given } })
    expect(res.status).toBe(200)
    const id = headerOf(res.headers, 'x-request-id')
    expect(id).toBeTruthy()
    expect(id).not.toBe(given)
    expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
  })
})

describe('out-of-range values → 400 with the exact JSON path, and nothing changes', () => {
  let apiKey: string
  const MAX_AMOUNT = '9999999999999999999.99999999'
  beforeAll(async () => {
    ;({ apiKey } = await gw.project())
    const up = await gw.post(
      '/v1/budgets/upsert',
      { key: 'range', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: MAX_AMOUNT }], holds: { defaultTtlMs: 60_000, maxTtlMs: 3_600_000 } },
      apiKey,
    )
    expect(up.status).toBe(200)
  })
  const view = async () => {
    const res = await gw.post('/v1/budgets/get', { key: 'range' }, apiKey)
    expect(res.status).toBe(200)
    delete res.body.balance.asOf
    return res.body
  }
  const base = { key: 'range', amount: '1', idempotencyKey: 'range-idem' }

  test.each<[string, Record<string, unknown>, string]>([
    ['ttlMs 0', { ttlMs: 0 }, '$.ttlMs'],
    ['ttlMs negative', { ttlMs: -5 }, '$.ttlMs'],
    ['ttlMs fractional', { ttlMs: 1.5 }, '$.ttlMs'],
    ['ttlMs as a string', { ttlMs: '1000' }, '$.ttlMs'],
    ['ttlMs above the budget maxTtlMs', { ttlMs: 3_600_001 }, '$.ttlMs'],
    ['amount with 9 fractional digits', { amount: '1.123456789' }, '$.amount'],
    ['amount with 20 integer digits', { amount: '12345678901234567890' }, '$.amount'],
    ['amount negative', { amount: '-1' }, '$.amount'],
    ['amount with an exponent', { amount: '1e3' }, '$.amount'],
    ['amount with a leading dot', { amount: '.5' }, '$.amount'],
    ['amount with a trailing dot', { amount: '1.' }, '$.amount'],
    ['amount with spaces', { amount: ' 1' }, '$.amount'],
    ['amount as a JSON number', { amount: 1 }, '$.amount'],
    ['amount empty', { amount: '' }, '$.amount'],
    ['key of 129 chars', { key: 'k'.repeat(129) }, '$.key'],
    ['key empty', { key: '' }, '$.key'],
    ['key with a bad first char', { key: '-range' }, '$.key'],
    ['key starting with a dot', { key: '.range' }, '$.key'],
    ['key with a space', { key: 'ran ge' }, '$.key'],
    ['key with a character outside the set', { key: 'range#1' }, '$.key'],
    ['idempotencyKey of 257 chars', { idempotencyKey: 'i'.repeat(257) }, '$.idempotencyKey'],
    ['idempotencyKey empty', { idempotencyKey: '' }, '$.idempotencyKey'],
    ['idempotencyKey missing', { idempotencyKey: undefined }, '$.idempotencyKey'],
    ['amount missing', { amount: undefined }, '$.amount'],
  ])('authorize with %s → 400 at %s', async (_name, change, path) => {
    const before = await view()
    const res = await gw.post('/v1/budgets/authorize', { ...base, ...change }, apiKey)
    expectIssue(res, path, COMMON_GATEWAY.docsUrl)
    expect(await view()).toEqual(before)
  })

  test.each<[string, unknown, string]>([
    [
      'a limit amount deep in the array',
      [
        { id: 'a', window: 'day', enforce: 'hard', amount: '1' },
        { id: 'b', window: 'day', enforce: 'hard', amount: '1.000000001' },
      ],
      '$.limits[1].amount',
    ],
    ['an unknown window', [{ id: 'a', window: 'year', enforce: 'hard', amount: '1' }], '$.limits[0].window'],
    ['an unknown property inside a limit', [{ id: 'a', window: 'day', enforce: 'hard', amount: '1', zz: 1 }], '$.limits[0].zz'],
    [
      'a duplicate limit id',
      [
        { id: 'a', window: 'day', enforce: 'hard', amount: '1' },
        { id: 'a', window: 'week', enforce: 'soft', amount: '2' },
      ],
      '$.limits[1].id',
    ],
  ])('upsert with %s → 400 at %s', async (_name, limits, path) => {
    const before = await view()
    const res = await gw.post('/v1/budgets/upsert', { key: 'range', limits }, apiKey)
    expectIssue(res, path, COMMON_GATEWAY.docsUrl)
    expect(await view()).toEqual(before)
  })

  test('upsert with holds.maxTtlMs 0 → 400 at $.holds.maxTtlMs', async () => {
    const before = await view()
    const res = await gw.post('/v1/budgets/upsert', { key: 'range', limits: [], holds: { maxTtlMs: 0 } }, apiKey)
    expectIssue(res, '$.holds.maxTtlMs', COMMON_GATEWAY.docsUrl)
    expect(await view()).toEqual(before)
  })

  // The spec gives lengths in characters, and so does JSON Schema's maxLength (code points),
  // which is what the published OpenAPI document promises clients. TypeBox counts UTF-16 code
  // units, so 256 characters outside the BMP (512 units) are refused today.
  test('an idempotencyKey of 256 characters outside the BMP is accepted; 257 are not', async () => {
    const ok = await gw.post('/v1/budgets/authorize', { key: 'range', amount: '1', ttlMs: 3_600_000, idempotencyKey: '\u{1F600}'.repeat(256) }, apiKey)
    expect(ok.status, JSON.stringify(ok.body).slice(0, 300)).toBe(200)
    const tooLong = await gw.post('/v1/budgets/authorize', { key: 'range', amount: '1', ttlMs: 3_600_000, idempotencyKey: '\u{1F600}'.repeat(257) }, apiKey)
    expectIssue(tooLong, '$.idempotencyKey', COMMON_GATEWAY.docsUrl)
  })

  test('the boundaries themselves are accepted', async () => {
    const key128 = 'k'.repeat(128)
    const up = await gw.post('/v1/budgets/upsert', { key: key128, limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: MAX_AMOUNT }] }, apiKey)
    expect(up.status, JSON.stringify(up.body)).toBe(200)
    const odd = await gw.post('/v1/budgets/upsert', { key: '9a:/_.@-Z', limits: [] }, apiKey)
    expect(odd.status, JSON.stringify(odd.body)).toBe(200)
    const max = await gw.post('/v1/budgets/authorize', { key: key128, amount: MAX_AMOUNT, ttlMs: 1, idempotencyKey: 'i'.repeat(256) }, apiKey)
    expect(max.status, JSON.stringify(max.body)).toBe(200)
    expect(max.body.amount).toBe(MAX_AMOUNT)
    const tiny = await gw.post('/v1/budgets/authorize', { key: 'range', amount: '0.00000001', ttlMs: 3_600_000, idempotencyKey: 'x' }, apiKey)
    expect(tiny.status, JSON.stringify(tiny.body)).toBe(200)
    expect(tiny.body.amount).toBe('0.00000001')
  })
})

describe('projects are isolated', () => {
  test("another project's key cannot see or touch a budget (404), and the owner's budget is unchanged", async () => {
    const a = await gw.project()
    const b = await gw.project()
    const up = await gw.post('/v1/budgets/upsert', { key: 'shared-name', limits: [{ id: 'd', window: 'day', enforce: 'hard', amount: '10' }] }, a.apiKey)
    expect(up.status).toBe(200)
    const hold = await gw.post('/v1/budgets/authorize', { key: 'shared-name', amount: '1', idempotencyKey: 'h' }, a.apiKey)
    expect(hold.status).toBe(200)
    const view = async () => {
      const res = await gw.post('/v1/budgets/get', { key: 'shared-name' }, a.apiKey)
      delete res.body.balance.asOf
      return res.body
    }
    const before = await view()
    for (const [path, body] of [
      ['/v1/budgets/get', { key: 'shared-name' }],
      ['/v1/budgets/authorize', { key: 'shared-name', amount: '1', idempotencyKey: 'other' }],
      ['/v1/budgets/settle', { key: 'shared-name', holdId: hold.body.holdId, amount: '1' }],
      ['/v1/budgets/release', { key: 'shared-name', holdId: hold.body.holdId }],
      ['/v1/budgets/charge', { key: 'shared-name', amount: '1', idempotencyKey: 'other' }],
      ['/v1/budgets/record', { key: 'shared-name', amount: '1', idempotencyKey: 'other' }],
    ] as const) {
      const res = await gw.post(path, body, b.apiKey)
      expectError(res, 404, 'NOT_FOUND', COMMON_GATEWAY.docsUrl)
    }
    expect(await view()).toEqual(before)
    // The same key in B names B's own budget.
    const own = await gw.post('/v1/budgets/upsert', { key: 'shared-name', limits: [] }, b.apiKey)
    expect(own.status).toBe(200)
    expect(own.body.created).toBe(true)
    expect(await view()).toEqual(before)
  })

  test('a project key cannot create keys for another project (403)', async () => {
    const a = await gw.project()
    const b = await gw.project()
    const res = await gw.post('/v1/keys/create', { projectId: a.projectId }, b.apiKey)
    expectError(res, 403, 'FORBIDDEN', COMMON_GATEWAY.docsUrl)
    const own = await gw.post('/v1/keys/create', { projectId: b.projectId, scopes: ['budgets:read'] }, b.apiKey)
    expect(own.status).toBe(200)
    expect(own.body.projectId).toBe(b.projectId)
  })
})

// ---- fuzz -------------------------------------------------------------------------------------

const STATUS_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  402: 'BUDGET_EXCEEDED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
}

describe('nothing a client sends hurts the process', () => {
  const seed = Number(process.env.FUZZ_SEED ?? 20250115)
  const rand = prng(seed)
  const int = (n: number) => Math.floor(rand() * n)
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!
  const chance = (p: number) => rand() < p
  // Header names: letters, digits and '-' only. uWS 20.30 never answers a request whose header
  // names hold any other token character (RFC 9110 allows !#$%&'*+.^_`|~); see the known
  // limitation test below.
  const TOKEN = '-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'
  const RESERVED = new Set([
    'content-length',
    'transfer-encoding',
    'host',
    'connection',
    'expect',
    'upgrade',
    'content-type',
    'authorization',
    'x-request-id',
    'te',
    'trailer',
  ])
  const headerValue = (max = 80) => {
    let s = ''
    for (let i = int(max); i > 0; i--) s += chance(0.9) ? String.fromCharCode(0x20 + int(0x5f)) : String.fromCharCode(pick([0x09, 0x80 + int(0x80)]))
    return s.trim()
  }
  const headerName = () => {
    let s = ''
    for (let i = 1 + int(20); i > 0; i--) s += TOKEN[int(TOKEN.length)]
    return RESERVED.has(s.toLowerCase()) ? 'x-' + s : s
  }
  const randomString = (max = 40) => {
    let s = ''
    for (let i = int(max); i > 0; i--) s += String.fromCharCode(chance(0.7) ? 0x20 + int(0x5f) : int(0x10000))
    return s
  }
  const randomJson = (depth = 0): unknown => {
    switch (depth > 3 ? int(4) : int(7)) {
      case 0:
        return null
      case 1:
        return chance(0.5)
      case 2:
        return pick([0, -1, 1.5, 1e308, -1e-308, Number.MAX_SAFE_INTEGER + 2, 2 ** 64, int(1e9)])
      case 3:
        return pick(['', '1', '1.5', '-1', '0.000000001', '9'.repeat(25), randomString(), '__proto__', 'h_1', 'h_0', 'h_99999999999999999'])
      case 4:
        return Array.from({ length: int(4) }, () => randomJson(depth + 1))
      default: {
        const o: Record<string, unknown> = {}
        for (let i = int(4); i > 0; i--)
          o[pick(['key', 'amount', 'ttlMs', 'idempotencyKey', '__proto__', 'constructor', randomString(10)])] = randomJson(depth + 1)
        return o
      }
    }
  }
  const validAuthorize = () => ({ key: 'fuzz', amount: pick(['1', '0.5', '1000000', '0']), idempotencyKey: `f-${int(1e9)}`, ttlMs: pick([1, 1000, 60_000]) })
  const body = (): string | Buffer => {
    switch (int(9)) {
      case 0:
        return Buffer.from(Array.from({ length: int(300) }, () => int(256)))
      case 1:
        return JSON.stringify(randomJson())
      case 2: {
        const b: Record<string, unknown> = validAuthorize()
        const field = pick(['key', 'amount', 'ttlMs', 'idempotencyKey', randomString(8)])
        if (chance(0.3)) delete b[field]
        else b[field] = randomJson()
        return JSON.stringify(b)
      }
      case 3:
        return JSON.stringify({ ...validAuthorize(), amount: randomString(25), idempotencyKey: randomString(300) })
      case 4: {
        const n = 1 + int(3000)
        return chance(0.5) ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n)
      }
      case 5:
        return chance(0.5)
          ? 'x'.repeat(COMMON_GATEWAY.maxBodyBytes + 1 + int(3000))
          : JSON.stringify({ ...validAuthorize(), pad: 'y'.repeat(COMMON_GATEWAY.maxBodyBytes) })
      case 6:
        return pick([
          '{"__proto__":{"key":"fuzz"},"key":"fuzz","amount":"1","idempotencyKey":"p"}',
          '{"key":"fuzz","key":"other","amount":"1","idempotencyKey":"dup"}',
          '\ufeff{"key":"fuzz","amount":"1","idempotencyKey":"bom"}',
          '{"key":"fuzz","amount":"1","idempotencyKey":"trail"} garbage',
          '{"key":"fuzz","amount":"1","idempotencyKey":"n","ttlMs":1e999}',
          '{"key":"fuzz","amount":"1","idempotencyKey":"\\ud800"}',
          '',
          ' ',
          'null',
          'true',
          '"',
          '{}',
          '[]',
          '{"key":null}',
        ])
      case 7:
        return JSON.stringify(validAuthorize())
      default:
        return Buffer.concat([Buffer.from(JSON.stringify(validAuthorize()).slice(0, -1)), Buffer.from([0xff, 0xfe, 0x00]), Buffer.from('}')])
    }
  }
  let project: { projectId: string; apiKey: string }

  beforeAll(async () => {
    project = await gw.project()
    const up = await gw.post(
      '/v1/budgets/upsert',
      { key: 'fuzz', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '100' }], holds: { defaultTtlMs: 1000, maxTtlMs: 60_000 } },
      project.apiKey,
    )
    expect(up.status).toBe(200)
  })

  test(`~300 random bodies and headers to authorize get 4xx envelopes or 200, never a 5xx (seed ${seed})`, async () => {
    const failures: string[] = []
    const seen = new Map<number, number>()
    for (let i = 0; i < 300; i++) {
      const headers: Record<string, string> = {}
      const auth = int(10)
      if (auth < 6) headers.authorization = `${pick(['Bearer', 'bearer', 'BEARER'])} ${project.apiKey}`
      else if (auth === 6) headers.authorization = `Bearer ${headerValue(60)}`
      else if (auth === 7) headers.authorization = headerValue()
      else if (auth === 8) headers.authorization = `Bearer ${ROOT_KEY}`
      const ct = int(10)
      if (ct < 5) headers['content-type'] = 'application/json'
      else if (ct < 8)
        headers['content-type'] = pick([
          'application/json; charset=utf-8',
          'APPLICATION/JSON',
          'application/json;',
          'text/plain',
          'application/jsonx',
          '',
          'multipart/form-data; boundary=x',
        ])
      else if (ct === 8) headers['content-type'] = headerValue()
      if (chance(0.3)) headers['x-request-id'] = chance(0.5) ? headerValue(150) : `fz-${i}`
      for (let n = int(4); n > 0; n--) headers[headerName()] = headerValue()
      const payload = body()
      const chunked = chance(0.2)
      const request = chunked
        ? {
            method: 'POST',
            path: '/v1/budgets/authorize',
            headers,
            chunks:
              (Buffer.isBuffer(payload) ? payload : Buffer.from(payload)).length === 0
                ? []
                : splitRandomly(Buffer.isBuffer(payload) ? payload : Buffer.from(payload), int),
          }
        : { method: 'POST', path: '/v1/budgets/authorize', headers, body: payload }
      const describeCase = () => `#${i} headers=${JSON.stringify(headers)} chunked=${chunked} body=${JSON.stringify(payload.toString().slice(0, 200))}`
      let res: RawResponse
      try {
        res = await rawRequest(gw.url, { ...request, deadlineMs: 2000 })
      } catch (error) {
        failures.push(`${describeCase()}: ${(error as Error).message}`)
        continue
      }
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1)
      try {
        if (res.status === 200) {
          expect(res.body.allowed).toBe(true)
          expect(headerOf(res.headers, 'x-request-id')).toBeTruthy()
        } else {
          const code = STATUS_CODES[res.status]
          expect(code, `unexpected status ${res.status}`).toBeDefined()
          expectError(res, res.status, code!, COMMON_GATEWAY.docsUrl)
        }
        if (headers['x-request-id'] === `fz-${i}`) expect(headerOf(res.headers, 'x-request-id')).toBe(`fz-${i}`)
      } catch (error) {
        failures.push(`${describeCase()}: ${res.status} ${res.text.slice(0, 300)}: ${(error as Error).message.split('\n')[0]}`)
      }
    }
    expect(failures, `${failures.length} failures; statuses ${JSON.stringify([...seen])}`).toEqual([])
    // The mix reached past authentication and validation, not only the front door.
    const mix = JSON.stringify([...seen].sort())
    for (const status of [200, 400, 401, 402, 403, 413]) expect(seen.get(status) ?? 0, `status ${status} in ${mix}`).toBeGreaterThan(0)
  })

  test('garbage on raw sockets (broken request lines, headers, framing) leaves the gateway serving', async () => {
    const garbage: (string | Buffer)[] = [
      'GARBAGE\r\n\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\nabc',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\nabc',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\nabc',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nabc\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nbadheader\r\nContent-Length: 1\r\n\r\na',
      'POST /v1/budgets/authorize HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}',
      `POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      'GET /v1/%ZZ%00%E0%A4%A HTTP/1.1\r\nHost: x\r\n\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x00\x01\x02\r\nContent-Length: 2\r\n\r\n{}',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}GET /healthz HTTP/1.1\r\n\r\n',
      'POST /v1/budgets/authorize HTTP/1.1\r\nHost: x\r\n',
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]), // a TLS ClientHello
    ]
    const rand2 = prng(seed + 1)
    for (let i = 0; i < 30; i++) garbage.push(Buffer.from(Array.from({ length: 1 + Math.floor(rand2() * 400) }, () => Math.floor(rand2() * 256))))
    const port = Number(new URL(gw.url).port)
    // Each socket is closed by the server or, at the latest after 1 s, by us: we wait for the
    // server's answer or close, never for time to pass.
    await Promise.all(
      garbage.map(
        (text) =>
          new Promise<void>((resolve) => {
            const socket = net.connect(port, '127.0.0.1')
            const timer = setTimeout(() => socket.destroy(), 1000)
            socket.on('error', () => {})
            socket.on('close', () => {
              clearTimeout(timer)
              resolve()
            })
            socket.on('data', () => {})
            socket.write(text, () => socket.end())
          }),
      ),
    )
    expect((await gw.get('/healthz')).status).toBe(200)
  })

  // uWebSockets.js 20.30 drops a request whose header names hold a token character other than
  // letters, digits and '-' (e.g. `x_trace`, `x.trace`, legal under RFC 9110), and one with more
  // than 50 headers: no 400, no close, the socket idles until uWS's ~10 s timeout. It does not
  // hurt the process, but the client hangs. test.fails keeps this visible: once uWS answers
  // (an upgrade), this starts failing and should become a plain test.
  test.fails.each([
    ['an underscore in a header name', { x_trace: '1' }],
    ['a dot in a header name', { 'x.trace': '1' }],
    ['more than 50 headers', Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`x-h${i}`, 'v']))],
  ])('KNOWN uWS LIMITATION: a request with %s is answered (it is not: no answer within 1 s)', async (_name, headers) => {
    const res = await rawRequest(gw.url, { method: 'GET', path: '/healthz', headers, deadlineMs: 1000 })
    expect(res.status).toBeGreaterThanOrEqual(200)
  })

  test('after the fuzz, the gateway answers a valid authorize with 200', async () => {
    const res = await gw.post('/v1/budgets/authorize', { key: 'fuzz', amount: '1', idempotencyKey: 'after-fuzz', ttlMs: 60_000 }, project.apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.allowed).toBe(true)
    expect(res.body.replayed).toBe(false)
    expect((await gw.get('/healthz')).status).toBe(200)
  })
})

function splitRandomly(data: Buffer, int: (n: number) => number): Buffer[] {
  const parts: Buffer[] = []
  for (let at = 0; at < data.length; ) {
    const size = 1 + int(Math.min(512, data.length - at))
    parts.push(data.subarray(at, at + size))
    at += size
  }
  return parts
}
