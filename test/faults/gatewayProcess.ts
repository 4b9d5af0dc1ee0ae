// A gateway as users run it (`npm start`: src/bin/gateway.ts) with its embedded redis-server,
// for the fault tests that stall, kill and stop it. ClickHouse is the shared test server, in a
// throwaway database.
import { randomBytes } from 'node:crypto'
import { readFile, rm } from 'node:fs/promises'
import { mkdtemp } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { inject } from 'vitest'
import { freePort } from '../../src/infra/redis/embedded.js'
import { spawnNode, waitFor, waitForHttp, type NodeProcess } from '../support/processes.js'

export const ROOT_KEY = 'faults-root-key-0123456789'
const READY_MS = 30_000

export interface Answer {
  status: number
  body: any
  headers: Headers
  ms: number
}

export class GatewayProcess {
  readonly database = `test_faults_${randomBytes(6).toString('hex')}`
  dir = ''
  port = 0
  proc!: NodeProcess
  apiKey = ''

  constructor(private readonly env: Record<string, string> = {}) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    this.dir ||= await mkdtemp(path.join(os.tmpdir(), 'metering-faults-'))
    this.port ||= await freePort()
    this.proc = spawnNode('gateway', 'src/bin/gateway.ts', {
      PORT: String(this.port),
      HOST: '127.0.0.1',
      METERING_DATA_DIR: path.join(this.dir, 'data'),
      CLICKHOUSE_URL: inject('clickhouseUrl'),
      CLICKHOUSE_DATABASE: this.database,
      METERING_ROOT_KEY: ROOT_KEY,
      METERING_INGEST_WORKER: '0',
      METERING_JOURNAL_INTERVAL_MS: '0',
      METERING_INVOICE_INTERVAL_MS: '0',
      LOG_LEVEL: 'info',
      LOG_PRETTY: '0',
      ...this.env,
    })
    await waitForHttp(this.proc, `${this.url}/readyz`, READY_MS)
  }

  /** The pid of the embedded redis-server now running (it changes when the gateway restarts it). */
  async redisPid(): Promise<number> {
    const url = (await readFile(path.join(this.dir, 'data', 'redis', 'url'), 'utf8')).trim()
    const probe = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
    try {
      await probe.connect()
      const info = await probe.info('server')
      return Number(/process_id:(\d+)/.exec(info)![1])
    } finally {
      probe.disconnect()
    }
  }

  async call(route: string, body: unknown, key: string = this.apiKey, timeoutMs = 10_000): Promise<Answer> {
    const started = performance.now()
    const res = await fetch(this.url + route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers, ms: performance.now() - started }
  }

  async get(route: string): Promise<Answer> {
    const started = performance.now()
    const res = await fetch(this.url + route, { signal: AbortSignal.timeout(10_000) })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers, ms: performance.now() - started }
  }

  /** A project, its key, and a budget `key` with a hard never-window limit of `amount`. */
  async setUp(budget: string, amount: string): Promise<void> {
    const project = await this.call('/v1/projects/create', { name: 'faults' }, ROOT_KEY)
    if (project.status !== 200) throw new Error(`project: ${JSON.stringify(project.body)}`)
    this.apiKey = project.body.apiKey
    const up = await this.call('/v1/budgets/upsert', {
      key: budget,
      limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount }],
      holds: { defaultTtlMs: 3_600_000, maxTtlMs: 3_600_000 },
    })
    if (up.status !== 200) throw new Error(`budget: ${JSON.stringify(up.body)}`)
  }

  /** Waits until /readyz answers `status`. */
  async readyzIs(status: number, timeoutMs = 20_000): Promise<Answer> {
    return waitFor(
      `/readyz to answer ${status}`,
      async () => {
        const r = await this.get('/readyz')
        return r.status === status ? r : undefined
      },
      timeoutMs,
      { detail: () => this.proc.output() },
    )
  }

  async cleanUp(extraPids: number[] = []): Promise<void> {
    for (const pid of extraPids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    await this.proc?.kill('SIGKILL')
    if (this.dir) await rm(this.dir, { recursive: true, force: true })
  }
}
