// Watching ClickHouse from the bench while events flow: how many of a
// project's events are stored (over time), and when sampled events become
// queryable (end-to-end lag). Talks to clickhouse-server over plain HTTP, so
// the bench never shares a store object with the gateway or the worker.

import { delay } from './proc.js'

/** Runs one SQL statement against clickhouse-server over HTTP; returns the TabSeparated text. */
export async function chText(url: string, sql: string, database = 'default'): Promise<string> {
  const res = await fetch(`${url}/?database=${encodeURIComponent(database)}`, {
    method: 'POST',
    body: sql,
    signal: AbortSignal.timeout(10_000),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`ClickHouse ${res.status}: ${text.slice(0, 300)}`)
  return text
}

export interface SeriesPoint {
  /** ms since the monitor started. */
  t: number
  /** Events answered as accepted so far (from the load generator's responses). */
  accepted: number
  /** Rows of the project in usage_events. */
  stored: number
}

export interface LagFigures {
  /** Samples seen in ClickHouse. */
  count: number
  /** Samples accepted but never seen before the monitor stopped. */
  missing: number
  p50: number
  p99: number
  max: number
}

/**
 * Polls `SELECT count()` for one project and looks up the pending lag samples
 * (event ids whose accept time is known) every `intervalMs`. A sample's lag is
 * measured from the moment the bench saw its request answered (accept) to the
 * end of the first poll that found it: an upper bound, coarse by one poll
 * interval plus the query's own time (~tens of ms).
 */
export class IngestMonitor {
  accepted = 0
  readonly series: SeriesPoint[] = []
  private readonly pending = new Map<string, number>()
  private readonly lags: number[] = []
  private stopped = false
  private loop: Promise<void> | undefined
  private readonly t0 = Date.now()
  lastStored = 0
  pollErrors = 0
  lastError: string | undefined

  constructor(
    private readonly chUrl: string,
    private readonly database: string,
    private readonly projectId: string,
    private readonly intervalMs = 100,
  ) {}

  /** The request carrying sample `id` was answered `accepted` at `atMs` (epoch ms). */
  sampleAccepted(id: string, atMs: number): void {
    this.pending.set(id, atMs)
  }

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        const began = Date.now()
        await this.pollOnce().catch((err: unknown) => {
          this.pollErrors++
          this.lastError = (err as Error).message
        })
        const spent = Date.now() - began
        if (spent < this.intervalMs) await delay(this.intervalMs - spent)
      }
    })()
  }

  private async pollOnce(): Promise<void> {
    const p = this.projectId.replace(/'/g, '')
    const stored = Number((await chText(this.chUrl, `SELECT count() FROM usage_events WHERE project_id = '${p}'`, this.database)).trim())
    this.lastStored = stored
    this.series.push({ t: Date.now() - this.t0, accepted: this.accepted, stored })
    if (this.pending.size === 0) return
    // Sample ids are [A-Za-z0-9-] only (built by the bench): safe in a literal.
    const ids = [...this.pending.keys()].slice(0, 5000)
    const list = ids.map((id) => `'${id}'`).join(',')
    const found = (await chText(this.chUrl, `SELECT event_id FROM usage_events WHERE project_id = '${p}' AND event_id IN (${list})`, this.database))
      .split('\n')
      .filter(Boolean)
    const now = Date.now()
    for (const id of found) {
      const at = this.pending.get(id)
      if (at === undefined) continue
      this.lags.push(now - at)
      this.pending.delete(id)
    }
  }

  /** Waits until `stored >= target`; resolves with the first poll time it was seen (epoch ms), or undefined on timeout. */
  async waitFor(target: number, timeoutMs: number): Promise<number | undefined> {
    const deadline = Date.now() + timeoutMs
    let seen = 0
    while (Date.now() < deadline) {
      for (; seen < this.series.length; seen++) {
        const pt = this.series[seen]!
        if (pt.stored >= target) return this.t0 + pt.t
      }
      await delay(20)
    }
    return undefined
  }

  /** Waits (bounded) for the pending lag samples to be found. */
  async waitSamples(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.pending.size > 0 && Date.now() < deadline) await delay(50)
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.loop
  }

  elapsedMs(): number {
    return Date.now() - this.t0
  }

  lag(): LagFigures {
    const a = [...this.lags].sort((x, y) => x - y)
    const at = (q: number): number => (a.length ? (a[Math.min(a.length - 1, Math.ceil(q * a.length) - 1)] ?? 0) : NaN)
    return { count: a.length, missing: this.pending.size, p50: at(0.5), p99: at(0.99), max: a.length ? a[a.length - 1]! : NaN }
  }
}
