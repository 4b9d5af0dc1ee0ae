// POST /v1/usage/record and /record-batch against real Redis: validation (400 with JSON paths,
// nothing queued), "accepted" means a job carrying the event is in Redis when the answer comes,
// dedup within the window on the gateway's clock, group commit (many requests, few jobs),
// per-event batch results and disabled customers (403).
// No ingest worker runs on the gateway's queue in the tests, so every job stays waiting there;
// each test reads only the events of its own project.
import { Queue, type Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { INGEST_QUEUE, QUEUE_PREFIX } from '../../src/events/queue.js'
import type { IngestJobData, UsageEvent } from '../../src/events/types.js'
import { eventsOfJob } from '../../src/events/jobs.js'
import { expectError, expectIssue } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { testRedis } from '../support/redis.js'

const DAY = 86_400_000
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

/** The queued events of a project, each with the id of the job that carries it. */
async function queued(projectId: string): Promise<{ jobId: string; event: UsageEvent }[]> {
  const jobs = (await queue.getJobs(['waiting', 'delayed', 'prioritized', 'active'], 0, -1, true)) as Job<IngestJobData>[]
  return jobs.flatMap((job) =>
    eventsOfJob(job.data)
      .filter((e) => e.projectId === projectId)
      .map((event) => ({ jobId: job.id!, event })),
  )
}

async function project(): Promise<{ projectId: string; key: string }> {
  const p = await gw.project()
  return { projectId: p.projectId, key: p.apiKey }
}

describe('validation: 400 with the JSON path, nothing queued', () => {
  const base = { customerId: 'acme', eventSlug: 'llm.completion' }
  test.each<[string, string, (now: number) => Record<string, unknown>]>([
    ['no customerId', '$.customerId', () => ({ eventSlug: 'x' })],
    ['no eventSlug', '$.eventSlug', () => ({ customerId: 'acme' })],
    ['an empty customerId', '$.customerId', () => ({ ...base, customerId: '' })],
    ['an eventSlug with a space', '$.eventSlug', () => ({ ...base, eventSlug: 'llm completion' })],
    ['a timestamp more than 5 minutes ahead', '$.timestamp', (now) => ({ ...base, timestamp: now + 5 * 60_000 + 1 })],
    ['a timestamp older than the 35-day horizon', '$.timestamp', (now) => ({ ...base, timestamp: now - 35 * DAY - 1 })],
    ['a timestamp that is not an integer', '$.timestamp', (now) => ({ ...base, timestamp: now + 0.5 })],
    ['properties over 16 KiB as JSON', '$.properties', () => ({ ...base, properties: { text: 'x'.repeat(16 * 1024) } })],
    ['properties that are not an object', '$.properties', () => ({ ...base, properties: 'big' })],
    ['an unknown field', '$.amount', () => ({ ...base, amount: 3 })],
  ])('%s → 400 at %s', async (_name, path, body) => {
    const { projectId, key } = await project()
    const res = await gw.post('/v1/usage/record', body(gw.clock()), key)
    expectIssue(res, path, 'https://docs.metering.dev')
    expect(await queued(projectId)).toEqual([])
  })

  test('the bounds themselves are accepted: exactly 5 minutes ahead, exactly 35 days old, 16 KiB of properties', async () => {
    const { projectId, key } = await project()
    const now = gw.clock()
    const pad = 'x'.repeat(16 * 1024 - JSON.stringify({ text: '' }).length)
    for (const body of [
      { ...base, timestamp: now + 5 * 60_000 },
      { ...base, timestamp: now - 35 * DAY },
      { ...base, properties: { text: pad } },
    ]) {
      const res = await gw.post('/v1/usage/record', body, key)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
    }
    expect(await queued(projectId)).toHaveLength(3)
  })
})

describe('accepted means queued', () => {
  test('the answer comes once a job carrying the event is in Redis, with a stable eventId', async () => {
    const { projectId, key } = await project()
    const res = await gw.post(
      '/v1/usage/record',
      { customerId: 'acme', eventSlug: 'llm.completion', id: 'evt-1', properties: { value: 42, model: 'm' }, timestamp: gw.clock() - 1000 },
      key,
    )
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ accepted: true })
    const found = await queued(projectId)
    expect(found).toHaveLength(1)
    expect(found[0]!.event).toEqual({
      eventId: 'evt-1',
      projectId,
      customerId: 'acme',
      eventSlug: 'llm.completion',
      properties: { value: 42, model: 'm' },
      timestampMs: gw.clock() - 1000,
      receivedMs: gw.clock(),
    })
  })

  test('without a timestamp the event takes the time of the request; without id or key it gets a generated eventId', async () => {
    const { projectId, key } = await project()
    expect((await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e' }, key)).status).toBe(200)
    expect((await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e' }, key)).status).toBe(200)
    const found = await queued(projectId)
    expect(found).toHaveLength(2)
    for (const { event } of found) {
      expect(event.timestampMs).toBe(gw.clock())
      expect(event.eventId).toMatch(/^ev_[0-9a-f]{32}$/)
    }
    expect(found[0]!.event.eventId).not.toBe(found[1]!.event.eventId)
  })
})

describe('dedup by (project, idempotencyKey ?? id) over the window', () => {
  test('the same idempotencyKey twice: both accepted, queued once, with an eventId derived from the key', async () => {
    const { projectId, key } = await project()
    for (let i = 0; i < 3; i++) {
      const res = await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'k-1' }, key)
      expect(res.body).toEqual({ accepted: true })
    }
    const found = await queued(projectId)
    expect(found).toHaveLength(1)
    expect(found[0]!.event.eventId).toMatch(/^ik_/)
  })

  test('the same id twice: queued once; another id is another event', async () => {
    const { projectId, key } = await project()
    for (const id of ['a', 'a', 'b', 'a']) expect((await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e', id }, key)).status).toBe(200)
    expect((await queued(projectId)).map((q) => q.event.eventId).sort()).toEqual(['a', 'b'])
  })

  test('keys are per project: the same key in another project is another event', async () => {
    const one = await project()
    const two = await project()
    for (const p of [one, two])
      expect((await gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'shared' }, p.key)).status).toBe(200)
    expect(await queued(one.projectId)).toHaveLength(1)
    expect(await queued(two.projectId)).toHaveLength(1)
  })

  test('duplicates sent concurrently (one group commit) are queued once', async () => {
    const { projectId, key } = await project()
    const before = gw.services.events.batchStats
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'burst' }, key)),
    )
    const commits = gw.services.events.batchStats.batches - before.batches
    for (const res of answers) expect(res.body).toEqual({ accepted: true })
    // Requests that land in different commits may each queue a copy (the ClickHouse backstop
    // drops it by eventId); every copy has the same eventId.
    const found = await queued(projectId)
    expect(found.length).toBeGreaterThanOrEqual(1)
    expect(found.length).toBeLessThanOrEqual(commits) // at most one copy per group commit
    expect(new Set(found.map((q) => q.event.eventId)).size).toBe(1)
  })

  test('the window is 24 h on the gateway clock: a repeat just inside is a duplicate, just after it is queued again', async () => {
    const { projectId, key } = await project()
    const start = gw.clock()
    try {
      const send = () => gw.post('/v1/usage/record', { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'windowed' }, key)
      expect((await send()).status).toBe(200)
      gw.clock.set(start + DAY - 1)
      expect((await send()).status).toBe(200)
      expect(await queued(projectId)).toHaveLength(1)
      gw.clock.set(start + DAY)
      expect((await send()).status).toBe(200)
      const found = await queued(projectId)
      expect(found).toHaveLength(2)
      expect(found[0]!.event.eventId).toBe(found[1]!.event.eventId)
      // The new acceptance opens a new window.
      gw.clock.set(start + DAY + 1000)
      expect((await send()).status).toBe(200)
      expect(await queued(projectId)).toHaveLength(2)
    } finally {
      gw.clock.set(start)
    }
  })
})

describe('group commit', () => {
  test('200 concurrent single-event requests become far fewer jobs, carrying all 200 events', async () => {
    const { projectId, key } = await project()
    const before = gw.services.events.batchStats
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => gw.post('/v1/usage/record', { customerId: `c-${i % 7}`, eventSlug: 'e', id: `gc-${i}` }, key)),
    )
    for (const res of answers) expect(res.body).toEqual({ accepted: true })
    const found = await queued(projectId)
    expect(found.map((q) => q.event.eventId).sort()).toEqual(Array.from({ length: 200 }, (_, i) => `gc-${i}`).sort())
    const jobs = new Set(found.map((q) => q.jobId))
    const after = gw.services.events.batchStats
    console.log(`200 concurrent requests: ${jobs.size} jobs (${after.batches - before.batches} group commits for ${after.events - before.events} events)`)
    expect(jobs.size).toBeLessThanOrEqual(50)
  })
})

describe('POST /v1/usage/record-batch', () => {
  test('per-event results: valid events are accepted even when others are not', async () => {
    const { projectId, key } = await project()
    const now = gw.clock()
    const res = await gw.post(
      '/v1/usage/record-batch',
      {
        events: [
          { customerId: 'acme', eventSlug: 'e', id: 'b-0' },
          { eventSlug: 'e', id: 'b-1' },
          { customerId: 'acme', eventSlug: 'e', id: 'b-2', timestamp: now + 10 * 60_000 },
          'not an event',
          { customerId: 'acme', eventSlug: 'e', id: 'b-0' },
          { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'b-5', properties: { value: '1.5' } },
        ],
      },
      key,
    )
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const results = res.body.results
    expect(results.map((r: { index: number; accepted: boolean }) => [r.index, r.accepted])).toEqual([
      [0, true],
      [1, false],
      [2, false],
      [3, false],
      [4, true],
      [5, true],
    ])
    expect(results[1].error.code).toBe('BAD_REQUEST')
    expect(results[1].error.issues.map((i: { path: string }) => i.path)).toContain('$.events[1].customerId')
    expect(results[2].error.issues.map((i: { path: string }) => i.path)).toEqual(['$.events[2].timestamp'])
    expect(results[3].error.issues.map((i: { path: string }) => i.path)).toContain('$.events[3]')
    // b-0 twice: one copy; b-1, b-2 and the string never queued.
    const ids = (await queued(projectId)).map((q) => q.event.eventId).sort()
    expect(ids).toHaveLength(2)
    expect(ids[0]).toBe('b-0')
    expect(ids[1]).toMatch(/^ik_/)
  })

  test('1,000 events in one request: all accepted, in few jobs; 1,001 is 400', async () => {
    const { projectId, key } = await project()
    const events = Array.from({ length: 1000 }, (_, i) => ({ customerId: `c-${i % 13}`, eventSlug: 'e', id: `big-${i}`, properties: { value: i } }))
    const res = await gw.post('/v1/usage/record-batch', { events }, key)
    expect(res.status).toBe(200)
    expect(res.body.results.every((r: { accepted: boolean }) => r.accepted)).toBe(true)
    const found = await queued(projectId)
    expect(found).toHaveLength(1000)
    expect(new Set(found.map((q) => q.jobId)).size).toBeLessThanOrEqual(2)
    const tooMany = await gw.post('/v1/usage/record-batch', { events: [...events, events[0]] }, key)
    expectIssue(tooMany, '$.events', 'https://docs.metering.dev')
  })
})

describe('customers disabled by the catalog', () => {
  test('403 customer_disabled, nothing queued; other customers (and unknown ones) are accepted; re-enabled is accepted', async () => {
    const { projectId, key } = await project()
    const apply = await gw.post('/v1/config/apply', { customers: [{ id: 'off' }, { id: 'on' }] }, key)
    expect(apply.status, JSON.stringify(apply.body)).toBe(200)
    const update = (customerDisabled: boolean) => gw.post('/v1/access/update', { customerId: 'off', updates: { customerDisabled } }, key)
    expect((await update(true)).status).toBe(200)

    const refused = await gw.post('/v1/usage/record', { customerId: 'off', eventSlug: 'e', id: 'x-1' }, key)
    expectError(refused, 403, 'FORBIDDEN', 'https://docs.metering.dev')
    expect(refused.body.error.details.reason).toBe('customer_disabled')
    expect(await queued(projectId)).toEqual([])

    const batch = await gw.post(
      '/v1/usage/record-batch',
      {
        events: [
          { customerId: 'on', eventSlug: 'e', id: 'x-2' },
          { customerId: 'off', eventSlug: 'e', id: 'x-3' },
          { customerId: 'stranger', eventSlug: 'e', id: 'x-4' },
        ],
      },
      key,
    )
    expect(batch.body.results.map((r: { accepted: boolean }) => r.accepted)).toEqual([true, false, true])
    expect(batch.body.results[1].error).toMatchObject({ code: 'FORBIDDEN', reason: 'customer_disabled' })

    expect((await update(false)).status).toBe(200)
    expect((await gw.post('/v1/usage/record', { customerId: 'off', eventSlug: 'e', id: 'x-1' }, key)).status).toBe(200)
    expect((await queued(projectId)).map((q) => q.event.eventId).sort()).toEqual(['x-1', 'x-2', 'x-4'])
  })
})
