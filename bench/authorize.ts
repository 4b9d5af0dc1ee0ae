// Scenario "authorize": how close is an authorize through our gateway to a
// bare uWS JSON endpoint, and how does it compare with what a user would
// build without us (Fastify + rate-limiter-flexible on Redis)?
//
// Legs, each against a freshly started server process (and a fresh Redis
// where one is used, with the same settings for the gateway and the peer):
//   hello           uWS hello-world JSON endpoint: the ceiling
//   peer            Fastify + 3× RateLimiterRedis (hour, day, month)
//   ours-pair       gateway: authorize then settle, per connection
//   ours-authorize  gateway: authorize only (apples to apples with the peer,
//                   which has nothing to settle); the targets use this leg
//   ours-always     ours-authorize with its Redis at appendfsync always (every
//                   reply after the fsync of its write): what durability costs
//   ours-b          A/B: ours-authorize again, against a gateway from B_ROOT
//                   (another checkout) and/or with B_ENV (NAME=value,...) added
//                   to its environment; A_ROOT likewise for the ours-* legs
//
// All legs send the same request: the authorize body with a random budget key
// (out of --budgets) and a unique idempotency key, built the same way, so the
// load generator does the same work everywhere.

import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { runLoad, type Step } from './lib/load.js'
import type { BenchOptions } from './lib/options.js'
import { clockTicks, freePort, spawnTs, stopAll, waitForHttp200, waitForLine, type Child } from './lib/proc.js'
import { redisFigures, redisReset, startBenchRedis, type BenchRedis, type Fsync } from './lib/redis.js'
import { machineInfo, printReport, writeReport, type LegResult, type Report, type Target } from './lib/report.js'

export const LEGS = ['hello', 'peer', 'ours-pair', 'ours-authorize', 'ours-always', 'ours-b'] as const
type LegId = (typeof LEGS)[number]
const LABELS: Record<LegId, string> = {
  hello: 'uWS hello-world',
  peer: 'peer (Fastify+RLF)',
  'ours-pair': 'ours auth+settle',
  'ours-authorize': 'ours authorize',
  'ours-always': 'ours auth fsync',
  'ours-b': 'ours authorize B',
}
const RESULTS_DIR = path.resolve('bench/results')

// Large enough never to be reached in a bench run (0.25 per authorize).
const LIMIT = '100000000000'
const AMOUNT = '0.25'
const SETTLE_AMOUNT = '0.2'
const JSON_HEADERS = { 'content-type': 'application/json' }

export async function runAuthorize(opts: BenchOptions): Promise<Report> {
  const unknown = opts.legs.filter((l) => l !== 'ours' && !(LEGS as readonly string[]).includes(l))
  if (unknown.length) throw new Error(`unknown leg(s): ${unknown.join(', ')}; known: ${LEGS.join(', ')}, ours`)
  const want = (id: LegId): boolean =>
    id === 'ours-b' ? opts.legs.includes(id) : opts.legs.length === 0 || opts.legs.includes(id) || (id.startsWith('ours') && opts.legs.includes('ours'))

  const timestamp = new Date().toISOString()
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'metering-bench-'))
  const machine = machineInfo({ clkTck: clockTicks() })
  const ctx: LegContext = { opts, tmp, authorizeBody: makeAuthorizeBody(opts.budgets) }
  console.log(`authorize bench: ${machine.cpus} CPUs, node ${machine.node}`)

  const rounds: LegResult[][] = []
  try {
    for (let round = 1; round <= opts.rounds; round++) {
      if (opts.rounds > 1) console.log(`round ${round}/${opts.rounds}`)
      const legs: LegResult[] = []
      if (want('hello')) legs.push(...(await guarded(['hello'], () => helloLeg(ctx))))
      if (want('peer')) legs.push(...(await guarded(['peer'], () => peerLeg(ctx))))
      const ours = (['ours-pair', 'ours-authorize'] as const).filter(want)
      if (ours.length) legs.push(...(await guarded(ours, () => oursLegs(ctx, ours))))
      if (want('ours-always')) legs.push(...(await guarded(['ours-always'], () => oursLegs(ctx, ['ours-always'], {}, process.env.A_ROOT, 'always'))))
      if (want('ours-b')) legs.push(...(await guarded(['ours-b'], () => oursLegs(ctx, ['ours-b'], envList(process.env.B_ENV), process.env.B_ROOT))))
      rounds.push(legs)
    }
  } finally {
    await stopAll()
    rmSync(tmp, { recursive: true, force: true })
  }

  const legs = medianRounds(rounds)
  const report: Report = {
    scenario: 'authorize',
    timestamp,
    options: { ...opts },
    machine: { ...machine, redisVersion: ctx.redisVersion },
    legs,
    ...compare(legs, opts),
  }
  printReport(report)
  const files = writeReport(RESULTS_DIR, 'authorize', report)
  const rel = (p: string): string => path.relative(process.cwd(), p)
  console.log(`\nwrote ${rel(files.json)} and ${rel(files.svg)} (copied to authorize-latest.*)`)
  return report
}

interface LegContext {
  opts: BenchOptions
  tmp: string
  authorizeBody: (c: Record<string, unknown>) => string
  redisVersion?: string
}

/**
 * Body of every authorize: a random budget key (kept in the per-connection
 * context for the settle that follows) and a unique idempotency key, a
 * per-run prefix plus a counter (cheap to build, never repeats).
 */
function makeAuthorizeBody(budgets: number): (c: Record<string, unknown>) => string {
  const runId = randomBytes(4).toString('hex')
  let seq = 0
  return (c) => {
    const key = `bench-${(Math.random() * budgets) | 0}`
    c.key = key
    return `{"key":"${key}","amount":"${AMOUNT}","idempotencyKey":"${runId}-${++seq}"}`
  }
}

/** `NAME=value,NAME=value` as an environment. */
function envList(text = ''): Record<string, string> {
  return Object.fromEntries(
    text
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  )
}

/** Runs legs; a failure is printed and recorded, and the remaining legs still run. */
async function guarded(ids: readonly LegId[], fn: () => Promise<LegResult[]>): Promise<LegResult[]> {
  try {
    return await fn()
  } catch (err) {
    const msg = (err as Error).message
    console.log(`\n  ${ids.map((i) => LABELS[i]).join(' / ')} FAILED: ${msg}`)
    return ids.map((id) => ({ id, label: LABELS[id], ok: false, error: msg.split('\n')[0] ?? msg }))
  } finally {
    await stopAll()
  }
}

/** Warm-up (discarded), then the measured run; Redis stats and all CPU figures cover the measured run only. */
async function measure(c: LegContext, id: LegId, url: string, steps: Step[], server: Child, redis: BenchRedis | undefined, op: string): Promise<LegResult> {
  const { opts } = c
  const base = { url, connections: opts.connections, pipelining: opts.pipelining, steps }
  process.stdout.write(`  ${LABELS[id]}: warm-up ${opts.warmupS}s… `)
  if (opts.warmupS > 0) await runLoad({ ...base, durationS: opts.warmupS })
  process.stdout.write(`measuring ${opts.durationS}s… `)
  if (redis) await redisReset(redis)
  const r = await runLoad({
    ...base,
    durationS: opts.durationS,
    cpuPids: { server: server.pid, ...(redis ? { redis: redis.pid } : {}) },
  })
  // An "op" is a completed authorize (step 0); for one-step legs, every 2xx.
  const ops = Math.max(1, r.steps[steps[0]!.name]?.count ?? r.ok)
  const rd = redis ? await redisFigures(redis, ops, r.cpuUs.redis ?? NaN) : undefined
  const cpu = r.cpuUs.server ?? NaN
  console.log(`${Math.round(r.rps).toLocaleString('en-US')} req/s`)
  return {
    id,
    label: LABELS[id],
    ok: true,
    op,
    rps: r.rps,
    opsPerSec: ops / r.wallS,
    ops,
    latency: r.latency,
    stepLatency: r.steps,
    autocannonLatency: r.autocannon,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes: r.statusCodes,
    cpuUsPerOp: cpu / ops,
    cpuUsPerReq: cpu / Math.max(1, r.ok),
    serverCpuPct: (cpu / 1e6 / r.wallS) * 100,
    clientCpuPct: r.clientCpuPct,
    otherCpuPct: r.otherCpuPct,
    ...(rd ? { redis: { ...rd, perOp: { usecLow: rd.usecPerReqLow, usecHigh: rd.usecPerReqHigh, cpuUs: rd.cpuUsPerReq } } } : {}),
    wallS: r.wallS,
  }
}

const authorizeStep = (c: LegContext, headers: Record<string, string>): Step => ({
  name: 'authorize',
  method: 'POST',
  path: '/v1/budgets/authorize',
  headers,
  body: c.authorizeBody,
})

// (2) The ceiling: uWS hello world, same request as everyone else.
async function helloLeg(c: LegContext): Promise<LegResult[]> {
  const port = await freePort()
  const server = spawnTs('hello', 'bench/servers/hello.ts', { PORT: String(port) })
  await waitForLine(server, 'READY')
  return [await measure(c, 'hello', `http://127.0.0.1:${port}`, [authorizeStep(c, JSON_HEADERS)], server, undefined, 'request')]
}

// (3) The peer: Fastify + rate-limiter-flexible, on its own Redis.
async function peerLeg(c: LegContext): Promise<LegResult[]> {
  const redis = await startBenchRedis(path.join(c.tmp, 'redis-peer'))
  c.redisVersion = redis.version
  try {
    const port = await freePort()
    const server = spawnTs('peer', 'bench/servers/peer.ts', { PORT: String(port), REDIS_URL: redis.url })
    await waitForLine(server, 'READY')
    const url = `http://127.0.0.1:${port}`
    return [await measure(c, 'peer', url, [authorizeStep(c, JSON_HEADERS)], server, redis, 'authorize')]
  } finally {
    await stopAll()
    await redis.stop()
  }
}

const GATEWAY_ENTRY = 'src/bin/gateway.ts'

/** The gateway's entry in another checkout (`B_ROOT`): older ones started from src/main.ts. */
function gatewayEntryOf(root: string): string {
  const entry = path.join(root, GATEWAY_ENTRY)
  return existsSync(entry) ? entry : path.join(root, 'src/main.ts')
}

// (1) Ours: one gateway + Redis for both of its legs. The pair leg runs first:
// the authorize-only leg leaves open holds behind (they expire after the
// budget's default TTL), which must not weigh on another leg.
async function oursLegs(
  c: LegContext,
  ids: readonly LegId[],
  extraEnv: Record<string, string> = {},
  root = process.env.A_ROOT,
  fsync: Fsync = 'everysec',
): Promise<LegResult[]> {
  if (!existsSync(GATEWAY_ENTRY)) throw new Error(`${GATEWAY_ENTRY} not found`)
  const redis = await startBenchRedis(path.join(c.tmp, 'redis-ours'), fsync)
  c.redisVersion = redis.version
  try {
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const rootKey = randomBytes(24).toString('hex')
    const server = spawnTs('gateway', root ? gatewayEntryOf(root) : GATEWAY_ENTRY, {
      ...extraEnv,
      PORT: String(port),
      REDIS_URL: redis.url,
      METERING_ROOT_KEY: rootKey,
      METERING_DATA_DIR: path.join(c.tmp, 'gateway'),
      LOG_LEVEL: 'warn',
      // The budget hot path alone: no ingest worker polling the same Redis.
      METERING_INGEST_WORKER: '0',
    })
    await waitForHttp200(server, `${url}/healthz`)
    const apiKey = await setUpBudgets(url, rootKey, c.opts.budgets)
    const headers = { ...JSON_HEADERS, authorization: `Bearer ${apiKey}` }
    const authorize = authorizeStep(c, headers)

    const results: LegResult[] = []
    if (ids.includes('ours-pair')) {
      const pair: Step[] = [
        {
          ...authorize,
          // A regex rather than JSON.parse: cheaper for the load generator,
          // which shares the machine with the server.
          onResponse: (status, body, ctx) => {
            ctx.holdId = status === 200 ? /"holdId":"([^"]+)"/.exec(body)?.[1] : undefined
          },
        },
        {
          name: 'settle',
          method: 'POST',
          path: '/v1/budgets/settle',
          headers,
          // No holdId (authorize failed): null makes autocannon start over with an authorize.
          body: (ctx) => (typeof ctx.holdId === 'string' ? `{"key":"${ctx.key as string}","holdId":"${ctx.holdId}","amount":"${SETTLE_AMOUNT}"}` : null),
        },
      ]
      results.push(await measure(c, 'ours-pair', url, pair, server, redis, 'authorize+settle'))
    }
    for (const id of ['ours-authorize', 'ours-always', 'ours-b'] as const) {
      if (ids.includes(id)) results.push(await measure(c, id, url, [authorize], server, redis, 'authorize'))
    }
    return results
  } finally {
    await stopAll()
    await redis.stop()
  }
}

/** Creates a project and `n` budgets (bench-0 … bench-<n-1>) with three hard limits; returns the API key. */
async function setUpBudgets(base: string, rootKey: string, n: number): Promise<string> {
  const post = async (p: string, key: string, body: unknown): Promise<unknown> => {
    const res = await fetch(base + p, {
      method: 'POST',
      headers: { ...JSON_HEADERS, authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`POST ${p} → ${res.status}: ${text.slice(0, 300)}`)
    return text ? JSON.parse(text) : {}
  }
  const project = (await post('/v1/projects/create', rootKey, { name: 'bench' })) as { apiKey?: string }
  if (!project.apiKey) throw new Error(`/v1/projects/create returned no apiKey: ${JSON.stringify(project)}`)
  const limits = ['hour', 'day', 'month'].map((w) => ({ id: w, window: w, enforce: 'hard', amount: LIMIT }))
  for (let i = 0; i < n; i++) {
    await post('/v1/budgets/upsert', project.apiKey, {
      key: `bench-${i}`,
      limits,
      holds: { defaultTtlMs: 60_000, maxTtlMs: 3_600_000 },
    })
  }
  // One authorize + settle by hand: a contract mismatch fails here with a
  // readable message instead of as a leg full of 4xx.
  const probe = (await post('/v1/budgets/authorize', project.apiKey, {
    key: 'bench-0',
    amount: AMOUNT,
    idempotencyKey: `probe-${randomBytes(6).toString('hex')}`,
  })) as { allowed?: boolean; holdId?: string }
  if (!probe.allowed || !probe.holdId) throw new Error(`probe authorize not allowed: ${JSON.stringify(probe)}`)
  await post('/v1/budgets/settle', project.apiKey, { key: 'bench-0', holdId: probe.holdId, amount: SETTLE_AMOUNT })
  return project.apiKey
}

/**
 * With several rounds, each leg reports its median round (by ops/s) as a
 * whole: medians taken figure by figure would make a set no run produced.
 * Every round's throughput, p99 and background CPU stay in `rounds`.
 */
function medianRounds(rounds: LegResult[][]): LegResult[] {
  if (rounds.length === 1) return rounds[0] ?? []
  const ids = [...new Set(rounds.flat().map((l) => l.id))]
  return ids.map((id) => {
    const all = rounds.map((r) => r.find((l) => l.id === id)).filter((l): l is LegResult => l !== undefined)
    const ok = all.filter((l) => l.ok).sort((a, b) => (a.opsPerSec ?? 0) - (b.opsPerSec ?? 0))
    const pick = ok[Math.floor((ok.length - 1) / 2)] ?? all[all.length - 1]!
    const summary = all.map((l) => ({
      ok: l.ok,
      opsPerSec: l.opsPerSec ?? null,
      p99: l.latency?.p99 ?? null,
      cpuUsPerOp: l.cpuUsPerOp ?? null,
      scriptUsPerOp: l.redis?.perOp.usecLow ?? null,
      otherCpuPct: l.otherCpuPct ?? null,
    }))
    return { ...pick, rounds: summary }
  })
}

/** Ratios and the (informational) targets. */
function compare(legs: LegResult[], opts: BenchOptions): Pick<Report, 'ratios' | 'targets'> {
  const get = (id: LegId): LegResult | undefined => legs.find((l) => l.id === id && l.ok)
  const hello = get('hello')
  const peer = get('peer')
  // The targets are about authorize: the authorize-only leg, else the pair leg.
  const ours = get('ours-authorize') ?? get('ours-pair')
  const note = ours?.id === 'ours-pair' ? '(from the authorize+settle leg)' : undefined
  const diff = (a?: number, b?: number): number | null => (a === undefined || b === undefined ? null : a - b)
  const div = (a?: number, b?: number): number | null =>
    a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : a / b

  const ratios = {
    'ours/hello authorize req/s': div(ours?.opsPerSec, hello?.opsPerSec),
    'ours/peer authorize req/s': div(ours?.opsPerSec, peer?.opsPerSec),
    'ours/hello CPU µs per request': div(ours?.cpuUsPerReq, hello?.cpuUsPerReq),
    'peer/hello req/s': div(peer?.opsPerSec, hello?.opsPerSec),
    'peer/hello CPU µs per request': div(peer?.cpuUsPerReq, hello?.cpuUsPerReq),
    // What fsync before every reply costs: the same gateway, its Redis at appendfsync always vs everysec.
    'fsync always/everysec req/s': div(get('ours-always')?.opsPerSec, get('ours-authorize')?.opsPerSec),
    'fsync always−everysec p99 ms': diff(get('ours-always')?.latency?.p99, get('ours-authorize')?.latency?.p99),
  }
  const t = (name: string, value: number | null, limit: string, ok: (v: number) => boolean, extra?: string): Target => {
    const n = [note, extra].filter(Boolean).join(' ')
    return { name, value, limit, pass: value === null ? null : ok(value), ...(n ? { note: n } : {}) }
  }
  const targets: Target[] = [
    t('authorize req/s vs hello-world', ratios['ours/hello authorize req/s'], '≥ 0.65×', (v) => v >= 0.65),
    t('authorize req/s vs peer', ratios['ours/peer authorize req/s'], '≥ 1.5×', (v) => v >= 1.5),
    t('gateway CPU per authorize vs hello-world', ratios['ours/hello CPU µs per request'], '≤ 1.5×', (v) => v <= 1.5),
    // Conservative end of the commandstats range (see RedisFigures).
    t('Redis µs per authorize (commandstats)', ours?.redis?.perOp.usecLow ?? null, '≤ 20 µs', (v) => v <= 20),
    t(
      `authorize p99 at ${opts.connections} connections (ms)`,
      ours?.latency?.p99 ?? null,
      '≤ 5 ms',
      (v) => v <= 5,
      opts.connections === 64 ? undefined : '(the target is stated at 64 connections)',
    ),
  ]
  return { ratios, targets }
}
