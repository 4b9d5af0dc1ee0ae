import { createServer } from 'node:http'
import { Queue } from 'bullmq'
import type { Logger } from 'pino'
import { collectDefaultMetrics, Counter, Histogram, Registry, type Metric } from 'prom-client'
import type { InsertObserver } from '../infra/clickhouse/observed.js'
import { QUEUE_PREFIX } from '../infra/redis/keys.js'
import { masters } from '../infra/redis/scan.js'
import { observeScripts, type RedisClient, type Script } from '../infra/redis/scripts.js'
import { DEAD_LETTER_KEY, JOURNAL_PATTERN, isJournalKey } from '../journal/keys.js'

// The Prometheus metrics of one gateway (or worker) process, in a prom-client Registry of its
// own (not prom-client's global one: a test process runs several gateways). The families, their
// labels and what each one costs are listed in README.md, "Metrics"; ops/grafana/metering.json
// charts them.

/** Latency bucket bounds in seconds, from 100 µs (an authorize's own time) to 2.5 s. */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
/** ClickHouse inserts take milliseconds to seconds (a chDB insert of a big batch, a slow server). */
const INSERT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

type Labels = Record<string, string | number>
interface MetricValue {
  metricName?: string
  labels: Labels
  value: number
}

/** One label set of a FastHistogram: observing is a short loop over the bounds and three additions. */
export class HistogramChild {
  readonly counts: Float64Array
  count = 0
  sum = 0

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length)
  }

  observe(seconds: number): void {
    this.count++
    this.sum += seconds
    const bounds = this.bounds
    for (let i = 0; i < bounds.length; i++)
      if (seconds <= bounds[i]!) {
        this.counts[i]!++
        return
      }
  }
}

/**
 * The families of the hot paths (a request, a script call), registered in the prom-client
 * Registry as custom metrics: the registry asks them for their values at scrape time and
 * formats them as it does its own. Why not prom-client's Histogram and Counter: even with label
 * sets bound once (`labels(...)`), each observe validates and hashes the labels and finds the
 * bucket by its bound as a property name: 0.43 µs per histogram observe and 0.19 µs per counter
 * inc on this machine, against 0.02 µs for record() below (README.md, "Metrics"). Children are
 * made once per label set by the caller, which keeps them.
 */
abstract class FastFamily<Child> {
  readonly aggregator = 'sum'
  protected readonly children: { labels: Labels; child: Child }[] = []

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric)
  }

  abstract readonly type: 'counter' | 'histogram'
  protected abstract make(): Child
  protected abstract values(labels: Labels, child: Child): MetricValue[]

  child(labels: Labels): Child {
    const child = this.make()
    this.children.push({ labels, child })
    return child
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValue[] }> {
    const values = this.children.flatMap(({ labels, child }) => this.values(labels, child))
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  /** Registry.resetMetrics(): every label set back to zero (their holders keep them). */
  reset(): void {
    for (const { child } of this.children) this.zero(child)
  }

  protected abstract zero(child: Child): void
}

class FastCounter extends FastFamily<{ value: number }> {
  readonly type = 'counter'
  protected make() {
    return { value: 0 }
  }
  protected values(labels: Labels, child: { value: number }): MetricValue[] {
    return [{ labels, value: child.value }]
  }
  protected zero(child: { value: number }): void {
    child.value = 0
  }
}

class FastHistogram extends FastFamily<HistogramChild> {
  readonly type = 'histogram'
  constructor(
    name: string,
    help: string,
    registry: Registry,
    private readonly bounds: readonly number[],
  ) {
    super(name, help, registry)
  }
  protected make() {
    return new HistogramChild(this.bounds)
  }
  protected zero(child: HistogramChild): void {
    child.counts.fill(0)
    child.count = 0
    child.sum = 0
  }
  protected values(labels: Labels, child: HistogramChild): MetricValue[] {
    const bucket = `${this.name}_bucket`
    const out: MetricValue[] = []
    let cumulative = 0
    this.bounds.forEach((le, i) => {
      cumulative += child.counts[i]!
      out.push({ metricName: bucket, labels: { ...labels, le }, value: cumulative })
    })
    out.push(
      { metricName: bucket, labels: { ...labels, le: '+Inf' }, value: child.count },
      { metricName: `${this.name}_sum`, labels, value: child.sum },
      { metricName: `${this.name}_count`, labels, value: child.count },
    )
    return out
  }
}

/** What the access log and the request metrics know of an answered request (src/http/app.ts's Exchange). */
export interface Answered {
  route: string
  method: string
  requestId: string
  /** The calling key's project, once its key is verified. */
  projectId: string | undefined
  /** performance.now() when the request came in. */
  started: number
}

/** The BullMQ queues whose depth /metrics reports (names as in src/events/queue.ts, src/notifications/options.ts). */
export interface QueueNames {
  ingest: string
  deadLetter: string
  notifications: string
  deliveries: string
}

export interface MetricsOptions {
  /** For access log lines (and nothing else). */
  logger?: Logger | undefined
  /** METERING_ACCESS_LOG_SAMPLE: the share of requests logged, 0..1; answers ≥ 500 always are. Default 0. */
  accessLogSample?: number
  /** prom-client's process and event-loop metrics (`metering_process_*`, `metering_nodejs_*`); default on. */
  processMetrics?: boolean
}

/** The outcomes the webhook deliveries counter starts with (src/workers/notifications.ts DeliveryOutcome). */
const DELIVERY_OUTCOMES = ['delivered', 'failed_attempt', 'dead', 'skipped'] as const

interface RouteEntry {
  latency: HistogramChild
  statuses: Map<number, { value: number }>
}

/**
 * The metrics of one process: requests and script calls (recorded on the hot path, see
 * FastFamily), ClickHouse inserts and webhook deliveries (recorded as they happen), the queues,
 * dead letters and journal backlog (read from Redis at scrape time, once `watch` names them),
 * and prom-client's process and event-loop metrics.
 */
export class Metrics {
  readonly registry = new Registry()
  /** The observer to give the ClickHouse store (src/infra/clickhouse/observed.ts). */
  readonly clickhouse: InsertObserver
  /** Webhook delivery outcomes (startNotificationWorker's onDelivery). */
  readonly onDelivery: (outcome: string) => void
  private readonly requests = new FastCounter('metering_http_requests_total', 'Requests answered, by route and status.', this.registry)
  private readonly durations = new FastHistogram(
    'metering_http_request_duration_seconds',
    'Time from request to answer, by route.',
    this.registry,
    LATENCY_BUCKETS,
  )
  private readonly routes = new Map<string, RouteEntry>()
  private readonly sample: number
  private readonly logger: Logger | undefined
  private readonly stops: (() => Promise<void> | void)[] = []

  constructor(options: MetricsOptions = {}) {
    this.sample = options.accessLogSample ?? 0
    this.logger = options.logger
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'metering_' })
    this.stops.push(observeScripts(scriptObserver(this.registry)))
    this.clickhouse = insertMetrics(this.registry)
    this.onDelivery = deliveryMetrics(this.registry)
  }

  /** One answered request: two Map lookups, a counter and a histogram (the hot path). */
  record(route: string, status: number, seconds: number): void {
    let entry = this.routes.get(route)
    if (entry === undefined) {
      entry = { latency: this.durations.child({ route }), statuses: new Map() }
      this.routes.set(route, entry)
    }
    let count = entry.statuses.get(status)
    if (count === undefined) {
      count = this.requests.child({ route, status: String(status) })
      entry.statuses.set(status, count)
    }
    count.value++
    entry.latency.observe(seconds)
  }

  /** A request answered: its metrics, and its access log line when sampled (always at 500 and above). */
  answered(ex: Answered, status: number): void {
    const seconds = (performance.now() - ex.started) / 1000
    this.record(ex.route, status, seconds)
    if (status >= 500 || (this.sample > 0 && (this.sample >= 1 || Math.random() < this.sample))) this.accessLog(ex, status, seconds)
  }

  private accessLog(ex: Answered, status: number, seconds: number): void {
    const line = { method: ex.method, route: ex.route, status, ms: Math.round(seconds * 1e6) / 1000, requestId: ex.requestId }
    this.logger?.info(ex.projectId ? { ...line, projectId: ex.projectId } : line, 'access')
  }

  /**
   * Reads, at each scrape, the depth of these queues, the dead letters and the journal backlog
   * from Redis (a few calls per queue, a capped SCAN: see redisStateMetrics). Nothing is read or
   * opened before the first scrape.
   */
  watch(redis: RedisClient, queues: QueueNames, options: WatchOptions = {}): void {
    this.stops.push(redisStateMetrics(this.registry, redis, queues, { nowMs: Date.now, journalLimits: JOURNAL_SCAN_LIMITS, ...options }))
  }

  /** The Prometheus text of every family. */
  render(): Promise<string> {
    return this.registry.metrics()
  }

  get contentType(): string {
    return this.registry.contentType
  }

  /** Stops observing script calls and closes the queues `watch` opened. */
  async close(): Promise<void> {
    for (const stop of this.stops.splice(0)) await stop()
  }
}

/** Script call latency per script: a FastHistogram child per Script, made at its first call. */
function scriptObserver(registry: Registry): (script: Script, ms: number) => void {
  const family = new FastHistogram('metering_redis_script_duration_seconds', 'Round trip of Redis function calls (lua/), by script.', registry, LATENCY_BUCKETS)
  const children = new Map<Script, HistogramChild>()
  return (script, ms) => {
    let child = children.get(script)
    if (child === undefined) {
      child = family.child({ script: script.name })
      children.set(script, child)
    }
    child.observe(ms / 1000)
  }
}

/** ClickHouse INSERT latency, rows and errors per table (a batch at a time: prom-client's own families). */
function insertMetrics(registry: Registry): InsertObserver {
  const registers = [registry]
  const duration = new Histogram({
    name: 'metering_clickhouse_insert_duration_seconds',
    help: 'Time of ClickHouse INSERTs, failed ones included, by table.',
    labelNames: ['table'],
    buckets: INSERT_BUCKETS,
    registers,
  })
  const rows = new Counter({
    name: 'metering_clickhouse_insert_rows_total',
    help: 'Rows inserted into ClickHouse, by table.',
    labelNames: ['table'],
    registers,
  })
  const errors = new Counter({
    name: 'metering_clickhouse_insert_errors_total',
    help: 'ClickHouse INSERTs that failed, by table.',
    labelNames: ['table'],
    registers,
  })
  return {
    inserted(table, n, seconds) {
      duration.observe({ table }, seconds)
      rows.inc({ table }, n)
    },
    failed(table, seconds) {
      duration.observe({ table }, seconds)
      errors.inc({ table })
    },
  }
}

/** Webhook delivery attempts by outcome, every outcome present from the start (at 0). */
function deliveryMetrics(registry: Registry): (outcome: string) => void {
  const counter = new Counter({
    name: 'metering_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome: delivered, failed_attempt (retried), dead (the last attempt failed), skipped.',
    labelNames: ['outcome'],
    registers: [registry],
  })
  for (const outcome of DELIVERY_OUTCOMES) counter.inc({ outcome }, 0)
  return (outcome) => counter.inc({ outcome })
}

/** The BullMQ states reported per queue. */
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const

/**
 * Bounds of the journal backlog's scan, per scrape and master: SCAN calls of COUNT keys (so at
 * most 100,000 keys looked at), outbox lists measured (LLEN, pipelined), and the longest lists
 * reported by name. Past a bound, metering_journal_scan_complete is 0 and the figures are a floor.
 */
export const JOURNAL_SCAN_LIMITS: JournalScanLimits = { count: 1000, calls: 100, lists: 1000, named: 10 }

export interface JournalScanLimits {
  /** SCAN's COUNT. */
  count: number
  /** SCAN calls per master. */
  calls: number
  /** Outbox lists measured, in all. */
  lists: number
  /** The longest lists reported by key. */
  named: number
}

export interface WatchOptions {
  /** Dates the oldest waiting job: the wall clock (BullMQ stamps jobs with it); tests give their own. */
  nowMs?: () => number
  journalLimits?: JournalScanLimits
}

interface QueueFigures {
  name: string
  counts: Record<string, number>
  oldestWaitingAgeSeconds: number
}

interface JournalFigures {
  entries: number
  outboxes: number
  complete: boolean
  longest: [string, number][]
  deadLetters: number
}

/** Runs `gather` once for every caller that asks while it runs: the gauges of one scrape share one read. */
function shared<T>(gather: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined
  return () =>
    (running ??= gather().finally(() => {
      running = undefined
    }))
}

/**
 * The gauges read from Redis at scrape time, each from one shared read per scrape: per queue the
 * jobs by state (getJobCounts: one call) and the age of its oldest waiting job (two calls); the
 * dead letters (the usage dead-letter queue's jobs, the journal's dead-letter list); the journal
 * backlog (a capped SCAN and an LLEN per list found). A read that fails (Redis down or past its
 * command timeout) leaves its gauges empty for that scrape and counts in
 * metering_metrics_collect_errors_total; /metrics still answers. Returns the closing of the queues.
 */
function redisStateMetrics(registry: Registry, redis: RedisClient, names: QueueNames, options: Required<WatchOptions>): () => Promise<void> {
  let queues: Queue[] | undefined
  // A connection error reaches the reads (counted below); the queues' own error events would only repeat it.
  const open = () =>
    (queues ??= [names.ingest, names.deadLetter, names.notifications, names.deliveries].map((name) =>
      new Queue(name, { connection: redis, prefix: QUEUE_PREFIX }).on('error', () => {}),
    ))
  const guarded = <T>(source: string, gather: () => Promise<T>) =>
    shared(() =>
      Promise.resolve()
        .then(gather)
        .catch((): undefined => {
          errors.inc({ source })
          return undefined
        }),
    )
  const queueRead = guarded('queues', () => Promise.all(open().map((q) => queueFigures(q, options.nowMs()))))
  const journalRead = guarded('journal', () => journalFigures(redis, options.journalLimits))
  // Read with the gauges of its scrape (it joins their reads), so that it counts this scrape's failures.
  const errors: Counter<'source'> = new Counter({
    name: 'metering_metrics_collect_errors_total',
    help: 'Scrape-time reads from Redis that failed, by source (queues, journal).',
    labelNames: ['source'],
    registers: [registry],
    async collect() {
      await Promise.all([queueRead(), journalRead()])
    },
  })
  queueGauges(registry, queueRead)
  journalGauges(registry, journalRead, options.journalLimits.named)
  deadLetterGauge(registry, queueRead, journalRead, names.deadLetter)
  return async () => {
    await Promise.all((queues ?? []).map((q) => q.close()))
  }
}

async function queueFigures(queue: Queue, nowMs: number): Promise<QueueFigures> {
  const [counts, oldest] = await Promise.all([queue.getJobCounts(...QUEUE_STATES), queue.getJobs(['waiting'], 0, 0, true)])
  const job = oldest[0]
  return { name: queue.name, counts, oldestWaitingAgeSeconds: job ? Math.max(0, nowMs - job.timestamp) / 1000 : 0 }
}

/**
 * A gauge whose samples are read at scrape time, registered like the FastFamily ones. Not a
 * prom-client Gauge with collect(): one without labels always shows a value (0 after reset), so
 * a failed read would pass for an empty backlog; this one then has no sample at all.
 */
class ReadGauge {
  readonly type = 'gauge'
  readonly aggregator = 'sum'

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
    private readonly read: () => Promise<MetricValue[]>,
  ) {
    registry.registerMetric(this as unknown as Metric)
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValue[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: await this.read() }
  }

  reset(): void {}
}

function queueGauges(registry: Registry, read: () => Promise<QueueFigures[] | undefined>): void {
  new ReadGauge('metering_queue_jobs', 'Jobs of each BullMQ queue by state (waiting, active, delayed, failed), read at scrape time.', registry, async () =>
    ((await read()) ?? []).flatMap((q) => QUEUE_STATES.map((state) => ({ labels: { queue: q.name, state }, value: q.counts[state] ?? 0 }))),
  )
  new ReadGauge('metering_queue_oldest_waiting_age_seconds', 'Age of the oldest waiting job of each BullMQ queue (0: none waiting).', registry, async () =>
    ((await read()) ?? []).map((q) => ({ labels: { queue: q.name }, value: q.oldestWaitingAgeSeconds })),
  )
}

function journalGauges(registry: Registry, read: () => Promise<JournalFigures | undefined>, named: number): void {
  const gauge = (name: string, help: string, value: (f: JournalFigures) => number) =>
    new ReadGauge(name, help, registry, async () => {
      const figures = await read()
      return figures ? [{ labels: {}, value: value(figures) }] : []
    })
  gauge(
    'metering_journal_backlog_entries',
    'Movements waiting in the journal outbox lists for ClickHouse (a floor when the scan was capped).',
    (f) => f.entries,
  )
  gauge('metering_journal_outboxes', 'Journal outbox lists holding movements (a floor when the scan was capped).', (f) => f.outboxes)
  gauge('metering_journal_scan_complete', '1 when the scrape-time scan of the outbox lists saw every key, 0 when it stopped at its bounds.', (f) =>
    f.complete ? 1 : 0,
  )
  new ReadGauge(
    'metering_journal_outbox_entries',
    `Movements waiting in the longest journal outbox lists (at most ${named}), by list key.`,
    registry,
    async () => ((await read())?.longest ?? []).map(([outbox, value]) => ({ labels: { outbox }, value })),
  )
}

/** Dead letters by kind: usage batches (the dead-letter queue's jobs) and journal entries (mg:journal:dead). */
function deadLetterGauge(
  registry: Registry,
  queueRead: () => Promise<QueueFigures[] | undefined>,
  journalRead: () => Promise<JournalFigures | undefined>,
  deadLetterQueue: string,
): void {
  new ReadGauge(
    'metering_dead_letters',
    'Dead letters by kind: usage (event batches whose every attempt failed: `npm run cli -- dead-letters`), journal (entries that can never be inserted: LRANGE mg:journal:dead 0 -1).',
    registry,
    async () => {
      const [queues, journal] = await Promise.all([queueRead(), journalRead()])
      const dlq = queues?.find((q) => q.name === deadLetterQueue)
      const values: MetricValue[] = []
      if (dlq) values.push({ labels: { kind: 'usage' }, value: (dlq.counts.waiting ?? 0) + (dlq.counts.delayed ?? 0) })
      if (journal) values.push({ labels: { kind: 'journal' }, value: journal.deadLetters })
      return values
    },
  )
}

/** The outbox lists of every master and their lengths, within the limits. */
async function journalFigures(redis: RedisClient, limits: JournalScanLimits): Promise<JournalFigures> {
  const lengths: [string, number][] = []
  let complete = true
  for (const node of masters(redis)) {
    const keys = new Set<string>()
    let cursor = '0'
    let calls = 0
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', JOURNAL_PATTERN, 'COUNT', limits.count)
      cursor = next
      calls++
      for (const key of found) if (isJournalKey(key)) keys.add(key)
    } while (cursor !== '0' && calls < limits.calls && lengths.length + keys.size < limits.lists)
    if (cursor !== '0') complete = false
    const measured = [...keys].slice(0, limits.lists - lengths.length)
    if (measured.length < keys.size) complete = false
    const pipeline = node.pipeline()
    for (const key of measured) pipeline.llen(key)
    const replies = measured.length > 0 ? ((await pipeline.exec()) ?? []) : []
    replies.forEach(([error, n], i) => {
      if (error) throw error
      if ((n as number) > 0) lengths.push([measured[i]!, n as number])
    })
  }
  const deadLetters = await redis.llen(DEAD_LETTER_KEY)
  lengths.sort((a, b) => b[1] - a[1])
  const entries = lengths.reduce((sum, [, n]) => sum + n, 0)
  return { entries, outboxes: lengths.length, complete, longest: lengths.slice(0, limits.named), deadLetters }
}

/**
 * Serves GET /metrics on its own port (`npm run worker`, which has no HTTP app; METERING_METRICS_PORT).
 * Answers the close of the server.
 */
export async function serveMetrics(metrics: Metrics, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404).end()
      return
    }
    metrics.render().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      () => res.writeHead(500).end(),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, resolve)
  })
  const address = server.address()
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
