// The ingest worker (src/workers/ingest.ts) against real Redis: batches queued by the EventService
// reach an EventSink, failing inserts are retried with backoff, and a batch that fails every
// attempt lands in the dead-letter queue, where it is listed and replayed.
// The sink is the real ClickHouse sink (the test clickhouse-server, a throwaway database) with a
// recorder in front: it notes every insert the worker makes in a real Redis list (rows) and set
// (dedup tokens), where the tests read them back, and can inject failures before the store.
// Each test has its own queues, so no other test's worker or gateway shares them.
import { Queue } from 'bullmq'
import { pino } from 'pino'
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { inject } from 'vitest'
import { clickHouseEventSink } from '../../src/events/clickhouse.js'
import { manualClock } from '../../src/kernel/clock.js'
import { listDeadLetters, replayDeadLetters } from '../../src/events/deadLetters.js'
import { QUEUE_PREFIX } from '../../src/events/queue.js'
import { EventService } from '../../src/events/service.js'
import type { EventSink, IngestJobData, UsageEventRow } from '../../src/events/types.js'
import { eventsOfJob } from '../../src/events/jobs.js'
import type { UsageEventColumns } from '../../src/infra/clickhouse/tables.js'
import { connectRedis } from '../../src/infra/redis/connection.js'
import { loadLibrary } from '../../src/infra/redis/scripts.js'
import { startIngestWorker, type IngestWorker, type MergeOptions } from '../../src/workers/ingest.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { waitFor } from '../support/processes.js'
import { untilQueuesIdle } from '../support/queues.js'
import { openTestStore, type TestStore } from '../support/store.js'

const logger = pino({ level: 'silent' })

/**
 * The ClickHouse sink with a recorder in front: every insert it is asked for is noted in Redis
 * (the rows in a list, the tokens in a set, the calls in a counter), then made in ClickHouse.
 */
class RecordingSink implements EventSink {
  /** Inserts that throw before this one succeeds; Infinity: all of them. */
  failuresLeft = 0
  /** An insert holding a row with this event id throws (a batch the store keeps refusing). */
  refuse: string | undefined
  private readonly store = clickHouseEventSink(history!.store)
  constructor(
    private readonly redis: Redis,
    readonly prefix: string,
  ) {}

  /** The worker's own form (columns, written as TSV): recorded as rows, written as the worker hands them. */
  async insertEventColumns(columns: UsageEventColumns, dedupToken: string, options?: { firstAttempt?: boolean }): Promise<void> {
    const rows = Array.from({ length: columns.length }, (_, i) => columns.row(i))
    await this.record(rows, dedupToken, () => this.store.insertEventColumns!(columns, dedupToken, options))
  }

  async insertEvents(rows: UsageEventRow[], dedupToken: string, options?: { firstAttempt?: boolean }): Promise<void> {
    await this.record(rows, dedupToken, () => this.store.insertEvents(rows, dedupToken, options))
  }

  private async record(rows: UsageEventRow[], dedupToken: string, write: () => Promise<void>): Promise<void> {
    await this.redis.incr(`${this.prefix}:calls`)
    if (this.failuresLeft > 0) {
      this.failuresLeft--
      throw new Error('sink unavailable')
    }
    if (rows.some((r) => r.event_id === this.refuse)) throw new Error(`the store refuses ${this.refuse}`)
    await write()
    await this.redis
      .multi()
      .rpush(`${this.prefix}:rows`, ...rows.map((r) => JSON.stringify(r)))
      .sadd(`${this.prefix}:tokens`, dedupToken)
      .exec()
  }

  async rows(): Promise<UsageEventRow[]> {
    return (await this.redis.lrange(`${this.prefix}:rows`, 0, -1)).map((text) => JSON.parse(text) as UsageEventRow)
  }

  async calls(): Promise<number> {
    return Number((await this.redis.get(`${this.prefix}:calls`)) ?? 0)
  }
}

interface Rig {
  service: EventService
  sink: RecordingSink
  worker: IngestWorker | undefined
  queues: { ingestQueue: string; deadLetterQueue: string }
  redis: Redis
  workerConnection: ReturnType<typeof connectRedis>
  startWorker(merge?: Partial<MergeOptions>): void
}

let history: TestStore | undefined
beforeAll(async () => {
  history = await openTestStore('server', `test_${uniquePrefix()}`, { migrate: true })
})
afterAll(async () => {
  await history?.close()
})

const open: Rig[] = []
afterEach(async () => {
  for (const rig of open.splice(0)) {
    await rig.worker?.close()
    await rig.service.close()
    await rig.workerConnection.quit()
    rig.redis.disconnect()
  }
})

/** `cluster`: the service, queues and worker on the test Redis Cluster (the sink stays on the standalone server). */
async function rig(attempts: number, cluster = false): Promise<Rig> {
  const prefix = uniquePrefix()
  const url = cluster
    ? `redis+cluster://${inject('clusterNodes')
        .map((n) => `${n.host}:${n.port}`)
        .join(',')}`
    : inject('redisUrl')
  const redis = testRedis()
  const commands = connectRedis(url, 'test-events')
  await loadLibrary(commands)
  const queues = { ingestQueue: `usage-events-${prefix}`, deadLetterQueue: `usage-dlq-${prefix}` }
  const service = new EventService(commands, commands.duplicate(), manualClock(Date.now()), logger, {
    queueName: queues.ingestQueue,
    retry: { attempts, backoffMs: 20 },
  })
  const workerConnection = connectRedis(url, 'test-ingest', { blocking: true })
  const sink = new RecordingSink(redis, `test:${prefix}:sink`)
  const r: Rig = {
    service,
    sink,
    worker: undefined,
    queues,
    redis,
    workerConnection,
    startWorker(merge) {
      r.worker = startIngestWorker({ connection: workerConnection, sink, logger, concurrency: 4, ...queues, ...(merge ? { merge } : {}) })
    },
  }
  // The service's command connection goes with its queue connection on close.
  const close = service.close.bind(service)
  service.close = async () => {
    await close()
    await commands.quit()
  }
  open.push(r)
  return r
}

/** Waits (bounded, polling) until `check` holds: the worker's rows or dead letters arrived. */
const until = (what: string, check: () => Promise<boolean>) => waitFor(what, check, 10_000, { intervalMs: 20 })

describe('ingest worker', () => {
  test('every accepted event reaches the sink once, as a row (value from properties.value, else 1)', async () => {
    const r = await rig(3)
    const project = `p-${uniquePrefix()}`
    // Single events concurrently (group commits), a batch, and duplicates of both.
    const singles = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        r.service.record(project, { customerId: `c-${i % 5}`, eventSlug: 'llm.call', id: `s-${i % 250}`, properties: { value: i % 250 } }),
      ),
    )
    for (const s of singles) expect(s.ok).toBe(true)
    const batch = await r.service.recordBatch(project, [
      ...Array.from({ length: 500 }, (_, i) => ({ customerId: 'acme', eventSlug: 'llm.call', idempotencyKey: `k-${i}`, properties: { value: '0.5' } })),
      { customerId: 'acme', eventSlug: 'llm.call', id: 's-0' },
      { customerId: 'acme', eventSlug: 'plain' },
    ])
    expect(batch.results.every((x) => x.accepted)).toBe(true)
    r.startWorker()
    await until('751 rows arrive', async () => (await r.sink.rows()).length >= 751)
    await untilQueuesIdle(r.workerConnection, [r.queues.ingestQueue]) // all jobs done: nothing more can arrive
    const rows = await r.sink.rows()
    expect(rows).toHaveLength(751)
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(751)
    const s7 = rows.find((row) => row.event_id === 's-7')!
    expect(s7).toMatchObject({
      project_id: project,
      customer_id: 'c-2',
      event_slug: 'llm.call',
      feature_slug: 'llm.call',
      value: '7',
      properties: '{"value":7}',
      status: 'accepted',
      decision: 'claim',
    })
    expect(rows.filter((row) => row.event_id.startsWith('ik_')).every((row) => row.value === '0.5')).toBe(true)
    expect(rows.find((row) => row.event_slug === 'plain')).toMatchObject({ value: '1', properties: '{}' })
  })

  test('jobs waiting together share one insert; each event once, the token names every batch', async () => {
    const r = await rig(3)
    const project = `p-${uniquePrefix()}`
    // Ten requests one after the other: ten group commits, ten jobs.
    for (let j = 0; j < 10; j++) {
      const res = await r.service.recordBatch(
        project,
        Array.from({ length: 30 }, (_, i) => ({ customerId: `c-${i % 3}`, eventSlug: 'e', id: `m-${j}-${i}` })),
      )
      expect(res.results.every((x) => x.accepted)).toBe(true)
    }
    expect(r.service.batchStats.batches).toBe(10)
    // Ten jobs per insert at most, and a long wait: the ten go as soon as all ten are in.
    r.startWorker({ maxJobs: 10, maxWaitMs: 5_000 })
    await until('300 rows arrive', async () => (await r.sink.rows()).length >= 300)
    await untilQueuesIdle(r.workerConnection, [r.queues.ingestQueue])
    const rows = await r.sink.rows()
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(300)
    expect(rows).toHaveLength(300)
    expect(await r.sink.calls()).toBe(1)
    expect(await r.redis.smembers(`${r.sink.prefix}:tokens`)).toEqual([expect.stringMatching(/^m_[A-Za-z0-9_-]{43}$/)])
  })

  test('a job the store keeps refusing fails the insert it shares; the others retry alone and are delivered, it alone is dead-lettered', async () => {
    const r = await rig(3)
    const project = `p-${uniquePrefix()}`
    r.sink.refuse = 'bad-0'
    for (let j = 0; j < 6; j++) {
      const id = (i: number) => (j === 3 ? `bad-${i}` : `ok-${j}-${i}`)
      await r.service.recordBatch(
        project,
        Array.from({ length: 10 }, (_, i) => ({ customerId: 'acme', eventSlug: 'e', id: id(i) })),
      )
    }
    r.startWorker({ maxJobs: 6, maxWaitMs: 5_000 })
    await until('the refused batch is dead-lettered', async () => (await listDeadLetters({ connection: r.redis, ...r.queues })).length === 1)
    await untilQueuesIdle(r.workerConnection, [r.queues.ingestQueue])
    const [dead] = await listDeadLetters({ connection: r.redis, ...r.queues })
    expect(dead).toMatchObject({ events: 10, failedReason: 'the store refuses bad-0', attempts: 3 })
    const rows = await r.sink.rows()
    expect(rows).toHaveLength(50)
    expect(rows.every((row) => row.event_id.startsWith('ok-'))).toBe(true)
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(50)
    // The shared insert (1), the five good jobs alone (5), the refused one's last two attempts (2).
    expect(await r.sink.calls()).toBe(8)
  })

  test('a sink that fails twice then succeeds: retried with backoff and delivered once', async () => {
    const r = await rig(3)
    r.sink.failuresLeft = 2
    expect((await r.service.record('p-retry', { customerId: 'acme', eventSlug: 'e', id: 'only' })).ok).toBe(true)
    r.startWorker()
    await until('the row arrives', async () => (await r.sink.rows()).length === 1)
    expect(await r.sink.calls()).toBe(3)
    expect((await r.sink.rows())[0]!.event_id).toBe('only')
    expect(await listDeadLetters({ connection: r.redis, ...r.queues })).toEqual([])
  })

  test('a sink that always fails: the batch is dead-lettered after its attempts, listed, and a replay delivers it once the sink works', async () => {
    const r = await rig(3)
    r.sink.failuresLeft = Infinity
    await r.service.recordBatch('p-dlq', [
      { customerId: 'acme', eventSlug: 'e', id: 'd-1' },
      { customerId: 'acme', eventSlug: 'e', id: 'd-2' },
    ])
    r.startWorker()
    await until('the batch is dead-lettered', async () => (await listDeadLetters({ connection: r.redis, ...r.queues })).length === 1)
    const [dead] = await listDeadLetters({ connection: r.redis, ...r.queues })
    expect(dead).toMatchObject({ events: 2, failedReason: 'sink unavailable', attempts: 3 })
    expect(await r.sink.calls()).toBe(3)
    expect(await r.sink.rows()).toEqual([])

    r.sink.failuresLeft = 0
    expect(await replayDeadLetters({ connection: r.redis, ...r.queues })).toEqual([dead!.id])
    await until('the replayed rows arrive', async () => (await r.sink.rows()).length === 2)
    expect((await r.sink.rows()).map((row) => row.event_id).sort()).toEqual(['d-1', 'd-2'])
    // The replay carried the batch's dedup token.
    expect(await r.redis.smembers(`${r.sink.prefix}:tokens`)).toEqual([dead!.batchId])
    expect(await listDeadLetters({ connection: r.redis, ...r.queues })).toEqual([])
  })

  test('on a Redis Cluster: one commit spanning projects in different slots is admitted per project and delivered', async () => {
    const r = await rig(3, true)
    const projects = Array.from({ length: 6 }, () => `p-${uniquePrefix()}`)
    const answers = await Promise.all(
      projects.flatMap((project) =>
        Array.from({ length: 20 }, (_, i) => r.service.record(project, { customerId: 'acme', eventSlug: 'e', idempotencyKey: `k-${i % 10}` })),
      ),
    )
    for (const a of answers) expect(a.ok).toBe(true)
    r.startWorker()
    await until('60 rows arrive', async () => (await r.sink.rows()).length >= 60)
    await untilQueuesIdle(r.workerConnection, [r.queues.ingestQueue]) // all jobs done: nothing more can arrive
    const rows = await r.sink.rows()
    expect(new Set(rows.map((row) => `${row.project_id}/${row.event_id}`)).size).toBe(60)
  })
})

describe('order of operations', () => {
  test('when the job cannot be queued the request fails and nothing is marked seen: the retry is queued, not taken for a duplicate', async () => {
    const url = inject('redisUrl')
    const prefix = uniquePrefix()
    const commands = connectRedis(url, 'test-events')
    const broken = connectRedis(url, 'test-events-queue')
    const options = { queueName: `usage-events-${prefix}` }
    const failing = new EventService(commands, broken, manualClock(Date.now()), logger, options)
    await broken.quit()
    const event = { customerId: 'acme', eventSlug: 'e', idempotencyKey: 'retry-me' }
    await expect(failing.record('p-order', event)).rejects.toThrow()
    await failing.close().catch(() => {
      /* its connection is gone on purpose */
    })

    const working = new EventService(commands, connectRedis(url, 'test-events-queue'), manualClock(Date.now()), logger, options)
    try {
      expect(await working.record('p-order', event)).toEqual({ ok: true, value: { accepted: true } })
      const queue = new Queue<IngestJobData>(options.queueName, { connection: commands, prefix: QUEUE_PREFIX })
      const jobs = await queue.getJobs(['waiting'], 0, -1, true)
      expect(jobs.flatMap((job) => eventsOfJob(job.data).map((e) => e.eventId))).toHaveLength(1)
      await queue.close()
    } finally {
      await working.close()
      await commands.quit()
    }
  })
})
