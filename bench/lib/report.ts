// Printing and saving benchmark results: a console table, a JSON file with
// every figure, and a small hand-written SVG bar chart (no dependency).

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { LatencyFigures } from './load.js'
import type { RedisFigures } from './redis.js'

export interface LegResult {
  id: string
  label: string
  ok: boolean
  error?: string
  /** What one "op" is for this leg (one authorize; or one authorize + one settle). */
  op?: string
  /** HTTP 2xx responses per second. */
  rps?: number
  /** Ops (authorizes) per second. */
  opsPerSec?: number
  ops?: number
  latency?: LatencyFigures
  stepLatency?: Record<string, LatencyFigures & { rps: number }>
  autocannonLatency?: { p50: number; p99: number }
  non2xx?: number
  errors?: number
  timeouts?: number
  statusCodes?: Record<string, number>
  /** Server process CPU per op (µs) and utilisation (% of one core). */
  cpuUsPerOp?: number
  cpuUsPerReq?: number
  serverCpuPct?: number
  clientCpuPct?: number
  /** CPU taken by other processes on the machine during the run (% of a core): noise indicator. */
  otherCpuPct?: number
  /** With --rounds > 1: every round's headline figures (the leg shows its median round). */
  rounds?: { ok: boolean; opsPerSec: number | null; p99: number | null; otherCpuPct: number | null }[]
  redis?: RedisFigures & { perOp: { usecLow: number; usecHigh: number; cpuUs: number } }
  wallS?: number
}

export interface Target {
  name: string
  value: number | null
  limit: string
  pass: boolean | null
  note?: string
}

export interface Report {
  scenario: string
  timestamp: string
  options: Record<string, unknown>
  machine: Record<string, unknown>
  legs: LegResult[]
  ratios: Record<string, number | null>
  targets: Target[]
}

export function machineInfo(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const cpus = os.cpus()
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? '?',
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    totalMemGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    loadavgAtStart: os.loadavg().map((x) => +x.toFixed(2)),
    ...extra,
  }
}

// ---------------------------------------------------------------------------
// Console

export const f = (v: number | undefined | null, digits = 1): string => (v === undefined || v === null || !Number.isFinite(v) ? '—' : v.toFixed(digits))
export const int = (v: number | undefined | null): string =>
  v === undefined || v === null || !Number.isFinite(v) ? '—' : Math.round(v).toLocaleString('en-US')

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)))
  return rows
    .map((r, i) => {
      const line = r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ')
      return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line
    })
    .join('\n')
}

export function printReport(r: Report): void {
  const o = r.options
  console.log(`\n== ${r.scenario}: ${o.durationS}s per leg (+${o.warmupS}s warm-up), ${o.connections} connections, pipelining ${o.pipelining} ==`)
  const rows: string[][] = [
    [
      'leg',
      'req/s',
      'ops/s',
      'p50 ms',
      'p99 ms',
      'CPU µs/op',
      'srv CPU%',
      'Redis µs/op',
      'script µs',
      'Redis CPU µs/op',
      'client CPU%',
      'other CPU%',
      'non2xx/err',
    ],
  ]
  for (const l of r.legs) {
    if (!l.ok) {
      rows.push([l.label, 'FAILED', ...Array<string>(11).fill('')])
      continue
    }
    const rd = l.redis
    const redisCmd = rd
      ? Math.abs(rd.perOp.usecHigh - rd.perOp.usecLow) < 0.05
        ? f(rd.perOp.usecHigh)
        : `${f(rd.perOp.usecLow)}–${f(rd.perOp.usecHigh)}`
      : '—'
    rows.push([
      l.label,
      int(l.rps),
      int(l.opsPerSec),
      f(l.latency?.p50, 2),
      f(l.latency?.p99, 2),
      f(l.cpuUsPerOp),
      f(l.serverCpuPct, 0),
      redisCmd,
      f(rd?.scriptUsecPerCall),
      f(rd?.perOp.cpuUs),
      f(l.clientCpuPct, 0),
      f(l.otherCpuPct, 0),
      `${l.non2xx ?? 0}/${(l.errors ?? 0) + (l.timeouts ?? 0)}`,
    ])
  }
  console.log(table(rows))
  console.log(
    '  op = one authorize (for "auth+settle": one authorize plus one settle). CPU = server process utime+stime from /proc.\n' +
      '  Redis µs/op = INFO commandstats time (a range when Lua/MULTI nesting makes Redis 7 count commands twice);\n' +
      '  Redis CPU = the redis-server process itself (adds parsing, networking, AOF). client = the autocannon process;\n' +
      '  other = CPU used by the rest of the machine meanwhile (noise). CPU% is of one core; this machine has ' +
      `${r.machine.cpus} cores.`,
  )
  for (const l of r.legs) {
    if (!l.ok) console.log(`  ! ${l.label}: ${l.error}`)
    else if ((l.non2xx ?? 0) > 0 || (l.errors ?? 0) > 0)
      console.log(`  ! ${l.label}: status codes ${JSON.stringify(l.statusCodes)}, errors ${l.errors}, timeouts ${l.timeouts}`)
    if (l.ok && l.stepLatency && Object.keys(l.stepLatency).length > 1) {
      const parts = Object.entries(l.stepLatency).map(([k, v]) => `${k} ${int(v.rps)}/s p50 ${f(v.p50, 2)} p99 ${f(v.p99, 2)} ms`)
      console.log(`  ${l.label} per step: ${parts.join('; ')}`)
    }
    if (l.ok && (l.clientCpuPct ?? 0) > 90)
      console.log(`  ~ ${l.label}: load generator at ${f(l.clientCpuPct, 0)}% of a core: this leg is probably client-bound`)
    if (l.ok && (l.otherCpuPct ?? 0) > 25) console.log(`  ~ ${l.label}: other processes took ${f(l.otherCpuPct, 0)}% of a core meanwhile: figures disturbed`)
    if (l.rounds && l.rounds.length > 1) console.log(`  ${l.label} rounds (ops/s): ${l.rounds.map((x) => int(x.opsPerSec)).join(', ')} → median round shown`)
  }

  console.log('\nratios:')
  for (const [k, v] of Object.entries(r.ratios)) console.log(`  ${k.padEnd(34)} ${v === null ? '—' : v.toFixed(2)}`)
  console.log('\ntargets (informational):')
  for (const t of r.targets) {
    const label = t.pass === null ? 'N/A ' : t.pass ? 'PASS' : 'MISS'
    console.log(`  [${label}] ${t.name.padEnd(44)} ${t.value === null ? '—' : t.value.toFixed(2)} (${t.limit})${t.note ? `  ${t.note}` : ''}`)
  }
}

// ---------------------------------------------------------------------------
// Files

/** Writes <name>-<ts>.json/.svg and refreshes <name>-latest.json/.svg; returns the paths. */
export function writeReport(dir: string, name: string, r: Report): { json: string; svg: string } {
  mkdirSync(dir, { recursive: true })
  const stamp = r.timestamp.replace(/[:.]/g, '-') // colons are awkward in file names
  const json = path.join(dir, `${name}-${stamp}.json`)
  const svg = path.join(dir, `${name}-${stamp}.svg`)
  writeFileSync(json, JSON.stringify(r, null, 2) + '\n')
  writeFileSync(svg, chart(r))
  copyFileSync(json, path.join(dir, `${name}-latest.json`))
  copyFileSync(svg, path.join(dir, `${name}-latest.svg`))
  return { json, svg }
}

const COLORS: Record<string, string> = {
  hello: '#9e9e9e',
  'ours-authorize': '#1f6feb',
  'ours-pair': '#79a8f5',
  'ours-always': '#0b3d91',
  peer: '#e8833a',
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/**
 * Panels of horizontal bars, one bar per leg: req/s, p99, CPU µs per request.
 * Dashed lines mark the targets that can be drawn on a panel's own scale.
 */
function chart(r: Report): string {
  const legs = r.legs.filter((l) => l.ok)
  const find = (id: string): LegResult | undefined => legs.find((l) => l.id === id)
  const hello = find('hello')
  const peer = find('peer')
  type Mark = { value: number | undefined; label: string }
  const panels: { title: string; value: (l: LegResult) => number | undefined; fmt: (v: number) => string; marks: Mark[] }[] = [
    {
      title: 'Throughput (HTTP req/s, higher is better)',
      value: (l) => l.rps,
      fmt: (v) => Math.round(v).toLocaleString('en-US'),
      marks: [
        { value: hello?.rps !== undefined ? hello.rps * 0.65 : undefined, label: '0.65× hello' },
        { value: peer?.rps !== undefined ? peer.rps * 1.5 : undefined, label: '1.5× peer' },
      ],
    },
    {
      title: 'p99 latency (ms, lower is better)',
      value: (l) => l.latency?.p99,
      fmt: (v) => v.toFixed(2),
      marks: [{ value: 5, label: '5 ms' }],
    },
    {
      title: 'Server CPU per request (µs, lower is better)',
      value: (l) => l.cpuUsPerReq,
      fmt: (v) => v.toFixed(1),
      marks: [{ value: hello?.cpuUsPerReq !== undefined ? hello.cpuUsPerReq * 1.5 : undefined, label: '1.5× hello' }],
    },
  ]
  const W = 760
  const labelW = 170
  const barMax = W - labelW - 110
  const barH = 22
  const gap = 6
  // Room under the bars for one target label per line (two marks can be close together).
  const maxMarks = Math.max(0, ...panels.map((p) => p.marks.length))
  const panelH = 34 + legs.length * (barH + gap) + 12 + 13 * maxMarks
  const headH = 58
  const H = headH + panels.length * panelH + 10
  const o = r.options
  const m = r.machine
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="13">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="bold">${esc(`${r.scenario} benchmark — ${r.timestamp}`)}</text>`,
    `<text x="16" y="44" fill="#555">${esc(
      `${o.connections} connections, pipelining ${o.pipelining}, ${o.durationS}s/leg · ${m.cpus}× ${m.cpuModel} · node ${m.node}`,
    )}</text>`,
  ]
  const ok = (v: number | undefined): v is number => v !== undefined && Number.isFinite(v)
  panels.forEach((p, pi) => {
    const y0 = headH + pi * panelH
    out.push(`<text x="16" y="${y0 + 20}" font-weight="bold">${esc(p.title)}</text>`)
    const marks = p.marks.filter((k): k is { value: number; label: string } => ok(k.value))
    const max = Math.max(1e-9, ...legs.map((l) => p.value(l) ?? 0), ...marks.map((k) => k.value))
    const barsBottom = y0 + 32 + legs.length * (barH + gap)
    legs.forEach((l, i) => {
      const v = p.value(l)
      const y = y0 + 32 + i * (barH + gap)
      const w = ok(v) ? Math.max(1, (v / max) * barMax) : 0
      out.push(
        `<text x="${labelW - 8}" y="${y + barH / 2 + 4}" text-anchor="end">${esc(l.label)}</text>`,
        `<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" rx="3" fill="${COLORS[l.id] ?? '#888'}"/>`,
        `<text x="${(labelW + w + 6).toFixed(1)}" y="${y + barH / 2 + 4}">${ok(v) ? esc(p.fmt(v)) : '—'}</text>`,
      )
    })
    marks.forEach((k, i) => {
      const x = (labelW + (k.value / max) * barMax).toFixed(1)
      const ly = barsBottom + 13 * (i + 1)
      out.push(
        `<line x1="${x}" y1="${y0 + 28}" x2="${x}" y2="${barsBottom}" stroke="#c00" stroke-width="1.5" stroke-dasharray="4 3"/>`,
        `<text x="${x}" y="${ly}" fill="#c00" font-size="11" text-anchor="middle">${esc(`target ${k.label}`)}</text>`,
      )
    })
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
