// The typed client's retries, against real refusals of a real gateway:
//  - 429: a gateway with a rate limit of 1 request per second per key, on the test's clock. The
//    client's sleep moves that clock instead of waiting, so a retry after Retry-After lands in
//    the next window; the retry sends the same body (the same idempotency key).
//  - 503: a gateway on a redis-server of this test's own, stalled with SIGSTOP: the gateway
//    answers 503 with Retry-After within its command timeout; the client's sleep resumes Redis
//    (SIGCONT) and waits until the gateway is ready, then the retry answers, applied once.
//    Settle and release inside hold() are retried the same way; an operation a replay could
//    apply twice (projects.create) is not retried.
//  - no answer at all (a closed port, a server that never answers): NetworkError after the
//    attempts, and a single attempt for an operation a replay could apply twice.
import { mkdtemp, rm } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { freePort, type RedisServerHandle, startRedisServer } from '../../src/infra/redis/embedded.js'
import {
  HoldReleaseError,
  MeteringClient,
  type MeteringClientOptions,
  MeteringError,
  NetworkError,
  RateLimitedError,
  replaySafe,
  ServiceUnavailableError,
} from '../../sdk/src/index.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'

interface Sent {
  path: string
  body: any
}

/** A client whose requests are listed (real fetch underneath) and whose waits are listed and handed to `onSleep`. */
function client(
  baseUrl: string,
  apiKey: string,
  onSleep: (ms: number) => Promise<void> | void,
  options: Partial<MeteringClientOptions> = {},
): { client: MeteringClient; sent: Sent[]; sleeps: number[] } {
  const sent: Sent[] = []
  const sleeps: number[] = []
  const counting: typeof fetch = (input, init) => {
    sent.push({ path: new URL(String(input)).pathname, body: init?.body === undefined ? undefined : JSON.parse(String(init.body)) })
    return fetch(input, init)
  }
  const sleep = async (ms: number) => {
    sleeps.push(ms)
    await onSleep(ms)
  }
  return { client: new MeteringClient({ baseUrl, apiKey, fetch: counting, sleep, ...options }), sent, sleeps }
}

async function failure(promise: Promise<unknown>): Promise<MeteringError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(MeteringError)
  return err as MeteringError
}

const BUDGET = { key: 'b', unit: 'USD', limits: [{ id: 'total', window: 'never' as const, enforce: 'hard' as const, amount: '100' }] }

describe('429: retried after Retry-After with the same body', () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startTestGateway({ rateLimit: 1 })
  })
  afterAll(async () => {
    await gw?.close()
  })

  /** A project with budget b, and the clock at the start of a fresh one-second window. */
  async function setUp(onSleep: (ms: number) => void, options: Partial<MeteringClientOptions> = {}) {
    const { apiKey } = await gw.project()
    const c = client(gw.url, apiKey, onSleep, options)
    gw.clock.set(Math.ceil((gw.clock() + 1) / 1000) * 1000)
    await c.client.budgets.upsert(BUDGET)
    c.sent.length = 0
    return c
  }

  test('the second request of the window: 429, the client waits Retry-After (the clock moves), the retry is applied', async () => {
    const { client: c, sent, sleeps } = await setUp((ms) => gw.clock.advance(ms))
    const hold = await c.budgets.authorize({ key: 'b', amount: '1', idempotencyKey: 'rl-1' })
    expect(hold).toMatchObject({ allowed: true, replayed: false })
    expect(sent).toHaveLength(2)
    expect(sent[1]).toEqual(sent[0])
    // Retry-After: 1 → 1000 ms, plus at most half the first backoff (200 ms) of jitter.
    expect(sleeps).toHaveLength(1)
    expect(sleeps[0]).toBeGreaterThanOrEqual(1000)
    expect(sleeps[0]).toBeLessThanOrEqual(1100)
  })

  test('still refused after the attempts: RateLimitedError with Retry-After; retry: false makes one attempt', async () => {
    const { client: c, sent, sleeps } = await setUp(() => undefined, { retry: { attempts: 3 } })
    const err = await failure(c.budgets.get({ key: 'b' }))
    expect(err).toBeInstanceOf(RateLimitedError)
    expect(err).toMatchObject({ status: 429, code: 'TOO_MANY_REQUESTS', attempts: 3, retryAfterMs: 1000 })
    expect(sent).toHaveLength(3)
    expect(sleeps).toHaveLength(2)

    sent.length = 0
    const once = await failure(c.budgets.get({ key: 'b' }, { retry: false }))
    expect(once).toMatchObject({ status: 429, attempts: 1 })
    expect(sent).toHaveLength(1)
  })
})

describe('503: a stalled Redis; retried when a replay is safe', () => {
  let tmp: string
  let redis: RedisServerHandle
  let gw: TestGateway
  let stalled = false

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'sdk-retry-'))
    redis = await startRedisServer({ dataDir: tmp, appendOnly: false })
    // A command timeout well above what a loaded machine takes, so that only the stall makes a 503.
    gw = await startTestGateway({ redisUrl: redis.url, redisTimeoutMs: 1_000 })
  })
  afterEach(() => resume())
  afterAll(async () => {
    resume()
    await gw?.close()
    await redis?.stop()
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  function stall(): void {
    process.kill(redis.pid, 'SIGSTOP')
    stalled = true
  }
  function resume(): void {
    if (stalled) process.kill(redis.pid, 'SIGCONT')
    stalled = false
  }
  /** The client's sleep: Redis comes back, and the wait ends once the gateway says it is ready. */
  async function heal(): Promise<void> {
    resume()
    await waitFor('the gateway to be ready again', async () => (await fetch(`${gw.url}/readyz`)).status === 200, 20_000)
  }

  async function setUp() {
    const { apiKey } = await gw.project()
    const c = client(gw.url, apiKey, heal)
    await c.client.budgets.upsert(BUDGET)
    c.sent.length = 0
    return c
  }

  test('authorize: 503 with Retry-After, the same body again once Redis is back, one hold', async () => {
    const { client: c, sent, sleeps } = await setUp()
    stall()
    const hold = await c.budgets.authorize({ key: 'b', amount: '2.5', idempotencyKey: 'stalled-1' })
    expect(hold.allowed).toBe(true)
    expect(sent).toHaveLength(2)
    expect(sent[1]).toEqual(sent[0])
    expect(sleeps).toHaveLength(1)
    expect(sleeps[0]).toBeGreaterThanOrEqual(1000)
    // Whether or not the stalled attempt reached Redis, it is counted once.
    const budget = await c.budgets.get({ key: 'b' })
    expect(budget.balance.held).toBe('2.5')
  })

  test('hold(): a settle and a release refused with 503 are retried until applied', async () => {
    const { client: c, sent } = await setUp()
    const done = await c.hold('b', '3', () => {
      stall()
      return { cost: '1.2' }
    })
    expect(done.settled).toMatchObject({ state: 'settled', settledAmount: '1.2' })

    const boom = new Error('step failed')
    const err = await c
      .hold('b', '3', () => {
        stall()
        throw boom
      })
      .catch((e: unknown) => e)
    expect(err).toBe(boom)
    const paths = sent.map((s) => s.path)
    expect(paths.filter((p) => p === '/v1/budgets/settle')).toHaveLength(2)
    expect(paths.filter((p) => p === '/v1/budgets/release')).toHaveLength(2)
    const budget = await c.budgets.get({ key: 'b' })
    expect(budget.balance.limits[0]).toMatchObject({ consumed: '1.2', held: '0' })
  })

  test('hold(): a release that still fails after its attempts is a HoldReleaseError carrying what the work threw', async () => {
    const { apiKey } = await gw.project()
    const { client: c } = client(gw.url, apiKey, () => undefined, { retry: { attempts: 2 } })
    await c.budgets.upsert(BUDGET)
    const boom = new Error('step failed')
    let holdId = ''
    const err = await c
      .hold('b', '3', (hold) => {
        holdId = hold.holdId
        stall()
        throw boom
      })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(HoldReleaseError)
    expect(err).toMatchObject({ holdId, workError: boom, cause: boom })
    expect((err as HoldReleaseError).releaseError).toMatchObject({ status: 503, attempts: 2 })
    await heal()
    // The stalled releases may still run once Redis resumes (a 503 does not say whether it was applied); a release by hand ends it either way.
    expect(await c.budgets.release({ key: 'b', holdId })).toMatchObject({ state: 'released' })
  })

  test('projects.create is not retried: a replay could create a second project', async () => {
    const { client: root, sent, sleeps } = client(gw.url, ROOT_KEY, heal)
    stall()
    const err = await failure(root.projects.create({ name: 'maybe' }))
    expect(err).toBeInstanceOf(ServiceUnavailableError)
    expect(err).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', reason: 'store_unavailable', retryAfterMs: 1000, attempts: 1 })
    expect(sent).toHaveLength(1)
    expect(sleeps).toEqual([])
  })
})

describe('no answer: NetworkError', () => {
  const servers: net.Server[] = []
  const sockets: net.Socket[] = []
  afterAll(async () => {
    for (const socket of sockets) socket.destroy()
    for (const server of servers) await new Promise((resolve) => server.close(resolve))
  })

  test('a closed port: every attempt of a read, a single one of projects.create', async () => {
    const url = `http://127.0.0.1:${await freePort()}`
    const { client: c, sent, sleeps } = client(url, 'mk_x', () => undefined, { retry: { attempts: 3 } })
    const err = await failure(c.budgets.get({ key: 'b' }))
    expect(err).toBeInstanceOf(NetworkError)
    expect(err).toMatchObject({ status: 0, code: 'NETWORK_ERROR', attempts: 3 })
    expect(sent).toHaveLength(3)
    // Exponential backoff with jitter: within [base/2, base] of 200, then 400.
    expect(sleeps[0]).toBeGreaterThanOrEqual(100)
    expect(sleeps[0]).toBeLessThanOrEqual(200)
    expect(sleeps[1]).toBeGreaterThanOrEqual(200)
    expect(sleeps[1]).toBeLessThanOrEqual(400)

    sent.length = 0
    expect(await failure(c.projects.create({ name: 'x' }))).toMatchObject({ code: 'NETWORK_ERROR', attempts: 1 })
    expect(sent).toHaveLength(1)
  })

  test('a server that never answers: each attempt times out after timeoutMs', async () => {
    const requests: string[] = []
    const server = net.createServer((socket) => {
      sockets.push(socket)
      socket.on('data', (chunk) => {
        const line = chunk.toString('latin1').split('\r\n', 1)[0]!
        if (/^[A-Z]+ \//.test(line)) requests.push(line.split(' ', 2).join(' '))
      })
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as net.AddressInfo
    const { client: c } = client(`http://127.0.0.1:${port}`, 'mk_x', () => undefined, { timeoutMs: 200, retry: { attempts: 2 } })
    const err = await failure(c.budgets.get({ key: 'b' }))
    expect(err).toBeInstanceOf(NetworkError)
    expect(err.message).toContain('timed out after 200 ms')
    expect(err.attempts).toBe(2)
    expect(requests).toEqual(['POST /v1/budgets/get', 'POST /v1/budgets/get'])
  })
})

describe('replaySafe: what a 503 or a lost answer may retry', () => {
  test.each([
    ['budgets.authorize', { key: 'b', amount: '1', idempotencyKey: 'k' }, true],
    ['budgets.release', { key: 'b', holdId: 'h_1' }, true],
    ['projects.create', { name: 'p' }, false],
    ['keys.create', { projectId: 'p' }, false],
    ['webhooks.upsert', { url: 'https://x', events: [] }, false],
    ['webhooks.upsert', { id: 'w', url: 'https://x', events: [] }, true],
    ['usage.record', { customerId: 'c', eventSlug: 'e' }, false],
    ['usage.record', { customerId: 'c', eventSlug: 'e', id: 'e-1' }, true],
    ['usage.recordBatch', { events: [{ id: 'a' }, { idempotencyKey: 'b' }] }, true],
    ['usage.recordBatch', { events: [{ id: 'a' }, {}] }, false],
  ] as const)('%s %j → %s', (operationId, body, safe) => {
    expect(replaySafe(operationId, body)).toBe(safe)
  })
})
