// ops/grafana/metering.json against the code: every metering_* name its queries use is a
// family the gateway's /metrics exposes (a histogram's _bucket/_sum/_count included), and each
// topic an operator looks for has a panel.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { Redis } from 'ioredis'
import { describe, expect, test } from 'vitest'
import { Metrics } from '../../src/http/metrics.js'
import { REPO_ROOT } from '../support/processes.js'

const dashboard = JSON.parse(readFileSync(path.join(REPO_ROOT, 'ops/grafana/metering.json'), 'utf8'))

/** Every PromQL text of the dashboard: panel targets and template variable queries. */
function queries(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) queries(item, out)
  else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if ((key === 'expr' || key === 'definition') && typeof value === 'string') out.push(value)
      else if (key === 'query' && typeof value === 'string' && value.includes('metering_')) out.push(value)
      else queries(value, out)
    }
  }
  return out
}

/** The sample names /metrics has for each registered family (a histogram's three, a summary's two). */
async function exposedNames(): Promise<Set<string>> {
  // The scrape-time families need a Redis to read at scrape time, not to be registered: this
  // client is never connected (nothing is scraped here).
  const redis = new Redis({ lazyConnect: true })
  const metrics = new Metrics()
  metrics.watch(redis, { ingest: 'usage-events', deadLetter: 'usage-dlq', notifications: 'notifications', deliveries: 'webhook-deliveries' })
  try {
    const names = new Set<string>()
    // Custom families (src/http/metrics.ts) are registered beside prom-client's own: read both the same way.
    for (const { name, type } of metrics.registry.getMetricsAsArray() as unknown as { name: string; type: string }[]) {
      names.add(name)
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix)
      if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix)
    }
    return names
  } finally {
    await metrics.close()
    redis.disconnect()
  }
}

describe('the Grafana dashboard', () => {
  const used = [...new Set(queries(dashboard).flatMap((q) => q.match(/\bmetering_[a-zA-Z0-9_]+/g) ?? []))].sort()

  test('every metric name its queries use is one /metrics exposes', async () => {
    expect(used.length).toBeGreaterThan(15)
    const exposed = await exposedNames()
    expect(used.filter((name) => !exposed.has(name))).toEqual([])
  })

  test('it charts what an operator expects', () => {
    for (const family of [
      'metering_http_requests_total',
      'metering_http_request_duration_seconds_bucket',
      'metering_redis_script_duration_seconds_bucket',
      'metering_queue_jobs',
      'metering_queue_oldest_waiting_age_seconds',
      'metering_dead_letters',
      'metering_journal_backlog_entries',
      'metering_clickhouse_insert_rows_total',
      'metering_clickhouse_insert_errors_total',
      'metering_webhook_deliveries_total',
      'metering_nodejs_eventloop_lag_p99_seconds',
      'metering_process_resident_memory_bytes',
    ])
      expect(used).toContain(family)
    const exprs = queries(dashboard).join('\n')
    expect(exprs).toContain('histogram_quantile(0.99, sum by (route, le) (rate(metering_http_request_duration_seconds_bucket')
    expect(exprs).toContain('histogram_quantile(0.99, sum by (script, le) (rate(metering_redis_script_duration_seconds_bucket')
  })

  test('every panel queries the dashboard data source, ids are unique, panels do not overlap', () => {
    const panels = dashboard.panels as { id: number; type: string; datasource?: { uid: string }; gridPos: { x: number; y: number; w: number; h: number } }[]
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length)
    for (const p of panels.filter((p) => p.type !== 'row')) expect(p.datasource?.uid).toBe(`\${datasource}`)
    const cells = new Set<string>()
    for (const { gridPos: g } of panels)
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `overlap at ${x},${y}`).toBe(false)
          cells.add(`${x},${y}`)
        }
  })
})
