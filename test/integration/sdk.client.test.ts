// The typed client (sdk/) against a real gateway over the shared test Redis: the generated
// methods (body, path, query and no parameters), every non-2xx answer as its typed error with
// the envelope's fields (402 with blocked, remedy and balance), no retry of a 4xx, hold()
// (settle what the work reports, release when it throws, the excess recorded, replays by
// idempotency key) and record() (batches of maxEvents, one result per event in order, linger,
// flush, close; every accepted event in Redis once).
import { Queue, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { INGEST_QUEUE, QUEUE_PREFIX } from '../../src/events/queue.js'
import type { IngestJobData } from '../../src/events/types.js'
import { eventsOfJob } from '../../src/events/jobs.js'
import {
  BadRequestError,
  BudgetExceededError,
  ConflictError,
  MeteringClient,
  type MeteringClientOptions,
  MeteringError,
  NotFoundError,
  UnauthorizedError,
  type UsageEvent,
} from '../../sdk/src/index.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'
import { testRedis } from '../support/redis.js'

let gw: TestGateway
let redis: Redis
let queue: Queue<IngestJobData>

beforeAll(async () => {
  gw = await startTestGateway()
  redis = testRedis()
  queue = new Queue<IngestJobData>(INGEST_QUEUE, { connection: redis, prefix: QUEUE_PREFIX })
})
afterAll(async () => {
  await queue?.close()
  await gw?.close()
  redis?.disconnect()
})

/** Every request the client sends: its path and its JSON body (real fetch underneath). */
interface Sent {
  path: string
  body: any
}

function client(apiKey: string, options: Partial<MeteringClientOptions> = {}): { client: MeteringClient; sent: Sent[] } {
  const sent: Sent[] = []
  const counting: typeof fetch = (input, init) => {
    sent.push({ path: new URL(String(input)).pathname, body: init?.body === undefined ? undefined : JSON.parse(String(init.body)) })
    return fetch(input, init)
  }
  return { client: new MeteringClient({ baseUrl: gw.url, apiKey, fetch: counting, ...options }), sent }
}

/** A new project, and a client of its key with a budget `b` (hard: 10 a day, 3 per hold at most by the test). */
async function project(options: Partial<MeteringClientOptions> = {}): Promise<{ projectId: string; client: MeteringClient; sent: Sent[] }> {
  const root = client(ROOT_KEY).client
  const { projectId, apiKey } = await root.projects.create({ name: 'sdk' })
  const c = client(apiKey, options)
  await c.client.budgets.upsert({ key: 'b', unit: 'USD', limits: [{ id: 'daily', window: 'day', enforce: 'hard', amount: '10' }] })
  c.sent.length = 0
  return { projectId, ...c }
}

async function limitOf(c: MeteringClient, key = 'b'): Promise<{ consumed: string; held: string }> {
  const budget = await c.budgets.get({ key })
  return { consumed: budget.balance.limits[0]!.consumed, held: budget.balance.limits[0]!.held }
}

async function failure(promise: Promise<unknown>): Promise<MeteringError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(MeteringError)
  return err as MeteringError
}

describe('generated methods', () => {
  test('a body, a path parameter, a query, no parameter: each reaches its route and answers its type', async () => {
    const { client: c, sent } = await project()
    const hold = await c.budgets.authorize({ key: 'b', amount: '1.25', idempotencyKey: 'm-1' })
    expect(hold).toMatchObject({ allowed: true, amount: '1.25', replayed: false })
    expect(hold.holdId).toMatch(/^h_[0-9]+$/)
    const settled = await c.budgets.settle({ key: 'b', holdId: hold.holdId, amount: '0.5' })
    expect(settled).toMatchObject({ holdId: hold.holdId, state: 'settled', settledAmount: '0.5' })
    expect(await limitOf(c)).toEqual({ consumed: '0.5', held: '0' })

    const wallet = await c.wallet.balance({ customerId: 'nobody' })
    expect(wallet.available.amount).toBe('0')
    expect((await c.features.list()).features).toEqual([])
    const missingRun = await failure(c.runs.get('run_1/../x'))
    expect(missingRun).toBeInstanceOf(NotFoundError)
    expect(sent.map((s) => s.path)).toEqual([
      '/v1/budgets/authorize',
      '/v1/budgets/settle',
      '/v1/budgets/get',
      '/v1/wallet/balance',
      '/v1/features/list',
      // The path parameter is one segment, encoded.
      '/v1/runs/get/run_1%2F..%2Fx',
    ])
  })

  test('request() sends any operation by its operationId', async () => {
    const { client: c } = await project()
    const budget = await c.request<{ key: string; unit: string }>('budgets.get', { body: { key: 'b' } })
    expect(budget).toMatchObject({ key: 'b', unit: 'USD' })
  })
})

describe('errors: the class of the status, the envelope, no retry of a 4xx', () => {
  test('400: BadRequestError with the JSON path of each issue', async () => {
    const { client: c, sent } = await project()
    const err = await failure(c.budgets.authorize({ key: 'b', amount: '1.123456789', idempotencyKey: 'e-1' }))
    expect(err).toBeInstanceOf(BadRequestError)
    expect(err).toMatchObject({ status: 400, code: 'BAD_REQUEST', operationId: 'budgets.authorize', attempts: 1 })
    expect((err as BadRequestError).issues.map((i) => i.path)).toEqual(['$.amount'])
    expect(err.requestId).toMatch(/.+/)
    expect(err.docs).toBe('https://docs.metering.dev/api-reference/errors/code/BAD_REQUEST')
    expect(sent).toHaveLength(1)
  })

  test('401: UnauthorizedError', async () => {
    const { client: c, sent } = client('mk_not-a-key')
    const err = await failure(c.budgets.get({ key: 'b' }))
    expect(err).toBeInstanceOf(UnauthorizedError)
    expect(err).toMatchObject({ status: 401, code: 'UNAUTHORIZED' })
    expect(sent).toHaveLength(1)
  })

  test('404 and 409: NotFoundError and ConflictError with details.reason', async () => {
    const { client: c, sent } = await project()
    const missing = await failure(c.budgets.get({ key: 'nope' }))
    expect(missing).toBeInstanceOf(NotFoundError)
    expect(missing).toMatchObject({ status: 404, code: 'NOT_FOUND', reason: 'budget_not_found' })

    await c.budgets.authorize({ key: 'b', amount: '1', idempotencyKey: 'same' })
    const conflict = await failure(c.budgets.authorize({ key: 'b', amount: '2', idempotencyKey: 'same' }))
    expect(conflict).toBeInstanceOf(ConflictError)
    expect(conflict).toMatchObject({ status: 409, code: 'CONFLICT', reason: 'idempotency_conflict' })
    expect(sent).toHaveLength(3)
  })

  test.each([
    ['more than the limit itself', [], '11', 'raise_limit', '10'],
    ['a hold in the way', ['9'], '2', 'release_holds', '1'],
  ])('402 (%s): BudgetExceededError with blocked, remedy %s and balance', async (_name, before, amount, remedy, remaining) => {
    const { client: c, sent } = await project()
    for (const [i, held] of before.entries()) await c.budgets.authorize({ key: 'b', amount: held, idempotencyKey: `before-${i}` })
    const err = await failure(c.budgets.authorize({ key: 'b', amount, idempotencyKey: 'over' }))
    expect(err).toBeInstanceOf(BudgetExceededError)
    const denied = err as BudgetExceededError
    expect(denied).toMatchObject({ status: 402, code: 'BUDGET_EXCEEDED', reason: 'budget_exceeded', remedy })
    expect(denied.blocked).toMatchObject({ limitId: 'daily', window: 'day', remaining, remedy })
    expect(denied.balance?.held).toBe(before[0] ?? '0')
    expect(sent).toHaveLength(before.length + 1)
  })
})

describe('hold(key, amount, work)', () => {
  test('settles the cost the work reports and hands back its value', async () => {
    const { client: c, sent } = await project()
    const result = await c.hold('b', '2', async (hold) => {
      expect(await limitOf(c)).toEqual({ consumed: '0', held: '2' })
      return { cost: '0.42135', value: `${hold.holdId} done` }
    })
    expect(result).toMatchObject({ cost: '0.42135', value: `${result.holdId} done` })
    expect(result.settled).toMatchObject({ state: 'settled', settledAmount: '0.42135' })
    expect(await limitOf(c)).toEqual({ consumed: '0.42135', held: '0' })
    const authorize = sent.find((s) => s.path === '/v1/budgets/authorize')!
    expect(authorize.body).toEqual({ key: 'b', amount: '2', idempotencyKey: expect.stringMatching(/^[0-9a-f-]{36}$/) })
  })

  test('releases the hold when the work throws, and rethrows what it threw', async () => {
    const { client: c, sent } = await project()
    const boom = new Error('the model timed out')
    const err = await c.hold('b', '3', () => Promise.reject(boom)).catch((e: unknown) => e)
    expect(err).toBe(boom)
    expect(await limitOf(c)).toEqual({ consumed: '0', held: '0' })
    expect(sent.map((s) => s.path)).toEqual(['/v1/budgets/authorize', '/v1/budgets/release', '/v1/budgets/get'])
  })

  test('a cost that is not a decimal string: released, TypeError', async () => {
    const { client: c } = await project()
    const err = await c.hold('b', '1', () => ({ cost: 0.5 as unknown as string })).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(TypeError)
    expect(await limitOf(c)).toEqual({ consumed: '0', held: '0' })
  })

  test('a cost above the hold: settled in full, the rest recorded (never denied)', async () => {
    const { client: c } = await project()
    const result = await c.hold('b', '1', () => ({ cost: '10.00000001' }))
    expect(result.settled.settledAmount).toBe('1')
    expect(result.excess?.amount).toBe('9.00000001')
    expect(await limitOf(c)).toEqual({ consumed: '10.00000001', held: '0' })
  })

  test('a hold that does not fit: BudgetExceededError with the remedy, and the work never runs', async () => {
    const { client: c } = await project()
    let ran = false
    const err = await c
      .hold('b', '10.5', () => {
        ran = true
        return { cost: '1' }
      })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(BudgetExceededError)
    expect((err as BudgetExceededError).remedy).toBe('raise_limit')
    expect(ran).toBe(false)
  })

  test('the same idempotency key twice: the second hold replays the first and nothing is counted twice', async () => {
    const { client: c } = await project()
    const replays: boolean[] = []
    const work = (hold: { replayed: boolean }) => {
      replays.push(hold.replayed)
      return { cost: '0.4' }
    }
    const first = await c.hold('b', '1', work, { idempotencyKey: 'task-9/step-1', ttlMs: 60_000 })
    const second = await c.hold('b', '1', work, { idempotencyKey: 'task-9/step-1', ttlMs: 60_000 })
    expect(second.holdId).toBe(first.holdId)
    expect(replays).toEqual([false, true])
    expect(second.settled.replayed).toBe(true)
    expect(await limitOf(c)).toEqual({ consumed: '0.4', held: '0' })
  })
})

/** The events of a project in the ingest queue (no worker drains it in these tests). */
async function queued(projectId: string): Promise<string[]> {
  const jobs = (await queue.getJobs(['waiting', 'delayed', 'prioritized', 'active'], 0, -1, true)) as Job<IngestJobData>[]
  return jobs.flatMap((job) =>
    eventsOfJob(job.data)
      .filter((e) => e.projectId === projectId)
      .map((e) => e.eventId),
  )
}

describe('record(events)', () => {
  test('batches of maxEvents, one result per event in order, a bad event refused alone, each accepted event queued once', async () => {
    const { projectId, client: c, sent } = await project({ batch: { maxEvents: 100, lingerMs: 60_000 } })
    const events: UsageEvent[] = Array.from({ length: 250 }, (_, i) => ({ customerId: 'acme', eventSlug: 'llm.completion', properties: { value: i } }))
    events[120] = { eventSlug: 'llm.completion' } as UsageEvent
    const recorded = c.record(events)
    await c.flush()
    const results = await recorded
    expect(sent.map((s) => s.body.events.length)).toEqual([100, 100, 50])
    expect(results.map((r) => r.index)).toEqual(events.map((_, i) => i))
    const refused = results.filter((r) => !r.accepted)
    expect(refused).toHaveLength(1)
    expect(refused[0]).toMatchObject({ index: 120, accepted: false, error: { code: 'BAD_REQUEST', issues: [{ path: '$.events[20].customerId' }] } })
    // Every event was sent with an id, so a retried batch is deduplicated by the gateway.
    const ids = sent.flatMap((s) => s.body.events.map((e: UsageEvent) => e.id))
    expect(new Set(ids).size).toBe(250)
    expect((await queued(projectId)).sort()).toEqual(ids.filter((_: string, i: number) => i !== 120).sort())
  })

  test('an event on its own leaves after lingerMs; several record() calls share a batch', async () => {
    const { client: c, sent } = await project({ batch: { lingerMs: 5 } })
    const [a, b] = await Promise.all([
      c.record({ customerId: 'acme', eventSlug: 'x', id: 'linger-1' }),
      c.record([
        { customerId: 'acme', eventSlug: 'x', idempotencyKey: 'linger-2' },
        { customerId: 'acme', eventSlug: 'x', id: 'linger-3' },
      ]),
    ])
    expect(a).toEqual([{ index: 0, accepted: true }])
    expect(b).toEqual([
      { index: 0, accepted: true },
      { index: 1, accepted: true },
    ])
    expect(sent).toHaveLength(1)
    // An event that named itself is sent as it was.
    expect(sent[0]!.body.events[1]).toEqual({ customerId: 'acme', eventSlug: 'x', idempotencyKey: 'linger-2' })
  })

  test('maxBytes splits batches; close() flushes, then record() is refused', async () => {
    const { client: c, sent } = await project({ batch: { lingerMs: 60_000, maxBytes: 4_096 } })
    const big = (i: number): UsageEvent => ({ customerId: 'acme', eventSlug: 'x', id: `big-${i}`, properties: { text: 'x'.repeat(1_500) } })
    const pending = c.record([big(1), big(2), big(3), big(4), big(5)])
    await c.close()
    expect((await pending).every((r) => r.accepted)).toBe(true)
    expect(sent.map((s) => s.body.events.length)).toEqual([2, 2, 1])
    await expect(c.record(big(6))).rejects.toThrow('record() after close()')
  })

  test('a batch refused as a whole reports each of its events with the error', async () => {
    const { client: c } = client('mk_not-a-key', { batch: { lingerMs: 1 } })
    const results = await c.record([
      { customerId: 'acme', eventSlug: 'x' },
      { customerId: 'acme', eventSlug: 'y' },
    ])
    expect(results).toEqual([
      { index: 0, accepted: false, error: { code: 'UNAUTHORIZED', reason: expect.any(String), message: expect.any(String) } },
      { index: 1, accepted: false, error: { code: 'UNAUTHORIZED', reason: expect.any(String), message: expect.any(String) } },
    ])
  })
})
