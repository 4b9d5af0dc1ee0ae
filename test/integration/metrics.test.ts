// GET /metrics of a real gateway (real Redis, the test clickhouse-server, a real webhook
// receiver): after authorize calls, an ingest batch, a dead-lettered job and webhook deliveries,
// every family is there with its labels and has grown; the scrape-time Redis figures (queues,
// dead letters, journal backlog) exactly, on a database of the test Redis nothing else uses; and
// the access log: one line per request at sample 1, none at 0, always for an answer ≥ 500.
import { randomBytes } from 'node:crypto'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { pino, type Logger } from 'pino'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { startGateway, type Gateway } from '../../src/bin/gateway.js'
import { BATCH_JOB } from '../../src/events/queue.js'
import { Metrics, serveMetrics, type QueueNames } from '../../src/http/metrics.js'
import { QUEUE_PREFIX } from '../../src/infra/redis/keys.js'
import { DEAD_LETTER_KEY, claimKey, journalKey } from '../../src/journal/keys.js'
import { manualClock } from '../../src/kernel/clock.js'
import { loadConfig, type Config } from '../../src/kernel/config.js'
import { deadUrl, startReceiver, type Receiver } from './notifications.receiver.js'
import { ROOT_KEY } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'

const suffix = randomBytes(6).toString('hex')
const DEADLINE_MS = 60_000

/** A parsed sample line: `name{a="x",b="y"} value`. */
interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

function parse(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) continue
    const labels: Record<string, string> = {}
    for (const [, k, v] of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!
    samples.push({ name: m[1]!, labels, value: Number(m[3]) })
  }
  return samples
}

/** The samples of `name` whose labels include `labels`. */
function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
}

/** The one sample of `name` with these labels (0 when there is none yet). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = find(samples, name, labels)
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`)
  return found[0]?.value ?? 0
}

/** The sum over every sample of `name` with these labels. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return find(samples, name, labels).reduce((sum, s) => sum + s.value, 0)
}

/** A pino logger at info whose lines are kept, parsed. */
function capturedLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = []
  return { logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }), lines }
}

interface Client {
  gateway: Gateway
  /** The request id of every answer this client got. */
  requestIds: string[]
  call(method: 'GET' | 'POST', path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>
  ok(path: string, body: unknown, key: string): Promise<any>
  scrape(): Promise<Sample[]>
}

async function start(overrides: Partial<Config>, logger: Logger, extra: Parameters<typeof startGateway>[1] = {}): Promise<Client> {
  const config: Config = {
    ...loadConfig({}),
    port: 0,
    host: '127.0.0.1',
    redisUrl: inject('redisUrl'),
    rootKey: ROOT_KEY,
    redisTimeoutMs: 5_000,
    sweepIntervalMs: 0,
    journalIntervalMs: 0,
    invoiceIntervalMs: 0,
    ...overrides,
  }
  const gateway = await startGateway(config, { clock: manualClock(Date.now()), logger, clickhouse: 'off', ...extra })
  const requestIds: string[] = []
  const call: Client['call'] = async (method, path, body, key) => {
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {}
    if (method === 'POST') headers['content-type'] = 'application/json'
    const res = await fetch(`http://127.0.0.1:${gateway.port}${path}`, { method, headers, ...(method === 'POST' ? { body: JSON.stringify(body) } : {}) })
    requestIds.push(res.headers.get('x-request-id')!)
    const text = await res.text()
    return { status: res.status, body: res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text }
  }
  const ok = async (path: string, body: unknown, key: string) => {
    const res = await call('POST', path, body, key)
    expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200)
    return res.body
  }
  const scrape = async () => {
    const res = await call('GET', '/metrics')
    expect(res.status).toBe(200)
    return parse(res.body as string)
  }
  return { gateway, requestIds, call, ok, scrape }
}

describe('a gateway with the history, webhooks and the access log at 1', () => {
  const database = `test_${suffix}`
  const ingestQueue = `test-metrics-${suffix}`
  const queues: QueueNames = {
    ingest: ingestQueue,
    deadLetter: `${ingestQueue}-dlq`,
    notifications: `test-metrics-notifications-${suffix}`,
    deliveries: `test-metrics-webhooks-${suffix}`,
  }
  const log = capturedLogger()
  let gw: Client
  let receiver: Receiver

  beforeAll(async () => {
    receiver = await startReceiver(200)
    gw = await start({ clickhouseUrl: inject('clickhouseUrl'), clickhouseDatabase: database, accessLogSample: 1, logLevel: 'info' }, log.logger, {
      clickhouse: 'on',
      events: { queueName: ingestQueue },
      notifications: { queueName: queues.notifications, deliveryQueueName: queues.deliveries, attempts: 2, backoffMs: 20, timeoutMs: 2_000 },
    })
  })
  afterAll(async () => {
    await gw?.gateway.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.gateway.close()
    await receiver?.close()
  })

  test('requests, scripts, inserts, deliveries, queues, dead letters, journal and the process are reported', async () => {
    const before = await gw.scrape()
    const { apiKey } = await gw.ok('/v1/projects/create', { name: 'metrics' }, ROOT_KEY)
    await gw.ok('/v1/webhooks/upsert', { url: receiver.url, events: ['limit.crossed'] }, apiKey)
    await gw.ok('/v1/webhooks/upsert', { url: await deadUrl(), events: ['limit.crossed'] }, apiKey)
    await gw.ok('/v1/budgets/upsert', { key: 'wallet', limits: [{ id: 'cap', window: 'never', enforce: 'soft', amount: '10' }] }, apiKey)
    for (let i = 0; i < 3; i++)
      expect((await gw.ok('/v1/budgets/authorize', { key: 'wallet', amount: '1', idempotencyKey: `a-${i}` }, apiKey)).allowed).toBe(true)
    expect((await gw.ok('/v1/budgets/record', { key: 'wallet', amount: '15', idempotencyKey: 'cross' }, apiKey)).crossed).toHaveLength(1)
    const events = Array.from({ length: 5 }, (_, i) => ({ customerId: 'acme', eventSlug: 'calls', id: `e-${suffix}-${i}` }))
    expect((await gw.call('POST', '/v1/usage/record-batch', { events }, apiKey)).status).toBe(200)
    // A batch that failed every attempt, as the ingest worker leaves it in the dead-letter queue.
    const dlq = new Queue(queues.deadLetter, { connection: gw.gateway.redis, prefix: QUEUE_PREFIX })
    await dlq.add(BATCH_JOB, { v: 1, batchId: `dead-${suffix}`, events: [] }, { jobId: `dead-${suffix}` })
    await dlq.close()

    const grown = (after: Sample[], name: string, labels: Record<string, string>, by: number) => total(after, name, labels) - total(before, name, labels) >= by
    const after = await waitFor(
      'the ingest insert and the three delivery outcomes in /metrics',
      async () => {
        const now = await gw.scrape()
        return grown(now, 'metering_clickhouse_insert_rows_total', {}, 5) &&
          grown(now, 'metering_webhook_deliveries_total', { outcome: 'delivered' }, 1) &&
          grown(now, 'metering_webhook_deliveries_total', { outcome: 'failed_attempt' }, 1) &&
          grown(now, 'metering_webhook_deliveries_total', { outcome: 'dead' }, 1)
          ? now
          : undefined
      },
      DEADLINE_MS,
      { intervalMs: 100 },
    )

    // HTTP: the three authorizes, counted by route and status, in the route's histogram.
    const authorize = { route: '/v1/budgets/authorize' }
    expect(
      value(after, 'metering_http_requests_total', { ...authorize, status: '200' }) -
        value(before, 'metering_http_requests_total', { ...authorize, status: '200' }),
    ).toBe(3)
    expect(
      value(after, 'metering_http_request_duration_seconds_count', authorize) - value(before, 'metering_http_request_duration_seconds_count', authorize),
    ).toBe(3)
    expectHistogram(after, 'metering_http_request_duration_seconds', authorize)

    // Redis functions: a histogram per script (the process's calls: at least these three).
    const script = { script: 'authorizeHold-4' }
    expect(
      value(after, 'metering_redis_script_duration_seconds_count', script) - value(before, 'metering_redis_script_duration_seconds_count', script),
    ).toBeGreaterThanOrEqual(3)
    expectHistogram(after, 'metering_redis_script_duration_seconds', script)

    // ClickHouse: the usage events' insert, its latency, no errors of ours.
    const tables = find(after, 'metering_clickhouse_insert_rows_total').map((s) => s.labels.table)
    expect(tables).toContain('usage_events')
    expectHistogram(after, 'metering_clickhouse_insert_duration_seconds', { table: 'usage_events' })
    expect(find(after, 'metering_clickhouse_insert_errors_total')).toEqual([])

    // Queues: every state of each of the gateway's four queues; the dead letter we put there.
    for (const queue of Object.values(queues)) {
      for (const state of ['waiting', 'active', 'delayed', 'failed']) expect(find(after, 'metering_queue_jobs', { queue, state })).toHaveLength(1)
      expect(value(after, 'metering_queue_oldest_waiting_age_seconds', { queue })).toBeGreaterThanOrEqual(0)
    }
    expect(value(after, 'metering_queue_jobs', { queue: queues.deadLetter, state: 'waiting' })).toBe(1)
    expect(value(after, 'metering_dead_letters', { kind: 'usage' })).toBe(1)
    expect(find(after, 'metering_dead_letters', { kind: 'journal' })).toHaveLength(1)

    // The journal: the record's movement waits in its outbox (no journal worker here).
    expect(value(after, 'metering_journal_backlog_entries')).toBeGreaterThanOrEqual(1)
    expect(value(after, 'metering_journal_outboxes')).toBeGreaterThanOrEqual(1)
    expect(find(after, 'metering_journal_scan_complete')).toHaveLength(1)
    expect(find(after, 'metering_metrics_collect_errors_total')).toEqual([])

    // The process and its event loop.
    expect(value(after, 'metering_process_resident_memory_bytes')).toBeGreaterThan(0)
    expect(value(after, 'metering_process_cpu_seconds_total')).toBeGreaterThan(0)
    expect(find(after, 'metering_nodejs_eventloop_lag_p99_seconds')).toHaveLength(1)
  })

  test('the access log has one line per request, with its route, status, request id and project', async () => {
    const { apiKey, projectId } = await gw.ok('/v1/projects/create', { name: 'access' }, ROOT_KEY)
    expect((await gw.call('POST', '/v1/budgets/get', { key: 'none' }, apiKey)).status).toBe(404)
    expect((await gw.call('GET', '/no/such/route')).status).toBe(404)
    await gw.scrape()
    const access = log.lines.filter((l) => l.msg === 'access')
    // Every request of this file so far, each once: no more, no fewer.
    expect(access.map((l) => l.requestId).sort()).toEqual([...gw.requestIds].sort())
    const byId = (id: string) => access.find((l) => l.requestId === id)!
    const [get, unmatched, scrape] = gw.requestIds.slice(-3)
    expect(byId(get!)).toMatchObject({ level: 30, method: 'POST', route: '/v1/budgets/get', status: 404, projectId })
    expect(byId(get!).ms).toBeGreaterThan(0)
    expect(byId(unmatched!)).toMatchObject({ method: 'GET', route: 'unmatched', status: 404 })
    expect(byId(unmatched!)).not.toHaveProperty('projectId')
    expect(byId(scrape!)).toMatchObject({ method: 'GET', route: '/metrics', status: 200 })
  })
})

/** A histogram's series for these labels: cumulative buckets ending in +Inf = count, and a sum. */
function expectHistogram(samples: Sample[], name: string, labels: Record<string, string>): void {
  const buckets = find(samples, `${name}_bucket`, labels)
  expect(buckets.length).toBeGreaterThan(5)
  for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value)
  expect(buckets.at(-1)!.labels.le).toBe('+Inf')
  expect(buckets.at(-1)!.value).toBe(value(samples, `${name}_count`, labels))
  expect(buckets.at(-1)!.value).toBeGreaterThan(0)
  expect(value(samples, `${name}_sum`, labels)).toBeGreaterThan(0)
}

describe('the access log at 0', () => {
  test('a gateway logs no request line; an answer of 500 or more is logged anyway', async () => {
    const log = capturedLogger()
    const gw = await start({ accessLogSample: 0, logLevel: 'info' }, log.logger)
    try {
      const { apiKey } = await gw.ok('/v1/projects/create', { name: 'quiet' }, ROOT_KEY)
      expect((await gw.call('POST', '/v1/budgets/get', { key: 'none' }, apiKey)).status).toBe(404)
      await gw.scrape()
      expect(log.lines.filter((l) => l.msg === 'access')).toEqual([])
    } finally {
      await gw.gateway.close()
    }
    const alone = capturedLogger()
    const metrics = new Metrics({ logger: alone.logger, accessLogSample: 0, processMetrics: false })
    const started = performance.now()
    metrics.answered({ route: '/v1/budgets/authorize', method: 'POST', requestId: 'r-ok', projectId: 'p', started }, 200)
    metrics.answered({ route: '/v1/budgets/authorize', method: 'POST', requestId: 'r-503', projectId: 'p', started }, 503)
    await metrics.close()
    expect(alone.lines.map((l) => [l.msg, l.requestId, l.status])).toEqual([['access', 'r-503', 503]])
  })
})

describe("the worker's /metrics (METERING_METRICS_PORT)", () => {
  test('serves the registry on its own port: GET /metrics is the Prometheus text, anything else 404', async () => {
    const metrics = new Metrics()
    metrics.onDelivery('delivered')
    const server = await serveMetrics(metrics, '127.0.0.1', 0)
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/metrics`)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/)
      const s = parse(await res.text())
      expect(value(s, 'metering_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1)
      expect(value(s, 'metering_process_resident_memory_bytes')).toBeGreaterThan(0)
      expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404)
    } finally {
      await server.close()
      await metrics.close()
    }
  })
})

describe('scrape-time Redis figures, exactly (database 14 of the test Redis: nothing else uses it)', () => {
  const T0 = Date.UTC(2026, 0, 1)
  const names: QueueNames = { ingest: 'ingest', deadLetter: 'ingest-dlq', notifications: 'notifications', deliveries: 'deliveries' }
  let redis: Redis

  beforeAll(async () => {
    redis = new Redis(inject('redisUrl'), { db: 14 })
    await redis.flushdb()
    const ingest = new Queue(names.ingest, { connection: redis, prefix: QUEUE_PREFIX })
    for (let i = 0; i < 3; i++) await ingest.add(BATCH_JOB, { i }, { timestamp: T0 + i * 1000 })
    await ingest.add(BATCH_JOB, { late: true }, { timestamp: T0, delay: 3_600_000 })
    const dlq = new Queue(names.deadLetter, { connection: redis, prefix: QUEUE_PREFIX })
    for (let i = 0; i < 2; i++) await dlq.add(BATCH_JOB, { i }, { timestamp: T0 + 5_000 })
    await Promise.all([ingest.close(), dlq.close()])
    // Outbox lists of 1..12 entries, a claim beside one (not a list), two journal dead letters.
    for (let i = 1; i <= 12; i++) await redis.rpush(journalKey(`{p/k${i}}`), ...Array.from({ length: i }, (_, j) => `t\t{"n":${j}}`))
    await redis.set(claimKey(journalKey('{p/k1}')), 'token')
    await redis.rpush(DEAD_LETTER_KEY, 'a', 'b')
  })
  afterAll(async () => {
    await redis?.flushdb()
    redis?.disconnect()
  })

  async function scrapeWith(options: Parameters<Metrics['watch']>[2]): Promise<Sample[]> {
    const metrics = new Metrics({ processMetrics: false })
    metrics.watch(redis, names, options)
    try {
      return parse(await metrics.render())
    } finally {
      await metrics.close()
    }
  }

  test('queue depth by state, the oldest waiting job, dead letters, the journal backlog and its longest lists', async () => {
    const s = await scrapeWith({ nowMs: () => T0 + 10_000 })
    expect(find(s, 'metering_queue_jobs', { queue: 'ingest' }).map((x) => [x.labels.state, x.value])).toEqual([
      ['waiting', 3],
      ['active', 0],
      ['delayed', 1],
      ['failed', 0],
    ])
    expect(value(s, 'metering_queue_oldest_waiting_age_seconds', { queue: 'ingest' })).toBe(10)
    expect(value(s, 'metering_queue_oldest_waiting_age_seconds', { queue: 'ingest-dlq' })).toBe(5)
    expect(value(s, 'metering_queue_oldest_waiting_age_seconds', { queue: 'notifications' })).toBe(0)
    expect(value(s, 'metering_dead_letters', { kind: 'usage' })).toBe(2)
    expect(value(s, 'metering_dead_letters', { kind: 'journal' })).toBe(2)
    expect(value(s, 'metering_journal_backlog_entries')).toBe(78)
    expect(value(s, 'metering_journal_outboxes')).toBe(12)
    expect(value(s, 'metering_journal_scan_complete')).toBe(1)
    expect(find(s, 'metering_journal_outbox_entries').map((x) => [x.labels.outbox, x.value])).toEqual(
      Array.from({ length: 10 }, (_, i) => [journalKey(`{p/k${12 - i}}`), 12 - i]),
    )
  })

  test('past its bounds the scan stops and says so: figures are then a floor', async () => {
    const fewLists = await scrapeWith({ journalLimits: { count: 1000, calls: 100, lists: 5, named: 3 } })
    expect(value(fewLists, 'metering_journal_outboxes')).toBe(5)
    expect(value(fewLists, 'metering_journal_scan_complete')).toBe(0)
    expect(find(fewLists, 'metering_journal_outbox_entries')).toHaveLength(3)
    const oneCall = await scrapeWith({ journalLimits: { count: 2, calls: 1, lists: 1000, named: 10 } })
    expect(value(oneCall, 'metering_journal_scan_complete')).toBe(0)
    expect(value(oneCall, 'metering_journal_outboxes')).toBeLessThan(12)
  })

  test('a Redis that does not answer: /metrics still renders, the gauges are left out and the failure counted', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      commandTimeout: 300,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    })
    dead.on('error', () => {}) // refused: what the test is about
    const metrics = new Metrics({ processMetrics: false })
    metrics.watch(dead, names)
    try {
      const s = parse(await metrics.render())
      expect(find(s, 'metering_queue_jobs')).toEqual([])
      expect(find(s, 'metering_journal_backlog_entries')).toEqual([])
      expect(value(s, 'metering_metrics_collect_errors_total', { source: 'queues' })).toBe(1)
      expect(value(s, 'metering_metrics_collect_errors_total', { source: 'journal' })).toBe(1)
    } finally {
      await metrics.close()
      dead.disconnect()
    }
  })
})
