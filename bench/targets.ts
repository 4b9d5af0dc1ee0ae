// Scenario "targets": every target of issue 11 with PASS/MISS, from one run.
//
// Runs the authorize scenario (legs hello, peer, ours-authorize, ours-always; -r rounds, each leg
// its median round) and then the ingest scenario three times (the ceilings ch-insert and
// ch-insert-once; single, batch and drain; single-always and batch-always), each printing and
// saving its own report as usual, then
// prints one block: the targets at appendfsync everysec and again at always (fsync before the
// reply), and the cost model from the per-op CPU figures of the same run. Everything goes into
// bench/results/targets-<timestamp>.json (+ targets-latest.json).

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { IngestReport } from './lib/ingestReport.js'
import type { BenchOptions } from './lib/options.js'
import { clockTicks } from './lib/proc.js'
import { machineInfo, type Report } from './lib/report.js'
import { costModel, costOptions, formatCost, type CostOptions, type CostRow } from './lib/targetsCost.js'
import { formatTargets, mergeIngest, targetRows, type TargetRow } from './lib/targetsTable.js'

const RESULTS_DIR = path.resolve('bench/results')

export const TARGET_AUTHORIZE_LEGS = ['hello', 'peer', 'ours-authorize', 'ours-always']
/**
 * The ingest legs, as three runs of the ingest scenario (each with its own Redis and clickhouse-server):
 * a failure that stops one (say the gateway's probe event never reaching ClickHouse) leaves the others' figures.
 */
export const TARGET_INGEST_PARTS = [
  ['ch-insert', 'ch-insert-once'],
  ['single', 'batch', 'drain'],
  ['single-always', 'batch-always'],
]
export const TARGET_INGEST_LEGS = TARGET_INGEST_PARTS.flat()

export interface TargetsReport {
  scenario: 'targets'
  timestamp: string
  options: Record<string, unknown>
  machine: Record<string, unknown>
  cost: { options: CostOptions; rows: CostRow[] }
  targets: TargetRow[]
  /** The printed block, as printed. */
  printed: string
  authorize: Report | { error: string }
  /** The ingest parts' legs in one report (the first part's options and machine). */
  ingest: IngestReport | { error: string }
  /** Each ingest run as it came back. */
  ingestParts: (IngestReport | { error: string })[]
}

/** Runs one scenario; a failure is printed and recorded, and the run goes on (its targets are then N/A). */
async function attempt<T>(name: string, fn: () => Promise<T>): Promise<T | { error: string }> {
  try {
    return await fn()
  } catch (err) {
    const msg = (err as Error).message
    console.log(`\n${name} FAILED: ${msg}`)
    return { error: msg.split('\n')[0] ?? msg }
  }
}

const ok = <T extends object>(r: T | { error: string }): T | undefined => ('error' in r ? undefined : (r as T))

export async function runTargets(opts: BenchOptions): Promise<void> {
  const cost = costOptions()
  if (opts.legs.length) console.warn('warning: -l/--legs is not used by the targets scenario (it runs the legs the targets need)')
  const timestamp = new Date().toISOString()
  const machine = machineInfo({ clkTck: clockTicks() })
  const started = Date.now()
  console.log(`targets: authorize (${TARGET_AUTHORIZE_LEGS.join(', ')}; ${opts.rounds} round(s)), then ingest (${TARGET_INGEST_LEGS.join(', ')})\n`)

  const authorize = await attempt('authorize', async () => (await import('./authorize.js')).runAuthorize({ ...opts, legs: TARGET_AUTHORIZE_LEGS }))
  console.log('')
  const ingestParts: (IngestReport | { error: string })[] = []
  for (const legs of TARGET_INGEST_PARTS) {
    ingestParts.push(await attempt(`ingest (${legs.join(', ')})`, async () => (await import('./ingest.js')).runIngest({ ...opts, legs, rounds: 1 })))
    console.log('')
  }
  const ingest = mergeIngest(ingestParts)

  const targets = targetRows(ok(authorize), ok(ingest))
  const rows = costModel(ok(authorize), ok(ingest), cost)
  const minutes = (Date.now() - started) / 60_000
  const printed = [
    `== issue 11 targets: ${timestamp}, ${String(machine.cpus)} CPUs, ${minutes.toFixed(1)} min ==`,
    `authorize: ${opts.rounds} round(s), median round per leg, ${opts.durationS}s legs (+${opts.warmupS}s warm-up), ` +
      `${opts.connections} connections; ingest: ${opts.durationS}s legs. ` +
      'everysec = Redis appendfsync everysec; always = a reply only after the fsync of its write.',
    formatTargets(targets),
    '',
    formatCost(rows, cost),
  ].join('\n')
  console.log(`\n${printed}`)

  const report: TargetsReport = {
    scenario: 'targets',
    timestamp,
    options: { ...opts },
    machine,
    cost: { options: cost, rows },
    targets,
    printed,
    authorize,
    ingest,
    ingestParts,
  }
  mkdirSync(RESULTS_DIR, { recursive: true })
  const file = path.join(RESULTS_DIR, `targets-${timestamp.replace(/[:.]/g, '-')}.json`)
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n')
  copyFileSync(file, path.join(RESULTS_DIR, 'targets-latest.json'))
  console.log(`\nwrote ${path.relative(process.cwd(), file)} (copied to targets-latest.json)`)
}
