// Issue 11's targets, each judged PASS/MISS from one `targets` run: the authorize report
// (legs hello, peer, ours-authorize, ours-always) and the ingest report (ch-insert-server,
// ch-insert-once, single, batch, drain, single-always, batch-always). Pure: no I/O, so the
// table is unit-tested (test/unit/bench.targets.test.ts).

import type { IngestLeg, IngestReport } from './ingestReport.js'
import { int, type LegResult, type Report } from './report.js'

export type Fsync = 'everysec' | 'always'

export interface TargetRow {
  /** appendfsync of the Redis behind the figure ('always': a reply only after the fsync of its write). */
  fsync: Fsync
  name: string
  /** null: a leg failed or did not run, or the target has no variant at this fsync setting. */
  value: number | null
  unit: 'ratio' | 'µs' | 'ms' | 'events/s'
  /** Printed limit, e.g. "≥ 0.75×". */
  limit: string
  pass: boolean | null
  /** Worst `other CPU%` of the legs the figure comes from (noise from the rest of the machine). */
  otherCpuPct: number | null
  /** The legs the figure is computed from, e.g. "ours-authorize/hello". */
  from: string
  note?: string
}

type Check = { op: '≥' | '≤'; limit: number }

/** The targets of issue 11's table, in its order. */
export const TARGETS = {
  vsHello: { name: 'authorize req/s / uWS hello-world', unit: 'ratio', op: '≥', limit: 0.75 },
  vsPeer: { name: 'authorize req/s / peer (Fastify+RLF)', unit: 'ratio', op: '≥', limit: 2.0 },
  cpuVsHello: { name: 'gateway CPU per authorize / hello', unit: 'ratio', op: '≤', limit: 1.5 },
  redisUs: { name: 'Redis µs per authorize (script time)', unit: 'µs', op: '≤', limit: 10 },
  p99: { name: 'authorize p99 at 64 connections', unit: 'ms', op: '≤', limit: 5 },
  batch: { name: '/record-batch events/s accepted', unit: 'events/s', op: '≥', limit: 200_000 },
  drain: { name: 'drain into ClickHouse, events/s', unit: 'events/s', op: '≥', limit: 150_000 },
  insertOnce: { name: 'insert-once / plain insert', unit: 'ratio', op: '≥', limit: 0.8 },
  single: { name: 'single /record events/s / authorize req/s', unit: 'ratio', op: '≥', limit: 0.9 },
} as const satisfies Record<string, Check & { name: string; unit: TargetRow['unit'] }>

export type TargetId = keyof typeof TARGETS

const num = (v: number | null | undefined): number | null => (v === undefined || v === null || !Number.isFinite(v) ? null : v)
const div = (a: number | null | undefined, b: number | null | undefined): number | null => {
  const x = num(a)
  const y = num(b)
  return x === null || y === null || y === 0 ? null : x / y
}
const worst = (...xs: (number | null | undefined)[]): number | null => {
  const ok = xs.map(num).filter((x): x is number => x !== null)
  return ok.length ? Math.max(...ok) : null
}

/**
 * A console table with a rule under the header; the columns in `left` are padded on the right
 * (text), the others on the left (figures).
 */
export function grid(rows: string[][], left: readonly number[] = [0]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)))
  const line = (r: string[]): string =>
    r
      .map((cell, c) => (left.includes(c) ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join('  ')
      .trimEnd()
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n')
}

export function formatLimit(id: TargetId): string {
  const t = TARGETS[id]
  if (t.unit === 'ratio') return `${t.op} ${Number.isInteger(t.limit) ? t.limit.toFixed(1) : t.limit}×`
  if (t.unit === 'events/s') return `${t.op} ${int(t.limit)}/s`
  return `${t.op} ${t.limit} ${t.unit}`
}

/** PASS/MISS of a value against a target; null (N/A) without a value. */
export function judge(id: TargetId, value: number | null): boolean | null {
  if (value === null) return null
  const t = TARGETS[id]
  return t.op === '≥' ? value >= t.limit : value <= t.limit
}

function row(fsync: Fsync, id: TargetId, value: number | null, from: string, otherCpuPct: number | null, note?: string): TargetRow {
  const t = TARGETS[id]
  const v = num(value)
  const why = note ?? (v === null ? 'a leg it needs failed or did not run' : undefined)
  return { fsync, name: t.name, value: v, unit: t.unit, limit: formatLimit(id), pass: judge(id, v), otherCpuPct, from, ...(why ? { note: why } : {}) }
}

/** The ingest scenario's runs as one report: every leg that ran (an error only if none came back). */
export function mergeIngest(parts: (IngestReport | { error: string })[]): IngestReport | { error: string } {
  const done = parts.filter((p): p is IngestReport => !('error' in p))
  if (!done.length) return { error: parts.map((p) => ('error' in p ? p.error : '')).join('; ') || 'not run' }
  return { ...done[0]!, legs: done.flatMap((p) => p.legs), targets: done.flatMap((p) => p.targets) }
}

const authLeg = (r: Report | undefined, id: string): LegResult | undefined => r?.legs.find((l) => l.id === id && l.ok)
const ingestLeg = (r: IngestReport | undefined, id: string): IngestLeg | undefined => r?.legs.find((l) => l.id === id && l.ok)

/** The five authorize rows for one gateway leg (ours-authorize or ours-always) against hello and peer. */
function authorizeRows(fsync: Fsync, auth: Report | undefined, oursId: string): TargetRow[] {
  const hello = authLeg(auth, 'hello')
  const peer = authLeg(auth, 'peer')
  const ours = authLeg(auth, oursId)
  const connections = Number(auth?.options.connections ?? 64)
  const p99Note = connections === 64 ? undefined : `measured at ${connections} connections`
  return [
    row(fsync, 'vsHello', div(ours?.opsPerSec, hello?.opsPerSec), `${oursId}/hello`, worst(ours?.otherCpuPct, hello?.otherCpuPct)),
    row(fsync, 'vsPeer', div(ours?.opsPerSec, peer?.opsPerSec), `${oursId}/peer`, worst(ours?.otherCpuPct, peer?.otherCpuPct)),
    row(fsync, 'cpuVsHello', div(ours?.cpuUsPerReq, hello?.cpuUsPerReq), `${oursId}/hello`, worst(ours?.otherCpuPct, hello?.otherCpuPct)),
    // The scripts' own commandstats time (the low end of the range), which includes the commands they run.
    row(fsync, 'redisUs', num(ours?.redis?.perOp.usecLow), oursId, num(ours?.otherCpuPct)),
    row(fsync, 'p99', num(ours?.latency?.p99), oursId, num(ours?.otherCpuPct), p99Note),
  ]
}

const NO_ALWAYS_DRAIN = 'no always leg: the drain leg runs on the everysec Redis only'
const NO_ALWAYS_CH = 'no always variant: ClickHouse alone, no Redis fsync involved'

/** Every target of issue 11 at everysec, then again with fsync before the reply (always). */
export function targetRows(auth: Report | undefined, ingest: IngestReport | undefined): TargetRow[] {
  const ours = authLeg(auth, 'ours-authorize')
  const always = authLeg(auth, 'ours-always')
  const g = (id: string): IngestLeg | undefined => ingestLeg(ingest, id)
  const [batch, batchAlways, drain] = [g('batch'), g('batch-always'), g('drain')]
  const [plain, once] = [g('ch-insert-server'), g('ch-insert-once')]
  const [single, singleAlways] = [g('single'), g('single-always')]
  return [
    ...authorizeRows('everysec', auth, 'ours-authorize'),
    row('everysec', 'batch', num(batch?.eventsPerSec), 'batch', num(batch?.otherCpuPct)),
    row('everysec', 'drain', num(drain?.eventsPerSec), 'drain', num(drain?.otherCpuPct)),
    row(
      'everysec',
      'insertOnce',
      div(once?.eventsPerSec, plain?.eventsPerSec),
      'ch-insert-once/ch-insert-server',
      worst(once?.otherCpuPct, plain?.otherCpuPct),
    ),
    row('everysec', 'single', div(single?.eventsPerSec, ours?.opsPerSec), 'single/ours-authorize', worst(single?.otherCpuPct, ours?.otherCpuPct)),
    ...authorizeRows('always', auth, 'ours-always'),
    row('always', 'batch', num(batchAlways?.eventsPerSec), 'batch-always', num(batchAlways?.otherCpuPct)),
    row('always', 'drain', null, '—', null, NO_ALWAYS_DRAIN),
    row('always', 'insertOnce', null, '—', null, NO_ALWAYS_CH),
    row(
      'always',
      'single',
      div(singleAlways?.eventsPerSec, always?.opsPerSec),
      'single-always/ours-always',
      worst(singleAlways?.otherCpuPct, always?.otherCpuPct),
    ),
  ]
}

export function formatValue(r: Pick<TargetRow, 'value' | 'unit'>): string {
  if (r.value === null) return '—'
  switch (r.unit) {
    case 'ratio':
      return `${r.value.toFixed(2)}×`
    case 'µs':
      return `${r.value.toFixed(1)} µs`
    case 'ms':
      return `${r.value.toFixed(2)} ms`
    case 'events/s':
      return `${int(r.value)}/s`
  }
}

export const verdict = (pass: boolean | null): string => (pass === null ? 'N/A' : pass ? 'PASS' : 'MISS')

/** The PASS/MISS table, one line per target and fsync setting, plus a count. */
export function formatTargets(rows: TargetRow[]): string {
  const lines: string[][] = [['target', 'fsync', 'figure', 'target', 'result', 'other CPU%', 'from legs']]
  for (const r of rows) {
    lines.push([r.name, r.fsync, formatValue(r), r.limit, verdict(r.pass), r.otherCpuPct === null ? '—' : r.otherCpuPct.toFixed(0), r.from])
  }
  const count = (p: boolean | null): number => rows.filter((r) => r.pass === p).length
  const notes = rows.filter((r) => r.note).map((r) => `  ${verdict(r.pass)} ${r.name} (${r.fsync}): ${r.note}`)
  return [grid(lines, [0, 1, 6]), `  ${count(true)} PASS, ${count(false)} MISS, ${count(null)} N/A`, ...notes].join('\n')
}
