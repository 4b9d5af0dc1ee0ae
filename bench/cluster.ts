// Scenario "cluster": N gateways and M workers against Redis Clusters of 1, 2 and 3 masters
// (issue 11, "Scale beyond one machine").
//
// Per cluster size, a fresh cluster (bench/lib/clusterRedis.ts: every master with the authorize
// bench's AOF everysec), N gateway processes that run the hot path only and M worker processes
// (src/bin/worker.ts: ingest, journal, sweeps) sharing one clickhouse-server child:
//   1. authorize load spread over the gateways (autocannon's connections round robin over their
//      URLs), on BUDGETS budgets per master with three hard limits (hour, day, month); one budget
//      in 8 has limits a few seconds of load pass, so some answers are 402 and the limit check
//      below has something to catch;
//   2. every budget read back through the gateways: consumed + held ≤ amount on every hard limit;
//   3. usage: events recorded through all gateways, each request sent twice at once through two
//      gateways, into one project per master; the workers drain them and ClickHouse must hold each
//      event exactly once (rows, distinct ids, and usage_daily's count of every insert).
// Printed per size: authorize/s in total and per master, p50/p99, CPU µs per authorize of the
// gateways and of each master, each master's busy %, and the machine's: on a small machine
// the load is CPU-bound long before a master is, so the per-master CPU per authorize is the
// figure to extrapolate from.

import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { printClusterReport, type ClusterLeg, type MasterFigures } from './lib/clusterReport.js'
import { startBenchCluster, type BenchCluster } from './lib/clusterRedis.js'
import { AMOUNT, checkBudgets, setUpBudgets, startRig, type Budgets, type Rig } from './lib/clusterRig.js'
import { usageLeg } from './lib/clusterUsage.js'
import { runLoad, type LoadOptions, type Step } from './lib/load.js'
import type { BenchOptions } from './lib/options.js'
import { clockTicks, stopAll } from './lib/proc.js'
import { redisFigures, redisReset } from './lib/redis.js'
import { machineInfo, writeReport, type Report, type Target } from './lib/report.js'

const RESULTS_DIR = path.resolve('bench/results')

export interface ClusterOptions extends BenchOptions {
  masters: number[]
  gateways: number
  workers: number
}

function clusterOptions(o: BenchOptions, env = process.env): ClusterOptions {
  const pos = (v: string | undefined, d: number, name: string): number => {
    const n = v === undefined || v === '' ? d : Number(v)
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer (got ${v})`)
    return n
  }
  const masters = (env.MASTERS ?? '1,2,3').split(',').map((m) => pos(m.trim(), 0, 'MASTERS / --masters'))
  return { ...o, masters, gateways: pos(env.GATEWAYS, 2, 'GATEWAYS / --gateways'), workers: pos(env.WORKERS, 2, 'WORKERS / --workers') }
}

export async function runCluster(base: BenchOptions): Promise<void> {
  const opts = clusterOptions(base)
  if (opts.rounds > 1) console.warn('warning: -r/--rounds is not used by the cluster scenario (one round per cluster size)')
  const timestamp = new Date().toISOString()
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'metering-bench-cluster-'))
  const machine: Record<string, unknown> = machineInfo({ clkTck: clockTicks() })
  console.log(
    `cluster bench: ${machine.cpus} CPUs, node ${machine.node}; masters ${opts.masters.join(', ')}; ${opts.gateways} gateways, ${opts.workers} workers; ` +
      `${opts.budgets} budgets per master`,
  )
  const legs: ClusterLeg[] = []
  let ch: { url: string; pid: number; stop(): Promise<void> } | undefined
  try {
    const { startClickHouseServer } = await import('../test/support/clickhouse.js')
    ch = await startClickHouseServer({ dataDir: path.join(tmp, 'clickhouse-server') })
    for (const m of opts.masters) legs.push(await guarded(m, () => clusterLeg(opts, m, ch!, tmp)))
  } finally {
    await stopAll()
    await ch?.stop().catch(() => {})
    rmSync(tmp, { recursive: true, force: true })
  }
  const report: Report = { scenario: 'cluster', timestamp, options: { ...opts }, machine, legs, ...compare(legs) }
  printClusterReport(report, legs)
  const files = writeReport(RESULTS_DIR, 'cluster', report)
  const rel = (p: string): string => path.relative(process.cwd(), p)
  console.log(`\nwrote ${rel(files.json)} and ${rel(files.svg)} (copied to cluster-latest.*)`)
}

const label = (m: number): string => `${m} master${m === 1 ? '' : 's'}`

async function guarded(m: number, fn: () => Promise<ClusterLeg>): Promise<ClusterLeg> {
  try {
    return await fn()
  } catch (err) {
    const msg = (err as Error).message
    console.log(`\n  ${label(m)} FAILED: ${msg}`)
    return { id: `masters-${m}`, label: label(m), ok: false, error: msg.split('\n')[0] ?? msg, masters: m } as ClusterLeg
  }
}

async function clusterLeg(opts: ClusterOptions, m: number, ch: { url: string; pid: number }, tmp: string): Promise<ClusterLeg> {
  const dir = path.join(tmp, `m${m}`)
  process.stdout.write(`  ${label(m)}: starting the cluster, ${opts.gateways} gateways, ${opts.workers} workers… `)
  const cluster = await startBenchCluster(path.join(dir, 'redis'), m)
  try {
    const rig = await startRig(cluster, ch.url, `bench_cluster_${m}`, dir, opts.gateways, opts.workers)
    const budgets = await setUpBudgets(rig, cluster, opts.budgets)
    const leg = await authorizeLoad(opts, m, rig, cluster, budgets, ch.pid)
    process.stdout.write('reading every budget back… ')
    leg.budgetCheck = await checkBudgets(rig, budgets)
    process.stdout.write('usage leg… ')
    leg.usage = await usageLeg(rig, cluster, ch.url, `bench_cluster_${m}`)
    console.log(leg.usage.exactlyOnce ? 'exactly once' : 'NOT exactly once')
    return leg
  } finally {
    await stopAll()
    await cluster.stop()
  }
}

/** Bodies with a random budget (counted per master) and a unique idempotency key. */
function authorizeBodies(byMaster: string[][]): { body: (c: Record<string, unknown>) => string; sent: number[] } {
  const flat = byMaster.flatMap((keys, master) => keys.map((key) => ({ key, master })))
  const sent = byMaster.map(() => 0)
  const run = Math.random().toString(36).slice(2, 8)
  let seq = 0
  return {
    sent,
    body: () => {
      const b = flat[(Math.random() * flat.length) | 0]!
      sent[b.master]!++
      return `{"key":"${b.key}","amount":"${AMOUNT}","idempotencyKey":"${run}-${++seq}"}`
    },
  }
}

/**
 * runLoad against all the gateways at once: load.ts hands `url` to autocannon as it is, and
 * autocannon takes a list of URLs and gives them the connections round robin.
 */
function loadOver(urls: string[], o: Omit<LoadOptions, 'url'>): ReturnType<typeof runLoad> {
  return runLoad({ ...o, url: urls as unknown as string })
}

async function authorizeLoad(opts: ClusterOptions, m: number, rig: Rig, cluster: BenchCluster, b: Budgets, chPid: number): Promise<ClusterLeg> {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${b.apiKey}` }
  const warm = authorizeBodies(b.byMaster)
  const step = (body: (c: Record<string, unknown>) => string): Step => ({ name: 'authorize', method: 'POST', path: '/v1/budgets/authorize', headers, body })
  const base = { connections: opts.connections, pipelining: opts.pipelining }
  process.stdout.write(`warm-up ${opts.warmupS}s… `)
  if (opts.warmupS > 0) await loadOver(rig.urls, { ...base, durationS: opts.warmupS, steps: [step(warm.body)] })
  process.stdout.write(`measuring ${opts.durationS}s… `)
  await Promise.all(cluster.masters.map(redisReset))
  const bodies = authorizeBodies(b.byMaster)
  const pids: Record<string, number> = {
    clickhouse: chPid,
    ...Object.fromEntries(rig.gateways.map((g, i) => [`gateway-${i}`, g.pid])),
    ...Object.fromEntries(rig.workers.map((w, i) => [`worker-${i}`, w.pid])),
    ...Object.fromEntries(cluster.masters.map((x, i) => [`master-${i}`, x.pid])),
  }
  const r = await loadOver(rig.urls, { ...base, durationS: opts.durationS, steps: [step(bodies.body)], cpuPids: pids })
  const denied = r.statusCodes['402'] ?? 0
  const ops = Math.max(1, r.ok + denied)
  const sum = (prefix: string): number => Object.entries(r.cpuUs).reduce((s, [k, v]) => (k.startsWith(prefix) ? s + v : s), 0)
  const gatewayUs = sum('gateway-')
  const sentTotal = Math.max(
    1,
    bodies.sent.reduce((s, v) => s + v, 0),
  )
  const perMaster: MasterFigures[] = await Promise.all(
    cluster.masters.map(async (x, i) => {
      const share = ops * (bodies.sent[i]! / sentTotal)
      const cpuUs = r.cpuUs[`master-${i}`] ?? NaN
      const rd = await redisFigures(x, Math.max(1, share), cpuUs)
      return {
        port: x.port,
        slots: x.slots,
        opsPerSec: share / r.wallS,
        cpuUsPerOp: rd.cpuUsPerReq,
        commandUsPerOp: rd.usecPerReqLow,
        busyPct: (cpuUs / 1e6 / r.wallS) * 100,
      }
    }),
  )
  const accounted = Object.values(r.cpuUs).reduce((s, v) => s + (Number.isFinite(v) ? v : 0), 0)
  console.log(`${Math.round(ops / r.wallS).toLocaleString('en-US')} authorize/s (${denied} denied)`)
  return {
    id: `masters-${m}`,
    label: label(m),
    ok: true,
    op: 'authorize (200 or 402)',
    masters: m,
    gateways: rig.gateways.length,
    workers: rig.workers.length,
    rps: r.rps,
    opsPerSec: ops / r.wallS,
    ops,
    denied,
    latency: r.latency,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes: r.statusCodes,
    cpuUsPerOp: gatewayUs / ops,
    cpuUsPerReq: gatewayUs / ops,
    serverCpuPct: (gatewayUs / 1e6 / r.wallS) * 100,
    workerCpuPct: (sum('worker-') / 1e6 / r.wallS) * 100,
    clickhouseCpuPct: ((r.cpuUs.clickhouse ?? 0) / 1e6 / r.wallS) * 100,
    clientCpuPct: r.clientCpuPct,
    otherCpuPct: r.otherCpuPct,
    machineBusyPct: (accounted / 1e6 / r.wallS) * 100 + r.clientCpuPct + r.otherCpuPct,
    perMaster,
    wallS: r.wallS,
  }
}

/** Scaling ratios and the (informational) targets. */
function compare(legs: ClusterLeg[]): Pick<Report, 'ratios' | 'targets'> {
  const ok = legs.filter((l) => l.ok).sort((a, b) => a.masters - b.masters)
  const one = ok[0]
  const most = ok[ok.length - 1]
  const ratios: Record<string, number | null> = {}
  for (const l of ok) ratios[`authorize/s ${l.label} / ${one!.label}`] = (l.opsPerSec ?? 0) / (one!.opsPerSec ?? 1)
  for (const l of ok) {
    const us = Math.max(...(l.perMaster ?? []).map((p) => p.cpuUsPerOp))
    ratios[`${l.label}: authorize/s one master carries at 100% of a core`] = Number.isFinite(us) && us > 0 ? 1e6 / us : null
  }
  const t = (name: string, value: number | null | undefined, limit: string, pass: (v: number) => boolean, note?: string): Target => {
    const v = value === undefined || value === null || !Number.isFinite(value) ? null : value
    return { name, value: v, limit, pass: v === null ? null : pass(v), ...(note ? { note } : {}) }
  }
  const busiest = Math.max(...ok.flatMap((l) => (l.perMaster ?? []).map((p) => p.busyPct)))
  const violations = ok.reduce((s, l) => s + (l.budgetCheck?.violations.length ?? 0), 0)
  const notOnce = ok.filter((l) => !l.usage?.exactlyOnce).length
  const targets: Target[] = [
    t(
      `authorize/s grows with masters (${most?.label} / ${one?.label})`,
      ok.length > 1 ? (most!.opsPerSec ?? 0) / (one!.opsPerSec ?? 1) : null,
      '> 1.0×',
      (v) => v > 1,
      `machine ${Math.round(most?.machineBusyPct ?? 0)}% busy of ${os.cpus().length * 100}%: CPU-bound here; see the per-master CPU`,
    ),
    t('busiest master, % of one core', busiest, '< 100%', (v) => v < 100, 'a master is not the bottleneck'),
    t(
      'hard limits passed (consumed + held > amount)',
      ok.length ? violations : null,
      '= 0',
      (v) => v === 0,
      `${ok.reduce((s, l) => s + (l.budgetCheck?.hardLimits ?? 0), 0)} hard limits read back`,
    ),
    t('cluster sizes where ingestion was not exactly once', ok.length ? notOnce : null, '= 0', (v) => v === 0),
  ]
  return { ratios, targets }
}
