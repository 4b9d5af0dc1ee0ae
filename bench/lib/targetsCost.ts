// Cost model of the `targets` scenario: from the per-op CPU figures of one run, the core-seconds
// and the price of 1M authorizes and of 1B usage events on a many-core host. Pure (unit-tested in
// test/unit/bench.targets.test.ts). Estimates, not money: plain numbers, printed rounded.
//
//   CPU µs/op   = Σ over the processes on the op's path (gateway, Redis, worker, ClickHouse)
//   core-s      = N × CPU µs/op / 1e6                       (N = 1e6 authorizes or 1e9 events)
//   core-h      = core-s / 3600 / utilization               (cores are provisioned to run at `utilization`)
//   USD         = core-h × coreHourUsd
//   ops/s/core  = utilization × 1e6 / CPU µs/op             (what one provisioned core sustains)

import type { IngestLeg, IngestReport } from './ingestReport.js'
import type { Report } from './report.js'
import { grid } from './targetsTable.js'

export interface CostOptions {
  /** Price of one core for one hour (CORE_HOUR_USD; default 0.04 ≈ an on-demand cloud vCPU). */
  coreHourUsd: number
  /** Share of each core the host is run at (CORE_UTILIZATION; default 0.7: 30% headroom). */
  utilization: number
}

export const DEFAULT_COST: CostOptions = { coreHourUsd: 0.04, utilization: 0.7 }

export const PROCESSES = ['gateway', 'redis', 'worker', 'clickhouse'] as const
export type Process = (typeof PROCESSES)[number]

export interface CostRow {
  id: string
  /** What N counts, e.g. "1M authorizes". */
  per: string
  n: number
  /** The leg the CPU figures come from. */
  from: string
  /** CPU µs per op of each process on the path (absent: not on the path; null: no figure). */
  cpuUs: Partial<Record<Process, number | null>>
  totalUs: number | null
  coreSeconds: number | null
  coreHours: number | null
  usd: number | null
  opsPerCorePerSec: number | null
}

export function costOptions(env: NodeJS.ProcessEnv = process.env): CostOptions {
  const read = (name: string, d: number, ok: (v: number) => boolean): number => {
    const raw = env[name]
    if (raw === undefined || raw === '') return d
    const v = Number(raw)
    if (!Number.isFinite(v) || !ok(v)) throw new Error(`bad value for ${name}: ${raw}`)
    return v
  }
  return {
    coreHourUsd: read('CORE_HOUR_USD', DEFAULT_COST.coreHourUsd, (v) => v >= 0),
    utilization: read('CORE_UTILIZATION', DEFAULT_COST.utilization, (v) => v > 0 && v <= 1),
  }
}

const fin = (v: number | null | undefined): number | null => (v === undefined || v === null || !Number.isFinite(v) ? null : v)

/** The arithmetic of the model for N ops of `cpuUs` CPU µs each. */
export function cost(n: number, cpuUs: number | null, o: CostOptions): Pick<CostRow, 'coreSeconds' | 'coreHours' | 'usd' | 'opsPerCorePerSec'> {
  if (cpuUs === null || cpuUs <= 0) return { coreSeconds: null, coreHours: null, usd: null, opsPerCorePerSec: null }
  const coreSeconds = (n * cpuUs) / 1e6
  const coreHours = coreSeconds / 3600 / o.utilization
  return { coreSeconds, coreHours, usd: coreHours * o.coreHourUsd, opsPerCorePerSec: (o.utilization * 1e6) / cpuUs }
}

function costRow(id: string, per: string, n: number, from: string, cpuUs: CostRow['cpuUs'], o: CostOptions): CostRow {
  const parts = Object.values(cpuUs)
  // A missing process figure makes the total unknown rather than too small.
  const totalUs = parts.length && parts.every((v) => v !== null && v !== undefined) ? parts.reduce<number>((s, v) => s + (v ?? 0), 0) : null
  return { id, per, n, from, cpuUs, totalUs, ...cost(n, totalUs, o) }
}

/**
 * CPU µs per event of each process in an ingest leg, from its % of a core over the load window:
 * gateway and Redis per accepted event, worker and ClickHouse per event stored during the window
 * (what they actually finished in it; the accepted count when there is no such figure).
 */
export function perEventCpuUs(leg: IngestLeg): Record<Process, number | null> {
  const accepted = fin(leg.eventsPerSec)
  const stored = fin(leg.drain?.storedDuringLoadPerSec) || accepted
  const per = (p: Process, rate: number | null): number | null => {
    const pct = fin(leg.cpuPct?.[p])
    return pct === null || !rate ? null : ((pct / 100) * 1e6) / rate
  }
  return { gateway: per('gateway', accepted), redis: per('redis', accepted), worker: per('worker', stored), clickhouse: per('clickhouse', stored) }
}

/** One row per authorize leg (gateway + Redis process CPU) and per ingest leg (all four processes). */
export function costModel(auth: Report | undefined, ingest: IngestReport | undefined, o: CostOptions): CostRow[] {
  const rows: CostRow[] = []
  for (const [legId, id] of [
    ['ours-authorize', 'authorize'],
    ['ours-always', 'authorize, fsync always'],
  ] as const) {
    const l = auth?.legs.find((x) => x.id === legId && x.ok)
    const cpuUs = { gateway: fin(l?.cpuUsPerReq), redis: fin(l?.redis?.perOp.cpuUs) }
    rows.push(costRow(id, '1M authorizes', 1e6, legId, cpuUs, o))
  }
  for (const [legId, id] of [
    ['batch', 'event via /record-batch'],
    ['batch-always', 'event via /record-batch, fsync always'],
    ['single', 'event via /record'],
    ['single-always', 'event via /record, fsync always'],
  ] as const) {
    const l = ingest?.legs.find((x) => x.id === legId && x.ok)
    const cpuUs = l ? perEventCpuUs(l) : { gateway: null, redis: null, worker: null, clickhouse: null }
    rows.push(costRow(id, '1B events', 1e9, legId, cpuUs, o))
  }
  return rows
}

/** Dollars rounded for reading: cents from $1 up, else 3 significant digits. */
export function usd(v: number | null): string {
  if (v === null) return '—'
  if (v >= 1) return `$${v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`
  return `$${Number(v.toPrecision(3))}`
}

const us = (v: number | null | undefined): string => (v === undefined ? '' : v === null ? '—' : v.toFixed(1))
const round = (v: number | null, digits = 0): string =>
  v === null ? '—' : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

export function formatCost(rows: CostRow[], o: CostOptions): string {
  const lines: string[][] = [['op', 'gateway µs', 'Redis µs', 'worker µs', 'CH µs', 'total µs', 'per', 'core-s', 'USD', 'ops/s per core']]
  for (const r of rows) {
    const c = r.cpuUs
    const coreS = r.coreSeconds
    lines.push([
      r.id,
      us(c.gateway),
      us(c.redis),
      us(c.worker),
      us(c.clickhouse),
      us(r.totalUs),
      r.per,
      round(coreS, coreS !== null && coreS < 100 ? 1 : 0),
      usd(r.usd),
      round(r.opsPerCorePerSec),
    ])
  }
  const head =
    `cost model: CPU µs per op of this run × N; cores run at ${Math.round(o.utilization * 100)}% (CORE_UTILIZATION), ` +
    `$${o.coreHourUsd} per core-hour (CORE_HOUR_USD, ≈ an on-demand cloud vCPU)`
  const foot =
    '  USD = N × total µs / 1e6 / 3600 / utilization × CORE_HOUR_USD; ops/s per core = utilization × 1e6 / total µs.\n' +
    '  Linear in cores (each process on cores of its own, Redis one core per master); load generator not counted.'
  return [head, grid(lines, [0, 6]), foot].join('\n')
}
