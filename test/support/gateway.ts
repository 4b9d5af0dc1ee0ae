// A real gateway (uWS on a free port) over the shared test Redis, with a clock the test moves.
import { pino } from 'pino'
import { inject } from 'vitest'
import { manualClock } from '../../src/kernel/clock.js'
import { loadConfig, type Config } from '../../src/kernel/config.js'
import type { EventOptions } from '../../src/events/options.js'
import { startGateway, type Gateway } from '../../src/bin/gateway.js'

export const ROOT_KEY = 'test-root-key-0123456789'

export interface TestGateway extends Gateway {
  url: string
  clock: ReturnType<typeof manualClock>
  /** POST a JSON body (or a raw string) with an optional bearer key. */
  post(path: string, body: unknown, key?: string, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>
  get(path: string, key?: string): Promise<{ status: number; body: any; headers: Headers }>
  /** A new project; its key has every scope. */
  project(): Promise<{ projectId: string; apiKey: string; keyId: string }>
}

export interface TestGatewayOptions extends Partial<Config> {
  /**
   * 'off' (default): no ClickHouse store and no ingest worker, so suites that do not need the
   * history fork no chDB child. 'on': the config's store (give `clickhouseUrl` and a throwaway
   * `clickhouseDatabase`) and, unless `ingestWorker: false`, the in-process ingest worker.
   */
  clickhouse?: 'on' | 'off'
  /** Ingestion options (e.g. a queue of the test's own: other suites share the test Redis). */
  events?: Partial<EventOptions>
  /** With `journalIntervalMs`: the outbox lists its journal worker drains (src/journal/keys.ts projectJournalPatterns). */
  journalMatch?: string | string[]
}

export async function startTestGateway(options: TestGatewayOptions = {}, startMs = Date.UTC(2025, 0, 15, 12, 0, 0)): Promise<TestGateway> {
  const { clickhouse = 'off', events, journalMatch, ...overrides } = options
  const clock = manualClock(startMs)
  const config: Config = {
    ...loadConfig({}),
    port: 0,
    host: '127.0.0.1',
    redisUrl: inject('redisUrl'),
    rootKey: ROOT_KEY,
    // The shared test Redis serves every suite at once on 2 cores: a slow moment there is not
    // what these tests are about (test/faults/unavailable.test.ts tests the timeout).
    redisTimeoutMs: 5_000,
    sweepIntervalMs: 0,
    // Off unless a test asks: the test Redis is shared, and a gateway's journal worker would
    // drain other suites' outbox lists into its own throwaway database.
    journalIntervalMs: 0,
    // Off too: an invoice worker would close other suites' cycles (every project of the shared Redis) at its own clock.
    invoiceIntervalMs: 0,
    logLevel: 'silent',
    prettyLogs: false,
    ...overrides,
  }
  const gateway = await startGateway(config, {
    clock,
    logger: pino({ level: 'silent' }),
    clickhouse,
    ...(events ? { events } : {}),
    ...(journalMatch ? { journalMatch } : {}),
  })
  const url = `http://127.0.0.1:${gateway.port}`
  const call = async (method: string, path: string, body: unknown, key?: string, headers: Record<string, string> = {}) => {
    const init: RequestInit = { method, headers: { ...headers } }
    if (key !== undefined) (init.headers as Record<string, string>).authorization = `Bearer ${key}`
    if (method === 'POST') {
      ;(init.headers as Record<string, string>)['content-type'] ??= 'application/json'
      init.body = typeof body === 'string' ? body : JSON.stringify(body)
    }
    const res = await fetch(url + path, init)
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as any, headers: res.headers }
  }
  const testGateway: TestGateway = {
    ...gateway,
    url,
    clock,
    post: (path, body, key, headers) => call('POST', path, body, key, headers),
    get: (path, key) => call('GET', path, undefined, key),
    async project() {
      const res = await call('POST', '/v1/projects/create', { name: 'test' }, ROOT_KEY)
      if (res.status !== 200) throw new Error(`project create failed: ${JSON.stringify(res.body)}`)
      return res.body
    },
  }
  return testGateway
}
