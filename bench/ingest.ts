// Scenario "ingest": raw usage events through the gateway into ClickHouse,
// measured side by side with the ceilings they are held against.
//
// One redis-server (AOF everysec, like the authorize bench) and one
// clickhouse-server child (Debian's 18.16, started like the integration tests
// do) serve every leg. Legs, in order:
//   bullmq-add       ceiling: Queue.add of one small job per event, many in flight (bench process)
//   ch-insert-*      ceiling: store.insert of 10k-row batches into usage_events, back to back,
//                    for each store asked for (server: the child; chdb: chDB in a bench-owned dir)
//   ch-insert-once   the same through insertEventsOnce() (lookup + insert: what the ingest sink runs)
//   single           POST /v1/usage/record, one event and a unique idempotencyKey per request
//   batch            POST /v1/usage/record-batch, BATCH_SIZE events per request
//   drain            the worker stopped while a batch load builds a backlog, then started:
//                    how fast the backlog reaches ClickHouse
//   single-always    single and batch again, against a second redis-server at appendfsync always
//   batch-always     (the gateway's default: a reply only after the fsync of its write), with a
//                    gateway and worker of their own: what durability before acknowledgement
//                    costs ingest, printed beside the everysec legs
//   single-b         A/B (only when named): single, batch and drain again with the gateway and
//   batch-b          worker of another checkout (B_ROOT, e.g. /tmp/base), against a redis-server
//   drain-b          of their own and the same clickhouse-server; after the legs of this checkout,
//                    or before them with B_FIRST=1 (run both orders: ClickHouse fills as legs go)
// Redis is flushed after the ceilings. The gateway runs with METERING_INGEST_WORKER=0 and the
// ingest worker runs as its own process (`src/bin/worker.ts`, CLICKHOUSE_URL = the child), so it
// can be stopped for the drain leg and its CPU is read apart from the gateway's. INGEST_WORKERS=N
// runs N worker processes instead of one (their CPU summed under `worker`). During single
// and batch the bench polls `count()` of the leg's own project every 100 ms (drain over time)
// and looks up sampled event ids (lag from accept to queryable).

import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { runLoad, type Step } from './lib/load.js'
import type { BenchOptions } from './lib/options.js'
import { clockTicks, freePort, procCpuUs, spawnTs, stopAll, systemBusyUs, waitForHttp200, type Child } from './lib/proc.js'
import { startBenchRedis, type BenchRedis, type Fsync } from './lib/redis.js'
import { f, int, machineInfo } from './lib/report.js'
import { chText, IngestMonitor } from './lib/ingestMonitor.js'
import { printIngestReport, writeIngestReport, type IngestLeg, type IngestReport, type IngestTarget } from './lib/ingestReport.js'

const RESULTS_DIR = path.resolve('bench/results')
const BASELINES_DIR = path.resolve('bench/baselines')
const JSON_HEADERS = { 'content-type': 'application/json' }
const INSERT_BATCH = 10_000
const CUSTOMERS = 64

interface IngestOptions extends BenchOptions {
  /** Stores for the insert ceiling: 'server' (the clickhouse-server child) and/or 'chdb'. */
  stores: ('server' | 'chdb')[]
  batchSize: number
  batchConnections: number
  /** Ingest worker concurrency (METERING_INGEST_CONCURRENCY of the worker process). */
  workerConcurrency: number | undefined
  /** Ingest worker processes (INGEST_WORKERS, default 1); their CPU is summed under `worker`. */
  workers: number
}

function ingestOptions(o: BenchOptions, env = process.env): IngestOptions {
  const store = (env.STORE ?? 'server').trim()
  const stores = store === 'both' ? (['server', 'chdb'] as const) : store === 'chdb' ? (['chdb'] as const) : (['server'] as const)
  if (!['server', 'chdb', 'both'].includes(store)) throw new Error(`STORE / --store must be server, chdb or both (got ${store})`)
  const pos = (v: string | undefined, d: number): number => {
    const n = v === undefined || v === '' ? d : Number(v)
    if (!Number.isFinite(n) || n < 1) throw new Error(`bad number: ${v}`)
    return Math.round(n)
  }
  return {
    ...o,
    stores: [...stores],
    batchSize: Math.min(1000, pos(env.BATCH_SIZE, 1000)),
    batchConnections: pos(env.BATCH_CONNECTIONS, 16),
    workerConcurrency: env.METERING_INGEST_CONCURRENCY ? pos(env.METERING_INGEST_CONCURRENCY, 4) : undefined,
    workers: pos(env.INGEST_WORKERS, 1),
  }
}

export const INGEST_LEGS = [
  'bullmq-add',
  'ch-insert',
  'ch-insert-once',
  'single',
  'batch',
  'drain',
  'single-always',
  'batch-always',
  'single-b',
  'batch-b',
  'drain-b',
] as const

/** Legs run only when named (-l): the A/B legs of B_ROOT's checkout. */
const NAMED_ONLY: readonly string[] = ['single-b', 'batch-b', 'drain-b']

export async function runIngest(base: BenchOptions): Promise<IngestReport> {
  const opts = ingestOptions(base)
  const unknown = opts.legs.filter((l) => !(INGEST_LEGS as readonly string[]).includes(l))
  if (unknown.length) throw new Error(`unknown leg(s): ${unknown.join(', ')}; known: ${INGEST_LEGS.join(', ')}`)
  const want = (id: (typeof INGEST_LEGS)[number]): boolean => opts.legs.includes(id) || (opts.legs.length === 0 && !NAMED_ONLY.includes(id))
  if (opts.rounds > 1) console.warn('warning: -r/--rounds is not used by the ingest scenario (one round)')

  const timestamp = new Date().toISOString()
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'metering-bench-ingest-'))
  const machine: Record<string, unknown> = machineInfo({ clkTck: clockTicks() })
  console.log(`ingest bench: ${machine.cpus} CPUs, node ${machine.node}; stores for the insert ceiling: ${opts.stores.join(', ')}`)

  const legs: IngestLeg[] = []
  let redis: BenchRedis | undefined
  let redisAlways: BenchRedis | undefined
  let redisB: BenchRedis | undefined
  let ch: { url: string; pid: number; stop(): Promise<void> } | undefined
  try {
    redis = await startBenchRedis(path.join(tmp, 'redis'))
    machine.redisVersion = redis.version
    const { startClickHouseServer } = await import('../test/support/clickhouse.js')
    ch = await startClickHouseServer({ dataDir: path.join(tmp, 'clickhouse-server') })
    machine.clickhouseServerVersion = (await chText(ch.url, 'SELECT version()')).trim()
    console.log(`  redis ${redis.version}, clickhouse-server ${String(machine.clickhouseServerVersion)}`)

    // --- ceilings -----------------------------------------------------------
    if (want('bullmq-add')) legs.push(await guarded('bullmq-add', 'BullMQ add (1 job/event)', () => bullmqAddLeg(opts, redis!)))
    if (want('ch-insert')) {
      for (const store of opts.stores) {
        const id = `ch-insert-${store}`
        legs.push(await guarded(id, `ClickHouse insert (${store})`, () => insertLeg(opts, id, store, ch!, tmp, false)))
      }
    }
    if (want('ch-insert-once')) {
      legs.push(await guarded('ch-insert-once', 'insertEventsOnce (server)', () => insertLeg(opts, 'ch-insert-once', 'server', ch!, tmp, true)))
    }
    await redis.admin.flushall()

    // --- through the gateway (and the same with B_ROOT's gateway and worker) --
    const bRoot = process.env.B_ROOT
    const bWanted = want('single-b') || want('batch-b') || want('drain-b')
    if (bWanted && !bRoot) throw new Error('legs single-b, batch-b, drain-b need B_ROOT (another checkout, e.g. /tmp/base)')
    const bLegs = async (): Promise<void> => {
      if (!bWanted || !bRoot) return
      redisB = await startBenchRedis(path.join(tmp, 'redis-b'))
      const b = (id: (typeof INGEST_LEGS)[number]): boolean => (id === 'single' || id === 'batch' || id === 'drain') && want(`${id}-b`)
      legs.push(...(await gatewayLegs(opts, redisB, ch!, tmp, b, 'everysec', bRoot)))
    }
    if (process.env.B_FIRST === '1') await bLegs()
    if (want('single') || want('batch') || want('drain')) {
      legs.push(...(await gatewayLegs(opts, redis, ch, tmp, want)))
    }
    if (process.env.B_FIRST !== '1') await bLegs()
    // --- the same at appendfsync always (its own redis-server, gateway and worker) ---
    if (want('single-always') || want('batch-always')) {
      redisAlways = await startBenchRedis(path.join(tmp, 'redis-always'), 'always')
      const always = (id: (typeof INGEST_LEGS)[number]): boolean => (id === 'single' || id === 'batch') && want(`${id}-always`)
      legs.push(...(await gatewayLegs(opts, redisAlways, ch, tmp, always, 'always')))
    }
  } finally {
    await stopAll()
    await redis?.stop().catch(() => {})
    await redisAlways?.stop().catch(() => {})
    await redisB?.stop().catch(() => {})
    await ch?.stop().catch(() => {})
    rmSync(tmp, { recursive: true, force: true })
  }

  const report: IngestReport = {
    scenario: 'ingest',
    timestamp,
    options: { ...opts },
    machine,
    legs,
    targets: targets(legs),
  }
  printIngestReport(report)
  const files = writeIngestReport(RESULTS_DIR, report)
  const rel = (p: string): string => path.relative(process.cwd(), p)
  console.log(`\nwrote ${rel(files.json)} and ${rel(files.svg)} (copied to ingest-latest.*)`)
  return report
}

async function guarded(id: string, label: string, fn: () => Promise<IngestLeg | IngestLeg[]>): Promise<IngestLeg> {
  try {
    const r = await fn()
    return Array.isArray(r) ? r[0]! : r
  } catch (err) {
    const msg = (err as Error).message
    console.log(`\n  ${label} FAILED: ${msg}`)
    return { id, label, kind: 'ceiling', ok: false, error: msg.split('\n')[0] ?? msg }
  }
}

/** CPU of some pids (a list: their sum, e.g. the worker processes) and of the machine over a window. */
function cpuWindow(pids: Record<string, number | number[]>): () => { pct: Record<string, number>; clientPct: number; otherPct: number; wallS: number } {
  const t0 = process.hrtime.bigint()
  const c0 = process.cpuUsage()
  const s0 = systemBusyUs()
  const p0: Record<string, number> = {}
  const safeCpu = (pid: number | number[]): number => (Array.isArray(pid) ? pid.reduce((sum, p) => sum + pidCpu(p), 0) : pidCpu(pid))
  for (const [k, pid] of Object.entries(pids)) p0[k] = safeCpu(pid)
  return () => {
    const wallS = Number(process.hrtime.bigint() - t0) / 1e9
    const c = process.cpuUsage(c0)
    const pct: Record<string, number> = {}
    let mine = c.user + c.system
    for (const [k, pid] of Object.entries(pids)) {
      const us = safeCpu(pid) - (p0[k] ?? 0)
      pct[k] = (us / 1e6 / wallS) * 100
      if (Number.isFinite(us)) mine += us
    }
    return {
      pct,
      clientPct: ((c.user + c.system) / 1e6 / wallS) * 100,
      otherPct: Math.max(0, ((systemBusyUs() - s0 - mine) / 1e6 / wallS) * 100),
      wallS,
    }
  }
}
/** Pids of the direct children of `pid` (from /proc/<pid>/task/<tid>/children). */
function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number))
  } catch {
    return []
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
  } catch {
    return ''
  }
}

function pidCpu(pid: number): number {
  try {
    return procCpuUs(pid)
  } catch {
    return NaN
  }
}

// ---------------------------------------------------------------------------
// Ceilings

/** A job body shaped like one accepted event (what a one-job-per-event design would queue). */
function eventJob(runId: string, n: number): Record<string, unknown> {
  return {
    eventId: `ik_${runId}${n}`,
    projectId: 'p_bench',
    customerId: `c-${n % CUSTOMERS}`,
    eventSlug: 'api_call',
    properties: { value: 1 },
    timestampMs: Date.now(),
    receivedMs: Date.now(),
  }
}

async function bullmqAddLeg(opts: IngestOptions, redis: BenchRedis): Promise<IngestLeg> {
  const inFlight = 256
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null })
  const queue = new Queue('bench-add', { connection, prefix: '{bench}' })
  const runId = randomBytes(4).toString('hex')
  let n = 0
  const run = async (seconds: number): Promise<number> => {
    const until = Date.now() + seconds * 1000
    let done = 0
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (Date.now() < until) {
          await queue.add('event', eventJob(runId, ++n), { removeOnComplete: true })
          done++
        }
      }),
    )
    return done
  }
  try {
    process.stdout.write(`  BullMQ add: warm-up ${opts.warmupS}s… `)
    if (opts.warmupS > 0) await run(opts.warmupS)
    process.stdout.write(`measuring ${opts.durationS}s… `)
    const cpu = cpuWindow({ redis: redis.pid })
    const jobs = await run(opts.durationS)
    const w = cpu()
    const rate = jobs / w.wallS
    console.log(`${int(rate)} jobs/s`)
    return {
      id: 'bullmq-add',
      label: 'BullMQ add (1 job/event)',
      kind: 'ceiling',
      ok: true,
      eventsPerSec: rate,
      events: jobs,
      wallS: w.wallS,
      cpuPct: { ...w.pct, bench: w.clientPct },
      otherCpuPct: w.otherPct,
      note: `${inFlight} adds in flight from the bench process, one connection`,
    }
  } finally {
    await queue.obliterate({ force: true }).catch(() => {})
    await queue.close()
    connection.disconnect()
  }
}

function insertRows(runId: string, batch: number): Record<string, unknown>[] {
  const now = Date.now()
  const rows: Record<string, unknown>[] = new Array(INSERT_BATCH)
  for (let i = 0; i < INSERT_BATCH; i++) {
    rows[i] = {
      project_id: 'p_bench',
      event_id: `ik_${runId}-${batch}-${i}`,
      customer_id: `c-${i % CUSTOMERS}`,
      event_slug: 'api_call',
      feature_slug: 'api_call',
      value: 1,
      properties: '{"value":1}',
      ts_ms: now - (i % 1000),
    }
  }
  return rows
}

async function insertLeg(
  opts: IngestOptions,
  id: string,
  kind: 'server' | 'chdb',
  ch: { url: string; pid: number },
  tmp: string,
  once: boolean,
): Promise<IngestLeg> {
  const label = once ? 'insertEventsOnce (server)' : `ClickHouse insert (${kind})`
  const { openClickHouse } = await import('../src/infra/clickhouse/open.js')
  const { migrate } = await import('../src/infra/clickhouse/migrations.js')
  const { insertEventsOnce } = await import('../src/infra/clickhouse/tables.js')
  type Row = Parameters<typeof insertEventsOnce>[1][number]
  // A database of its own: the gateway legs count rows of their own projects in `default`.
  const database = once ? 'bench_insert_once' : `bench_insert_${kind}`
  const store = await openClickHouse({ url: kind === 'server' ? ch.url : undefined, dataDir: path.join(tmp, `chdb-${id}`), database })
  const runId = randomBytes(4).toString('hex')
  let batch = 0
  const run = async (seconds: number): Promise<number> => {
    const until = Date.now() + seconds * 1000
    let rows = 0
    while (Date.now() < until) {
      const b = insertRows(runId, ++batch)
      if (once) await insertEventsOnce(store, b as unknown as Row[], { dedupToken: `${runId}-${batch}` })
      else await store.insert('usage_events', b)
      rows += b.length
    }
    return rows
  }
  try {
    await migrate(store)
    process.stdout.write(`  ${label}: warm-up ${Math.min(opts.warmupS, 2)}s… `)
    if (opts.warmupS > 0) await run(Math.min(opts.warmupS, 2))
    process.stdout.write(`measuring ${opts.durationS}s… `)
    // chDB runs in a child of the bench (embedded.ts forks chdbWorker.ts).
    const chdbPid = kind === 'chdb' ? childPids(process.pid).find((c) => cmdline(c).includes('chdb')) : undefined
    const cpu = cpuWindow(kind === 'server' ? { clickhouse: ch.pid } : chdbPid ? { chdb: chdbPid } : {})
    const rows = await run(opts.durationS)
    const w = cpu()
    console.log(`${int(rows / w.wallS)} rows/s`)
    return {
      id,
      label,
      kind: 'ceiling',
      ok: true,
      eventsPerSec: rows / w.wallS,
      events: rows,
      wallS: w.wallS,
      cpuPct: { ...w.pct, bench: w.clientPct },
      otherCpuPct: w.otherPct,
      note: `${INSERT_BATCH.toLocaleString('en-US')}-row batches, one at a time${once ? ', lookup of existing ids then insert' : ''}${kind === 'chdb' && !chdbPid ? '; chDB child not found: its CPU is in "other"' : ''}`,
    }
  } finally {
    await store.close().catch(() => {})
  }
}

// ---------------------------------------------------------------------------
// Through the gateway

interface Project {
  projectId: string
  apiKey: string
}

async function post(base: string, p: string, key: string, body: unknown): Promise<unknown> {
  const res = await fetch(base + p, { method: 'POST', headers: { ...JSON_HEADERS, authorization: `Bearer ${key}` }, body: JSON.stringify(body) })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`POST ${p} → ${res.status}: ${text.slice(0, 300)}`)
  return text ? JSON.parse(text) : {}
}

async function newProject(base: string, rootKey: string, name: string): Promise<Project> {
  const r = (await post(base, '/v1/projects/create', rootKey, { name })) as Partial<Project>
  if (!r.apiKey || !r.projectId) throw new Error(`/v1/projects/create: ${JSON.stringify(r)}`)
  return { projectId: r.projectId, apiKey: r.apiKey }
}

/**
 * The ingest worker processes (INGEST_WORKERS): each claims its events in Redis, so they share a
 * queue exactly once. `root`: the checkout they run from (B_ROOT for the -b legs).
 */
function startWorkers(redisUrl: string, chUrl: string, tmp: string, opts: IngestOptions, root?: string): Child[] {
  return Array.from({ length: opts.workers }, (_, i) =>
    spawnTs('worker', path.join(root ?? '.', 'src/bin/worker.ts'), {
      REDIS_URL: redisUrl,
      CLICKHOUSE_URL: chUrl,
      METERING_DATA_DIR: path.join(tmp, `${i === 0 ? 'worker' : `worker-${i}`}${root ? '-b' : ''}`),
      LOG_LEVEL: 'warn',
      LOG_PRETTY: '0',
      ...(opts.workerConcurrency ? { METERING_INGEST_CONCURRENCY: String(opts.workerConcurrency) } : {}),
    }),
  )
}

const pidsOf = (children: Child[]): number[] => children.map((c) => c.pid)

async function gatewayLegs(
  opts: IngestOptions,
  redis: BenchRedis,
  ch: { url: string; pid: number },
  tmp: string,
  want: (id: (typeof INGEST_LEGS)[number]) => boolean,
  fsync: Fsync = 'everysec',
  /** Another checkout whose gateway and worker run these legs (B_ROOT: legs `<mode>-b`). */
  root?: string,
): Promise<IngestLeg[]> {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const rootKey = randomBytes(24).toString('hex')
  const gateway = spawnTs('gateway', path.join(root ?? '.', 'src/bin/gateway.ts'), {
    PORT: String(port),
    REDIS_URL: redis.url,
    CLICKHOUSE_URL: ch.url,
    METERING_ROOT_KEY: rootKey,
    METERING_DATA_DIR: path.join(tmp, `gateway-${fsync}${root ? '-b' : ''}`),
    LOG_LEVEL: 'warn',
    LOG_PRETTY: '0',
    // The worker runs as its own process (below), so it can be stopped for the drain leg.
    METERING_INGEST_WORKER: '0',
  })
  await waitForHttp200(gateway, `${url}/healthz`)
  let workers = startWorkers(redis.url, ch.url, tmp, opts, root)
  const results: IngestLeg[] = []
  const ctx: GwContext = { opts, url, rootKey, gateway, workers, redis, ch, fsync, b: root !== undefined }
  try {
    // A contract mismatch fails here, readably, rather than as a leg full of 4xx.
    const probe = await newProject(url, rootKey, 'bench-probe')
    const one = await post(url, '/v1/usage/record', probe.apiKey, { customerId: 'c-0', eventSlug: 'api_call', idempotencyKey: 'probe' })
    if ((one as { accepted?: boolean }).accepted !== true) throw new Error(`probe record: ${JSON.stringify(one)}`)
    const m = new IngestMonitor(ch.url, 'default', probe.projectId)
    m.start()
    const got = await m.waitFor(1, 60_000)
    await m.stop()
    if (got === undefined) throw new Error(`the probe event did not reach ClickHouse within 60 s (worker: ${workers[0]!.tail().slice(-500)})`)

    if (want('single')) results.push(await legGuard(legId(ctx, 'single'), legLabel(ctx, 'single'), () => loadLeg(ctx, 'single')))
    if (want('batch')) results.push(await legGuard(legId(ctx, 'batch'), legLabel(ctx, 'batch'), () => loadLeg(ctx, 'batch')))
    if (want('drain')) {
      results.push(
        await legGuard(legId(ctx, 'drain'), legLabel(ctx, 'drain'), async () => {
          const r = await drainLeg(
            ctx,
            async () => {
              await Promise.all(workers.map((w) => w.stop()))
            },
            () => (workers = ctx.workers = startWorkers(redis.url, ch.url, tmp, opts, root)),
          )
          return r
        }),
      )
    }
    return results
  } finally {
    await stopAll()
  }
}

interface GwContext {
  opts: IngestOptions
  url: string
  rootKey: string
  gateway: Child
  workers: Child[]
  redis: BenchRedis
  ch: { url: string; pid: number }
  /** appendfsync of `redis`: the legs at `always` are named `<mode>-always`. */
  fsync: Fsync
  /** The gateway and worker of B_ROOT: the legs are named `<mode>-b`. */
  b: boolean
}

function legId(ctx: GwContext, mode: 'single' | 'batch' | 'drain'): string {
  return ctx.b ? `${mode}-b` : ctx.fsync === 'always' ? `${mode}-always` : mode
}

function legLabel(ctx: GwContext, mode: 'single' | 'batch' | 'drain'): string {
  const label = mode === 'single' ? 'POST /v1/usage/record' : mode === 'batch' ? `POST record-batch (${ctx.opts.batchSize}/req)` : 'drain of a backlog'
  return ctx.b ? `${label}, B (B_ROOT)` : ctx.fsync === 'always' ? `${label}, fsync always` : label
}

async function legGuard(id: string, label: string, fn: () => Promise<IngestLeg>): Promise<IngestLeg> {
  try {
    return await fn()
  } catch (err) {
    const msg = (err as Error).message
    console.log(`\n  ${label} FAILED: ${msg}`)
    return { id, label, kind: id.startsWith('drain') ? 'drain' : 'ingest', ok: false, error: msg.split('\n')[0] ?? msg }
  }
}

/**
 * The load of a leg: bodies with unique idempotency keys; every `sampleEvery`-th request (single)
 * or the first event of every request (batch) carries an `id` too, so it is found in ClickHouse
 * by that id (event_id = id) and its lag measured from the moment its request was answered.
 */
function legSteps(ctx: GwContext, mode: 'single' | 'batch', apiKey: string, mon: IngestMonitor | undefined, samples = true): Step {
  const runId = randomBytes(4).toString('hex')
  const headers = { ...JSON_HEADERS, authorization: `Bearer ${apiKey}` }
  const size = ctx.opts.batchSize
  let seq = 0
  let req = 0
  const SAMPLE_EVERY = 50
  const ev = (n: number, sample: string | undefined): string =>
    `{"customerId":"c-${n % CUSTOMERS}","eventSlug":"api_call","idempotencyKey":"${runId}-${n}",${sample ? `"id":"${sample}",` : ''}"properties":{"value":1}}`
  if (mode === 'single') {
    return {
      name: 'record',
      method: 'POST',
      path: '/v1/usage/record',
      headers,
      body: (c) => {
        const n = ++seq
        const sample = mon && samples && n % SAMPLE_EVERY === 0 ? `lag-${runId}-${n}` : undefined
        c.sample = sample
        return ev(n, sample)
      },
      onResponse: (status, body, c) => {
        if (status !== 200 || !body.includes('"accepted":true')) return
        if (mon) {
          mon.accepted++
          if (typeof c.sample === 'string') mon.sampleAccepted(c.sample, Date.now())
        }
      },
    }
  }
  return {
    name: 'record-batch',
    method: 'POST',
    path: '/v1/usage/record-batch',
    headers,
    body: (c) => {
      const r = ++req
      const sample = mon && samples ? `lag-${runId}-b${r}` : undefined
      c.sample = sample
      const parts = new Array<string>(size)
      for (let i = 0; i < size; i++) parts[i] = ev(++seq, i === 0 ? sample : undefined)
      return `{"events":[${parts.join(',')}]}`
    },
    onResponse: (status, body, c) => {
      if (status !== 200 || !mon) return
      // Every result is {index, accepted: true} unless some were refused (then count them).
      const refused = body.split('"accepted":false').length - 1
      mon.accepted += size - refused
      if (typeof c.sample === 'string' && body.includes('{"index":0,"accepted":true')) mon.sampleAccepted(c.sample, Date.now())
    },
  }
}

/** Jobs ever added to the gateway's ingest queue (BullMQ's id counter; ids are numeric when no jobId is given). */
async function ingestJobsAdded(redis: BenchRedis): Promise<number> {
  return Number((await redis.admin.get('{mg-queue}:usage-events:id')) ?? 0)
}

async function loadLeg(ctx: GwContext, mode: 'single' | 'batch'): Promise<IngestLeg> {
  const { opts } = ctx
  const id = legId(ctx, mode)
  const label = legLabel(ctx, mode)
  const connections = mode === 'single' ? opts.connections : opts.batchConnections
  const perReq = mode === 'single' ? 1 : opts.batchSize

  // Warm-up into a project of its own, then wait until the worker has drained it.
  process.stdout.write(`  ${label}: warm-up ${opts.warmupS}s… `)
  if (opts.warmupS > 0) {
    const warm = await newProject(ctx.url, ctx.rootKey, `bench-warm-${mode}`)
    const wm = new IngestMonitor(ctx.ch.url, 'default', warm.projectId, 250)
    const step = legSteps(ctx, mode, warm.apiKey, wm, false)
    wm.start()
    await runLoad({ url: ctx.url, connections, durationS: opts.warmupS, pipelining: opts.pipelining, steps: [step] })
    await wm.waitFor(wm.accepted, 60_000)
    await wm.stop()
  }

  process.stdout.write(`measuring ${opts.durationS}s… `)
  const project = await newProject(ctx.url, ctx.rootKey, `bench-${mode}`)
  const mon = new IngestMonitor(ctx.ch.url, 'default', project.projectId, 100)
  const step = legSteps(ctx, mode, project.apiKey, mon)
  const jobs0 = await ingestJobsAdded(ctx.redis)
  mon.start()
  const startMs = Date.now()
  const after = cpuWindow({ gateway: ctx.gateway.pid, worker: pidsOf(ctx.workers), redis: ctx.redis.pid, clickhouse: ctx.ch.pid })
  const r = await runLoad({ url: ctx.url, connections, durationS: opts.durationS, pipelining: opts.pipelining, steps: [step] })
  const loadEndMs = Date.now()
  const cpu = after()
  const acceptedTotal = mon.accepted
  const storedAtEnd = mon.lastStored
  const jobs = (await ingestJobsAdded(ctx.redis)) - jobs0
  const caughtUp = await mon.waitFor(acceptedTotal, 120_000)
  await mon.waitSamples(5_000)
  await mon.stop()
  const lag = mon.lag()
  const ingestRate = acceptedTotal / r.wallS
  const series = mon.series
  const maxBacklog = Math.max(0, ...series.filter((p) => p.t <= loadEndMs - startMs + 50).map((p) => p.accepted - p.stored))
  const catchUpS = caughtUp === undefined ? NaN : Math.max(0, (caughtUp - loadEndMs) / 1000)
  const drainWallS = caughtUp === undefined ? NaN : (caughtUp - startMs) / 1000
  const drainRate = caughtUp === undefined ? mon.lastStored / ((Date.now() - startMs) / 1000) : acceptedTotal / drainWallS
  console.log(
    `${int(ingestRate)} events/s accepted (${int(r.rps)} req/s); stored ${int(drainRate)} events/s, caught up ${Number.isFinite(catchUpS) ? `${catchUpS.toFixed(1)} s` : 'NOT within 120 s'} after the load; lag p99 ${f(lag.p99 / 1000, 2)} s`,
  )
  if (mon.pollErrors) console.log(`    (${mon.pollErrors} ClickHouse polls failed; last: ${mon.lastError})`)
  return {
    id,
    label,
    kind: 'ingest',
    ok: true,
    eventsPerSec: ingestRate,
    events: acceptedTotal,
    reqPerSec: r.rps,
    connections,
    eventsPerRequest: perReq,
    httpLatencyMs: { p50: r.latency.p50, p99: r.latency.p99 },
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statusCodes: r.statusCodes,
    wallS: r.wallS,
    drain: {
      eventsPerSec: drainRate,
      storedDuringLoadPerSec: storedAtEnd / r.wallS,
      backlogAtLoadEnd: acceptedTotal - storedAtEnd,
      maxBacklog,
      catchUpS,
      stored: mon.lastStored,
    },
    lagMs: lag,
    cpuPct: { ...cpu.pct, bench: cpu.clientPct },
    otherCpuPct: cpu.otherPct,
    ingestJobs: jobs,
    note: `${int(jobs)} ingest jobs (group commits): ${f(acceptedTotal / Math.max(1, jobs), 0)} events per job, ${int(jobs / r.wallS)} jobs/s; the worker merges jobs into shared ClickHouse inserts (src/workers/ingest.ts)`,
    series: thin(series),
  }
}

/**
 * Worker stopped; a batch load builds a backlog in Redis for the leg's duration; the worker
 * is started again and the backlog's arrival in ClickHouse is timed from the first stored row
 * (so the worker's own start-up, tsx and migrations, is left out) to the last.
 */
async function drainLeg(ctx: GwContext, stopWorker: () => Promise<void>, restartWorker: () => Child[]): Promise<IngestLeg> {
  const { opts } = ctx
  const label = legLabel(ctx, 'drain')
  await stopWorker()
  const project = await newProject(ctx.url, ctx.rootKey, 'bench-drain')
  const mon = new IngestMonitor(ctx.ch.url, 'default', project.projectId, 100)
  const step = legSteps(ctx, 'batch', project.apiKey, mon, false)
  process.stdout.write(`  ${label}: worker stopped, filling ${opts.durationS}s of record-batch… `)
  const fill = await runLoad({ url: ctx.url, connections: opts.batchConnections, durationS: opts.durationS, pipelining: 1, steps: [step] })
  const backlog = mon.accepted
  const memory = await queuedBytes(ctx.redis)
  process.stdout.write(`${int(backlog)} events queued (${memory}); worker started… `)
  mon.start()
  const workers = restartWorker()
  const cpu = cpuWindow({ worker: pidsOf(workers), redis: ctx.redis.pid, clickhouse: ctx.ch.pid })
  const done = await mon.waitFor(backlog, 180_000)
  const w = cpu()
  await mon.stop()
  const first = mon.series.find((p) => p.stored > 0)
  const last = done === undefined ? mon.series[mon.series.length - 1] : mon.series.find((p) => p.stored >= backlog)
  let rate = NaN
  let wallS = NaN
  if (first && last && last.t > first.t) {
    wallS = (last.t - first.t) / 1000
    rate = (last.stored - first.stored) / wallS
  }
  // Peak over any 1 s window of the series.
  let peak = 0
  for (let i = 0, j = 0; i < mon.series.length; i++) {
    while (j < i && mon.series[i]!.t - mon.series[j]!.t > 1000) j++
    const a = mon.series[j]!
    const b = mon.series[i]!
    if (b.t - a.t >= 500) peak = Math.max(peak, (b.stored - a.stored) / ((b.t - a.t) / 1000))
  }
  console.log(`${int(rate)} events/s drained${done === undefined ? ` (INCOMPLETE: ${int(mon.lastStored)} of ${int(backlog)} in 180 s)` : ''}`)
  return {
    id: legId(ctx, 'drain'),
    label,
    kind: 'drain',
    ok: true,
    eventsPerSec: rate,
    events: backlog,
    wallS,
    fillEventsPerSec: backlog / fill.wallS,
    drain: {
      eventsPerSec: rate,
      peak1sPerSec: peak,
      stored: mon.lastStored,
      complete: done !== undefined,
    },
    cpuPct: { ...w.pct, bench: w.clientPct },
    otherCpuPct: w.otherPct,
    note: `${memory}; worker = src/bin/worker.ts × ${opts.workers} (INGEST_WORKERS; CPU summed), METERING_INGEST_CONCURRENCY ${opts.workerConcurrency ?? 'default (4)'}; timed from the first stored row to the last`,
    series: thin(mon.series),
  }
}

/**
 * What the waiting ingest jobs hold in Redis per event: the `data` field of up to 50 of them
 * (HSTRLEN) over their events (either job format), and MEMORY USAGE of their hashes.
 */
async function queuedBytes(redis: BenchRedis): Promise<string> {
  const ids = await redis.admin.lrange('{mg-queue}:usage-events:wait', 0, 49)
  let data = 0
  let usage = 0
  let events = 0
  for (const id of ids) {
    const key = `{mg-queue}:usage-events:${id}`
    const text = (await redis.admin.hget(key, 'data')) ?? '{}'
    const job = JSON.parse(text) as { events?: unknown[]; projects?: { ids: unknown[] }[] }
    events += job.events?.length ?? (job.projects ?? []).reduce((n, g) => n + g.ids.length, 0)
    data += Buffer.byteLength(text)
    usage += Number((await redis.admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0)
  }
  return events === 0 ? 'no waiting job sampled' : `job data ${f(data / events, 1)} B/event, MEMORY USAGE ${f(usage / events, 1)} B/event (${ids.length} jobs)`
}

function thin<T>(a: T[], max = 400): T[] {
  if (a.length <= max) return a
  const step = a.length / max
  const out: T[] = []
  for (let i = 0; i < max; i++) out.push(a[Math.floor(i * step)]!)
  out.push(a[a.length - 1]!)
  return out
}

// ---------------------------------------------------------------------------
// Targets (issue 3, Benchmark)

/**
 * The authorize figure the single-event target compares with: this machine's latest authorize
 * run (bench/results/authorize-latest.json, untracked) when there is one, else the committed
 * baseline (bench/baselines/authorize.json).
 */
function authorizeBaseline(): { rps: number; from: string } | undefined {
  for (const file of [path.join(RESULTS_DIR, 'authorize-latest.json'), path.join(BASELINES_DIR, 'authorize.json')]) {
    try {
      const r = JSON.parse(readFileSync(file, 'utf8')) as {
        timestamp: string
        legs: { id: string; ok: boolean; opsPerSec?: number }[]
      }
      const leg = r.legs.find((l) => l.id === 'ours-authorize' && l.ok) ?? r.legs.find((l) => l.id === 'ours-pair' && l.ok)
      if (leg?.opsPerSec) return { rps: leg.opsPerSec, from: `${path.relative(process.cwd(), file)} ${r.timestamp}, ${leg.id}` }
    } catch {
      // missing or unreadable: try the next one
    }
  }
  return undefined
}

function targets(legs: IngestLeg[]): IngestTarget[] {
  const get = (id: string): IngestLeg | undefined => legs.find((l) => l.id === id && l.ok)
  const single = get('single')
  const batch = get('batch')
  const drain = get('drain')
  const base = authorizeBaseline()
  const t = (name: string, value: number | null | undefined, limit: string, ok: (v: number) => boolean, note?: string): IngestTarget => {
    const v = value === undefined || value === null || !Number.isFinite(value) ? null : value
    return { name, value: v, limit, pass: v === null ? null : ok(v), ...(note ? { note } : {}) }
  }
  const lagP99 = Math.max(...[single, batch].filter((l): l is IngestLeg => l?.lagMs !== undefined && l.lagMs.count > 0).map((l) => l.lagMs!.p99))
  const missing = [single, batch].reduce((s, l) => s + (l?.lagMs?.missing ?? 0), 0)
  const behind = [single, batch].filter((l): l is IngestLeg => l?.drain !== undefined)
  const worstCatchUp = behind.length ? Math.max(...behind.map((l) => l.drain!.catchUpS ?? NaN)) : NaN
  return [
    t(
      'single-event ingest, events/s vs authorize req/s',
      single && base ? single.eventsPerSec! / base.rps : null,
      '≥ 0.8×',
      (v) => v >= 0.8,
      base ? `${int(single?.eventsPerSec)} / ${int(base.rps)} (${base.from})` : 'no bench/results/authorize-latest.json nor bench/baselines/authorize.json',
    ),
    t('batch endpoint, events/s accepted', batch?.eventsPerSec, '≥ 150,000', (v) => v >= 150_000),
    t('drain into ClickHouse, events/s (backlog leg)', drain?.eventsPerSec, '≥ 100,000', (v) => v >= 100_000),
    t(
      'drain never behind ingest: catch-up after load (s)',
      worstCatchUp,
      '≤ 2 s',
      (v) => v <= 2,
      'worst of single/batch: time from the end of the load until every accepted event was stored',
    ),
    t(
      'end-to-end lag p99, accept → queryable (s)',
      Number.isFinite(lagP99) ? lagP99 / 1000 : null,
      '< 2 s',
      (v) => v < 2,
      `worst of single/batch${missing ? `; ${missing} samples never seen` : ''}`,
    ),
  ]
}
