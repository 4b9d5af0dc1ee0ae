// Printing and saving the ingest benchmark: console tables, a JSON file with
// every figure (including the stored-count series), and a small SVG.

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { LagFigures, SeriesPoint } from './ingestMonitor.js'
import { f, int, table } from './report.js'

export interface IngestLeg {
  id: string
  label: string
  kind: 'ceiling' | 'ingest' | 'drain'
  ok: boolean
  error?: string
  /** Ceilings: jobs or rows per second; ingest legs: events accepted per second; drain: events stored per second. */
  eventsPerSec?: number
  events?: number
  reqPerSec?: number
  connections?: number
  eventsPerRequest?: number
  httpLatencyMs?: { p50: number; p99: number }
  non2xx?: number
  errors?: number
  statusCodes?: Record<string, number>
  wallS?: number
  /** Drain leg: how fast the backlog was filled. */
  fillEventsPerSec?: number
  drain?: {
    eventsPerSec: number
    /** Rows stored while the load ran, per second of load. */
    storedDuringLoadPerSec?: number
    backlogAtLoadEnd?: number
    maxBacklog?: number
    /** Seconds from the end of the load until every accepted event was stored. */
    catchUpS?: number
    peak1sPerSec?: number
    stored: number
    complete?: boolean
  }
  lagMs?: LagFigures
  /** Ingest legs: jobs the gateway added to the ingest queue during the load (its group commits). */
  ingestJobs?: number
  /** CPU over the measured window, % of one core, per process. */
  cpuPct?: Record<string, number>
  otherCpuPct?: number
  note?: string
  series?: SeriesPoint[]
}

export interface IngestTarget {
  name: string
  value: number | null
  limit: string
  pass: boolean | null
  note?: string
}

export interface IngestReport {
  scenario: 'ingest'
  timestamp: string
  options: Record<string, unknown>
  machine: Record<string, unknown>
  legs: IngestLeg[]
  targets: IngestTarget[]
}

const cpuCell = (l: IngestLeg): string =>
  l.cpuPct
    ? Object.entries(l.cpuPct)
        .filter(([, v]) => Number.isFinite(v))
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(', ')
    : ''

export function printIngestReport(r: IngestReport): void {
  const o = r.options as { durationS: number; warmupS: number; connections: number; batchConnections: number; batchSize: number }
  console.log(
    `\n== ingest: ${o.durationS}s per leg (+${o.warmupS}s warm-up); single ${o.connections} connections, ` +
      `batch ${o.batchConnections} connections × ${o.batchSize} events; pipelining 1 ==`,
  )
  const rows: string[][] = [
    ['leg', 'events/s', 'req/s', 'HTTP p50/p99 ms', 'stored/s', 'backlog max', 'catch-up s', 'lag p50/p99 s', 'CPU % of a core', 'other%', 'non2xx/err'],
  ]
  for (const l of r.legs) {
    if (!l.ok) {
      rows.push([l.label, 'FAILED', ...Array<string>(9).fill('')])
      continue
    }
    rows.push([
      l.label,
      int(l.eventsPerSec),
      l.reqPerSec !== undefined ? int(l.reqPerSec) : '',
      l.httpLatencyMs ? `${f(l.httpLatencyMs.p50, 1)}/${f(l.httpLatencyMs.p99, 1)}` : '',
      l.drain ? int(l.drain.eventsPerSec) : '',
      l.drain?.maxBacklog !== undefined ? int(l.drain.maxBacklog) : '',
      l.drain?.catchUpS !== undefined ? f(l.drain.catchUpS, 1) : '',
      l.lagMs ? `${f(l.lagMs.p50 / 1000, 2)}/${f(l.lagMs.p99 / 1000, 2)}` : '',
      cpuCell(l),
      f(l.otherCpuPct, 0),
      l.kind === 'ingest' ? `${l.non2xx ?? 0}/${l.errors ?? 0}` : '',
    ])
  }
  console.log(table(rows))
  console.log(
    '  ceilings: events/s = BullMQ jobs/s or ClickHouse rows/s. ingest legs: events/s = events answered accepted;\n' +
      '  stored/s = accepted events / time from the start of the load until ClickHouse held all of them (polled every\n' +
      '  100 ms); backlog = accepted − stored, sampled during the load; catch-up = time after the load until all were\n' +
      '  stored. lag = from the response to a sampled request until a poll found its event (upper bound, ±1 poll).\n' +
      '  drain = the worker stopped while a batch load filled Redis, then started: rows/s from first to last stored row.\n' +
      `  CPU from /proc (utime+stime); bench = this process (autocannon + polling). ${String(r.machine.cpus)} cores.`,
  )
  for (const l of r.legs) {
    if (!l.ok) console.log(`  ! ${l.label}: ${l.error}`)
    else {
      if ((l.non2xx ?? 0) > 0 || (l.errors ?? 0) > 0) console.log(`  ! ${l.label}: status codes ${JSON.stringify(l.statusCodes)}, errors ${l.errors}`)
      if (l.note) console.log(`  ${l.label}: ${l.note}`)
      if (l.drain?.peak1sPerSec !== undefined)
        console.log(`  ${l.label}: peak ${int(l.drain.peak1sPerSec)} events/s over 1 s; backlog filled at ${int(l.fillEventsPerSec)} events/s`)
      if (l.lagMs && l.lagMs.count > 0)
        console.log(
          `  ${l.label}: lag from ${l.lagMs.count} samples${l.lagMs.missing ? `, ${l.lagMs.missing} never seen` : ''}, max ${f(l.lagMs.max / 1000, 2)} s`,
        )
      if ((l.cpuPct?.bench ?? 0) > 90) console.log(`  ~ ${l.label}: the bench process at ${f(l.cpuPct?.bench, 0)}% of a core: probably client-bound`)
    }
  }
  printFsyncPairs(r.legs)
  console.log('\ntargets (informational, issue 3):')
  for (const t of r.targets) {
    const label = t.pass === null ? 'N/A ' : t.pass ? 'PASS' : 'MISS'
    console.log(
      `  [${label}] ${t.name.padEnd(52)} ${t.value === null ? '—' : t.value >= 1000 ? int(t.value) : t.value.toFixed(2)} (${t.limit})${t.note ? `  ${t.note}` : ''}`,
    )
  }
}

/**
 * The single and batch legs beside their `-always` twins (a redis-server at appendfsync always,
 * the gateway's default): what fsync before every reply costs ingest. Printed when both ran.
 */
function printFsyncPairs(legs: IngestLeg[]): void {
  const rows: string[][] = [
    ['', 'everysec events/s', 'always events/s', 'always/everysec', 'HTTP p50/p99 ms everysec', 'always', 'redis CPU % everysec/always', 'other%'],
  ]
  for (const mode of ['single', 'batch']) {
    const e = legs.find((l) => l.id === mode && l.ok)
    const a = legs.find((l) => l.id === `${mode}-always` && l.ok)
    if (!e || !a) continue
    const p = (l: IngestLeg): string => (l.httpLatencyMs ? `${f(l.httpLatencyMs.p50, 1)}/${f(l.httpLatencyMs.p99, 1)}` : '')
    rows.push([
      mode === 'single' ? 'POST /v1/usage/record' : 'POST record-batch',
      int(e.eventsPerSec),
      int(a.eventsPerSec),
      `${f((a.eventsPerSec ?? NaN) / (e.eventsPerSec ?? NaN), 2)}×`,
      p(e),
      p(a),
      `${f(e.cpuPct?.redis, 0)}/${f(a.cpuPct?.redis, 0)}`,
      `${f(e.otherCpuPct, 0)}/${f(a.otherCpuPct, 0)}`,
    ])
  }
  if (rows.length === 1) return
  console.log('\nfsync before the reply (appendfsync always, the default) vs everysec, same load:')
  console.log(table(rows))
}

export function writeIngestReport(dir: string, r: IngestReport): { json: string; svg: string } {
  mkdirSync(dir, { recursive: true })
  const stamp = r.timestamp.replace(/[:.]/g, '-')
  const json = path.join(dir, `ingest-${stamp}.json`)
  const svg = path.join(dir, `ingest-${stamp}.svg`)
  writeFileSync(json, JSON.stringify(r, null, 2) + '\n')
  writeFileSync(svg, chart(r))
  copyFileSync(json, path.join(dir, 'ingest-latest.json'))
  copyFileSync(svg, path.join(dir, 'ingest-latest.svg'))
  return { json, svg }
}

const COLORS: Record<string, string> = { ceiling: '#9e9e9e', ingest: '#1f6feb', drain: '#2da44e' }
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** Two panels: events/s per leg (with the throughput targets), and lag p99 per ingest leg (2 s target). */
function chart(r: IngestReport): string {
  const legs = r.legs.filter((l) => l.ok && l.eventsPerSec !== undefined && Number.isFinite(l.eventsPerSec))
  const lagLegs = r.legs.filter((l) => l.ok && l.lagMs && l.lagMs.count > 0)
  const single = r.targets.find((t) => t.name.startsWith('single-event'))
  const singleLimit =
    single?.value && legs.find((l) => l.id === 'single') ? (legs.find((l) => l.id === 'single')!.eventsPerSec! / single.value) * 0.8 : undefined
  type Bar = { label: string; value: number; color: string; text: string }
  const panels: { title: string; bars: Bar[]; marks: { value: number; label: string }[] }[] = [
    {
      title: 'Events per second (higher is better)',
      bars: legs.flatMap((l) => {
        const main: Bar = { label: l.label, value: l.eventsPerSec!, color: COLORS[l.kind] ?? '#888', text: Math.round(l.eventsPerSec!).toLocaleString('en-US') }
        const stored: Bar[] =
          l.kind === 'ingest' && l.drain && Number.isFinite(l.drain.eventsPerSec)
            ? [{ label: `  ↳ stored`, value: l.drain.eventsPerSec, color: COLORS.drain!, text: Math.round(l.drain.eventsPerSec).toLocaleString('en-US') }]
            : []
        return [main, ...stored]
      }),
      marks: [
        { value: 150_000, label: 'batch 150k' },
        { value: 100_000, label: 'drain 100k' },
        ...(singleLimit ? [{ value: singleLimit, label: '0.8× authorize' }] : []),
      ],
    },
    {
      title: 'Lag p99, accept → queryable (s, lower is better)',
      bars: lagLegs.map((l) => ({ label: l.label, value: l.lagMs!.p99 / 1000, color: COLORS.ingest!, text: (l.lagMs!.p99 / 1000).toFixed(2) })),
      marks: [{ value: 2, label: '2 s' }],
    },
  ]
  const W = 820
  const labelW = 230
  const barMax = W - labelW - 110
  const barH = 20
  const gap = 6
  const headH = 58
  const heights = panels.map((p) => 34 + p.bars.length * (barH + gap) + 12 + 13 * p.marks.length)
  const H = headH + heights.reduce((a, b) => a + b, 0) + 10
  const m = r.machine
  const o = r.options as { durationS: number; connections: number; batchConnections: number; batchSize: number }
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="13">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="bold">${esc(`ingest benchmark — ${r.timestamp}`)}</text>`,
    `<text x="16" y="44" fill="#555">${esc(
      `${o.durationS}s/leg · single ${o.connections} conns · batch ${o.batchConnections}×${o.batchSize} · ${String(m.cpus)}× ${String(m.cpuModel)} · clickhouse ${String(m.clickhouseServerVersion ?? '?')}`,
    )}</text>`,
  ]
  let y0 = headH
  panels.forEach((p, pi) => {
    out.push(`<text x="16" y="${y0 + 20}" font-weight="bold">${esc(p.title)}</text>`)
    const max = Math.max(1e-9, ...p.bars.map((b) => b.value), ...p.marks.map((k) => k.value))
    const barsBottom = y0 + 32 + p.bars.length * (barH + gap)
    p.bars.forEach((b, i) => {
      const y = y0 + 32 + i * (barH + gap)
      const w = Math.max(1, (b.value / max) * barMax)
      out.push(
        `<text x="${labelW - 8}" y="${y + barH / 2 + 4}" text-anchor="end">${esc(b.label)}</text>`,
        `<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" rx="3" fill="${b.color}"/>`,
        `<text x="${(labelW + w + 6).toFixed(1)}" y="${y + barH / 2 + 4}">${esc(b.text)}</text>`,
      )
    })
    p.marks.forEach((k, i) => {
      const x = (labelW + (k.value / max) * barMax).toFixed(1)
      out.push(
        `<line x1="${x}" y1="${y0 + 28}" x2="${x}" y2="${barsBottom}" stroke="#c00" stroke-width="1.5" stroke-dasharray="4 3"/>`,
        `<text x="${x}" y="${barsBottom + 13 * (i + 1)}" fill="#c00" font-size="11" text-anchor="middle">${esc(`target ${k.label}`)}</text>`,
      )
    })
    y0 += heights[pi]!
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
