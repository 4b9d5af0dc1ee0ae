// Load generation: a thin, typed wrapper over autocannon's programmatic API.
//
// Why our own latency histogram: autocannon records latencies in an HDR
// histogram with 1 ms resolution, so a p50 of 0.6 ms prints as "0" or "1".
// Its tracker emits every response with a fractional duration (hrtime, from
// the write of the request to the end of the response), so we keep those
// instead and compute exact percentiles. We also split them per step of a
// request sequence (authorize vs settle).

import { createRequire } from 'node:module'
import { procCpuUs, systemBusyUs } from './proc.js'

// autocannon is CommonJS without bundled types; load it through require and
// describe the small part we use, rather than shipping an ambient module
// declaration that would clash if @types/autocannon is ever installed.
const require = createRequire(import.meta.url)
type Ctx = Record<string, unknown>
interface AcRequest {
  method: string
  path: string
  headers?: Record<string, string>
  body?: string
  setupRequest?: (req: AcRequest, ctx: Ctx) => AcRequest | null
  onResponse?: (status: number, body: string, ctx: Ctx) => void
}
interface AcResult {
  errors: number
  timeouts: number
  non2xx: number
  statusCodeStats: Record<string, { count: number }>
  latency: { p50: number; p99: number }
}
interface AcTracker {
  on(ev: 'response', fn: (client: AcClient, status: number, bytes: number, ms: number) => void): void
}
interface AcClient {
  requestIterator?: { currentRequestIndex?: number }
}
type Autocannon = (opts: Record<string, unknown>, cb: (err: Error | null, res: AcResult) => void) => AcTracker
const autocannon = require('autocannon') as Autocannon

export interface Step {
  name: string
  method: 'GET' | 'POST'
  path: string
  headers?: Record<string, string>
  /**
   * Body for each request, built just before it is sent (so every request can
   * carry a unique idempotency key). `ctx` is per connection and is reset when
   * the sequence starts over. Return null to abandon the sequence (e.g. settle
   * without a holdId because authorize failed): autocannon restarts at step 0.
   */
  body?: (ctx: Ctx) => string | null
  /** Sees each response of this step (e.g. to capture the holdId). */
  onResponse?: (status: number, body: string, ctx: Ctx) => void
}

export interface LoadOptions {
  url: string
  connections: number
  durationS: number
  pipelining: number
  steps: Step[]
  /** Processes whose CPU time is measured over the run (name → pid). */
  cpuPids?: Record<string, number>
}

export interface LatencyFigures {
  count: number
  p50: number
  p99: number
  mean: number
  max: number
}

export interface LoadResult {
  wallS: number
  /** 2xx responses per second, all steps together. */
  rps: number
  ok: number
  non2xx: number
  errors: number
  timeouts: number
  statusCodes: Record<string, number>
  /** Latency of 2xx responses, all steps (ms). */
  latency: LatencyFigures
  /** Per step: 2xx count, rate and latency (ms). */
  steps: Record<string, LatencyFigures & { rps: number }>
  /** autocannon's own (1 ms resolution) figures, for reference. */
  autocannon: { p50: number; p99: number }
  /** CPU µs consumed over the run, per pid in `cpuPids`. */
  cpuUs: Record<string, number>
  /** CPU of the load generator (this process), % of one core. */
  clientCpuPct: number
  /**
   * CPU used by everything else on the machine during the run (% of one
   * core): all busy time minus this process and the `cpuPids`. High values
   * mean the figures were disturbed. Includes a little kernel work (e.g.
   * softirqs that landed on an idle core) that is really ours.
   */
  otherCpuPct: number
}

/** Growable Float64Array: ~500k samples per leg, no per-sample allocation. */
class Samples {
  private buf = new Float64Array(1 << 16)
  n = 0
  push(v: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2)
      next.set(this.buf)
      this.buf = next
    }
    this.buf[this.n++] = v
  }
  figures(): LatencyFigures {
    const a = this.buf.slice(0, this.n).sort()
    const at = (q: number): number => (this.n ? (a[Math.min(this.n - 1, Math.ceil(q * this.n) - 1)] ?? 0) : 0)
    let sum = 0
    for (const v of a) sum += v
    return { count: this.n, p50: at(0.5), p99: at(0.99), mean: this.n ? sum / this.n : 0, max: this.n ? (a[this.n - 1] ?? 0) : 0 }
  }
}

export function runLoad(o: LoadOptions): Promise<LoadResult> {
  const all = new Samples()
  const perStep = o.steps.map(() => new Samples())
  const requests: AcRequest[] = o.steps.map((s) => ({
    method: s.method,
    path: s.path,
    ...(s.headers ? { headers: s.headers } : {}),
    ...(s.body
      ? {
          setupRequest: (req: AcRequest, ctx: Ctx): AcRequest | null => {
            const body = s.body!(ctx)
            return body === null ? null : { ...req, body }
          },
        }
      : {}),
    // Defining onResponse makes autocannon buffer response bodies; only do it when needed.
    ...(s.onResponse ? { onResponse: s.onResponse } : {}),
  }))

  const pids = o.cpuPids ?? {}
  const cpu0: Record<string, number> = {}
  for (const [k, pid] of Object.entries(pids)) cpu0[k] = procCpuUs(pid)
  const client0 = process.cpuUsage()
  const sys0 = systemBusyUs()
  const t0 = process.hrtime.bigint()

  return new Promise((resolve, reject) => {
    const tracker = autocannon(
      {
        url: o.url,
        connections: o.connections,
        duration: o.durationS,
        pipelining: o.pipelining,
        timeout: 10,
        requests,
      },
      (err, res) => {
        const wallS = Number(process.hrtime.bigint() - t0) / 1e9
        const c = process.cpuUsage(client0)
        const sysUs = systemBusyUs() - sys0
        const cpuUs: Record<string, number> = {}
        let mine = c.user + c.system
        for (const [k, pid] of Object.entries(pids)) {
          try {
            cpuUs[k] = procCpuUs(pid) - (cpu0[k] ?? 0)
            mine += cpuUs[k]
          } catch {
            cpuUs[k] = NaN // process died during the run
          }
        }
        if (err) return reject(err)
        const statusCodes: Record<string, number> = {}
        for (const [code, v] of Object.entries(res.statusCodeStats)) statusCodes[code] = v.count
        const steps: LoadResult['steps'] = {}
        o.steps.forEach((s, i) => {
          const f = perStep[i]!.figures()
          steps[s.name] = { ...f, rps: f.count / wallS }
        })
        resolve({
          wallS,
          rps: all.n / wallS,
          ok: all.n,
          non2xx: res.non2xx,
          errors: res.errors,
          timeouts: res.timeouts,
          statusCodes,
          latency: all.figures(),
          steps,
          autocannon: { p50: res.latency.p50, p99: res.latency.p99 },
          cpuUs,
          clientCpuPct: ((c.user + c.system) / 1e6 / wallS) * 100,
          otherCpuPct: Math.max(0, ((sysUs - mine) / 1e6 / wallS) * 100),
        })
      },
    )
    tracker.on('response', (client, status, _bytes, ms) => {
      if (status < 200 || status > 299) return
      all.push(ms)
      // With pipelining 1 the iterator still points at the step that was just
      // answered when this event fires (it advances right after). Internal
      // field, hence the fallback to step 0.
      const i = client.requestIterator?.currentRequestIndex ?? 0
      ;(perStep[i] ?? perStep[0]!).push(ms)
    })
  })
}
