import type { Script } from '../infra/redis/scripts.js'

/** Latency bucket bounds in seconds, Prometheus style. */
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

class Histogram {
  readonly counts = new Float64Array(BUCKETS.length)
  count = 0
  sum = 0
  observe(seconds: number): void {
    this.count++
    this.sum += seconds
    for (let i = 0; i < BUCKETS.length; i++)
      if (seconds <= BUCKETS[i]!) {
        this.counts[i]!++
        break
      }
  }
  lines(name: string, labels: string): string[] {
    const out: string[] = []
    let cumulative = 0
    for (let i = 0; i < BUCKETS.length; i++) {
      cumulative += this.counts[i]!
      out.push(`${name}_bucket{${labels},le="${BUCKETS[i]}"} ${cumulative}`)
    }
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count}`, `${name}_sum{${labels}} ${this.sum}`, `${name}_count{${labels}} ${this.count}`)
    return out
  }
}

/**
 * Request counts by route and status, latency histograms by route, and script latency.
 * Recording is a few array writes, so it stays off the figures of the hot path.
 */
export class Metrics {
  private readonly routes = new Map<string, { statuses: Map<number, number>; latency: Histogram }>()

  constructor(private readonly scripts: readonly Script[] = []) {}

  record(route: string, status: number, seconds: number): void {
    let entry = this.routes.get(route)
    if (!entry) {
      entry = { statuses: new Map(), latency: new Histogram() }
      this.routes.set(route, entry)
    }
    entry.statuses.set(status, (entry.statuses.get(status) ?? 0) + 1)
    entry.latency.observe(seconds)
  }

  render(): string {
    const lines = ['# HELP metering_http_requests_total Requests answered, by route and status.', '# TYPE metering_http_requests_total counter']
    for (const [route, entry] of this.routes)
      for (const [status, n] of entry.statuses) lines.push(`metering_http_requests_total{route="${route}",status="${status}"} ${n}`)
    lines.push('# HELP metering_http_request_duration_seconds Time from request to answer.', '# TYPE metering_http_request_duration_seconds histogram')
    for (const [route, entry] of this.routes) lines.push(...entry.latency.lines('metering_http_request_duration_seconds', `route="${route}"`))
    lines.push('# HELP metering_redis_script_seconds Round trip of Lua script calls, summed.', '# TYPE metering_redis_script_seconds summary')
    for (const s of this.scripts)
      lines.push(
        `metering_redis_script_seconds_sum{script="${s.name}"} ${s.totalMs / 1000}`,
        `metering_redis_script_seconds_count{script="${s.name}"} ${s.calls}`,
      )
    return lines.join('\n') + '\n'
  }
}
