// Console output of the cluster bench (bench/cluster.ts); the JSON and SVG go through report.ts.

import type { BudgetCheck } from './clusterRig.js'
import type { UsageFigures } from './clusterUsage.js'
import { f, int, table, type LegResult, type Report } from './report.js'

export interface MasterFigures {
  port: number
  slots: [number, number]
  /** Authorizes on this master's budgets per second (the load's share of its keys). */
  opsPerSec: number
  /** redis-server CPU (commands, parsing, network, AOF) per authorize on it. */
  cpuUsPerOp: number
  /** INFO commandstats time (FCALL and the rest) per authorize on it. */
  commandUsPerOp: number
  /** Its CPU over the run, % of one core. */
  busyPct: number
}

export interface ClusterLeg extends LegResult {
  masters: number
  gateways?: number
  workers?: number
  /** 402 answers (tight budgets full). */
  denied?: number
  workerCpuPct?: number
  clickhouseCpuPct?: number
  /** Everything busy on the machine during the run, % of one core. */
  machineBusyPct?: number
  perMaster?: MasterFigures[]
  budgetCheck?: BudgetCheck
  usage?: UsageFigures
}

function printMasters(legs: ClusterLeg[]): void {
  const rows: string[][] = [['cluster', 'master', 'slots', 'authorize/s', 'CPU µs/op', 'cmd µs/op', 'busy %', 'ceiling/s at 100%']]
  for (const l of legs) {
    for (const [i, p] of (l.perMaster ?? []).entries()) {
      rows.push([
        l.label,
        `#${i} :${p.port}`,
        `${p.slots[0]}-${p.slots[1]}`,
        int(p.opsPerSec),
        f(p.cpuUsPerOp),
        f(p.commandUsPerOp),
        f(p.busyPct, 0),
        int(1e6 / p.cpuUsPerOp),
      ])
    }
  }
  console.log('\nper master:')
  console.log(table(rows))
}

/** Exactly once; or not all stored by the deadline while jobs still wait for a retry (late, not lost); or wrong. */
function verdict(u: UsageFigures, off: UsageFigures['stored']): string {
  if (u.exactlyOnce) return 'EXACTLY ONCE'
  const queued = (u.queue.waiting ?? 0) + (u.queue.active ?? 0) + (u.queue.delayed ?? 0)
  const why = queued > 0 ? `not all stored by the deadline, ${queued} ingest jobs still queued (retry backoff)` : 'NOT exactly once'
  return `${why}: ${JSON.stringify(off)}; queues ${JSON.stringify(u.queue)}`
}

function printChecks(legs: ClusterLeg[]): void {
  console.log('\nafter the load:')
  for (const l of legs) {
    const c = l.budgetCheck
    if (c) {
      const verdict = c.violations.length === 0 ? 'none passed' : `${c.violations.length} PASSED: ${c.violations.slice(0, 3).join('; ')}`
      console.log(
        `  ${l.label}: ${c.budgets} budgets, ${c.hardLimits} hard limits read back through the gateways: ${verdict} (${c.tightFull} tight budgets full)`,
      )
    }
    const u = l.usage
    if (u) {
      const off = u.stored.filter((s) => s.rows !== s.expected || s.distinct !== s.expected || s.inserted !== s.expected || s.missingIds > 0)
      console.log(
        `  ${l.label}: usage: ${int(u.events)} events in ${u.projects} project${u.projects === 1 ? '' : 's'} (one per master), every request sent twice through two gateways ` +
          `(${int(u.requests)} answers, ${u.refused} refused, ${u.non200} not 200); ${int(u.acceptedPerSec)} events/s accepted; all in ClickHouse ` +
          `${f(u.drainedS)} s after the first request; ${verdict(u, off)}`,
      )
    }
  }
}

export function printClusterReport(r: Report, legs: ClusterLeg[]): void {
  const o = r.options
  console.log(
    `\n== cluster: ${o.durationS}s per size (+${o.warmupS}s warm-up), ${o.connections} connections over ${o.gateways} gateways, ${o.workers} workers ==`,
  )
  const rows: string[][] = [
    [
      'cluster',
      'authorize/s',
      'per master',
      '402/s',
      'p50 ms',
      'p99 ms',
      'gw CPU µs/op',
      'gw CPU%',
      'workers CPU%',
      'client CPU%',
      'other CPU%',
      'machine busy%',
      'err',
    ],
  ]
  for (const l of legs) {
    if (!l.ok) {
      rows.push([l.label, 'FAILED', ...Array<string>(11).fill('')])
      continue
    }
    const wall = l.wallS ?? 1
    rows.push([
      l.label,
      int(l.opsPerSec),
      int((l.opsPerSec ?? 0) / l.masters),
      int((l.denied ?? 0) / wall),
      f(l.latency?.p50, 2),
      f(l.latency?.p99, 2),
      f(l.cpuUsPerOp),
      f(l.serverCpuPct, 0),
      f(l.workerCpuPct, 0),
      f(l.clientCpuPct, 0),
      f(l.otherCpuPct, 0),
      f(l.machineBusyPct, 0),
      String((l.errors ?? 0) + (l.timeouts ?? 0)),
    ])
  }
  console.log(table(rows))
  console.log(
    '  authorize = an answered authorize (200, or 402 on the tight budgets); p50/p99 of the 200s. CPU from /proc (utime+stime);\n' +
      `  % are of one core; this machine has ${r.machine.cpus} cores. machine busy = every process (ours, the load generator, others).`,
  )
  for (const l of legs) if (!l.ok) console.log(`  ! ${l.label}: ${l.error}`)
  printMasters(legs.filter((l) => l.ok))
  console.log(
    '  per master: its share of the authorizes (by the budget keys the load picked), redis-server CPU and commandstats time per\n' +
      '  authorize on it, busy % of one core; "ceiling" = 1e6 / CPU µs per op: what one master carries at a full core, so m masters ≈ m×.',
  )
  printChecks(legs.filter((l) => l.ok))
  console.log('\nratios:')
  for (const [k, v] of Object.entries(r.ratios)) console.log(`  ${k.padEnd(52)} ${v === null ? '—' : v.toFixed(2)}`)
  console.log('\ntargets (informational):')
  for (const t of r.targets) {
    const mark = t.pass === null ? 'N/A ' : t.pass ? 'PASS' : 'MISS'
    console.log(`  [${mark}] ${t.name.padEnd(52)} ${t.value === null ? '—' : t.value.toFixed(2)} (${t.limit})${t.note ? `  ${t.note}` : ''}`)
  }
}
