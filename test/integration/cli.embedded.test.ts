// The data team on the embedded defaults: a real gateway (`npm start`: src/bin/gateway.ts) with its
// own redis-server and chDB under a temp METERING_DATA_DIR, no REDIS_URL, no CLICKHOUSE_URL.
// chDB allows one process per data directory and the gateway's chDB child holds it, so the CLI
// finds the gateway by <dataDir>/gateway.url and runs `sql` and `invoices close` through its
// root-only routes; once the gateway has stopped (and removed the file), the CLI opens chDB itself.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { freePort } from '../../src/infra/redis/embedded.js'
import { REPO_ROOT, spawnNode, waitFor, waitForHttp, type NodeProcess } from '../support/processes.js'

const ROOT_KEY = 'cli-embedded-root-key-0123456789'
/** chDB's child, its migrations and the redis-server on 2 busy cores. */
const START_MS = 120_000

let dir: string
let dataDir: string
let gateway: NodeProcess
let url: string

/** The environment without any store of the test harness: the embedded defaults. */
function embeddedEnv(extra: Record<string, string> = {}): Record<string, string> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !e[0].startsWith('METERING_') && e[0] !== 'REDIS_URL' && !e[0].startsWith('CLICKHOUSE_'),
    ),
  )
  return { ...base, METERING_DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOG_PRETTY: '0', ...extra }
}

interface Run {
  code: number
  out: string
  err: string
}

function cli(extra: Record<string, string>, ...argv: string[]): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'src/bin/cli.ts'), ...argv], {
    cwd: REPO_ROOT,
    env: embeddedEnv(extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8')
  })
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString('utf8')
  })
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, out, err })))
}

async function ok<T = any>(extra: Record<string, string>, ...argv: string[]): Promise<T> {
  const run = await cli(extra, ...argv)
  expect(run.code, `${argv.join(' ')}\n${run.err}`).toBe(0)
  return JSON.parse(run.out) as T
}

async function post(route: string, body: unknown, key: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url + route, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  })
  return { status: res.status, body: await res.json() }
}

const withRoot = { METERING_ROOT_KEY: ROOT_KEY }

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'cli-embedded-'))
  dataDir = path.join(dir, 'data')
  const port = await freePort()
  url = `http://127.0.0.1:${port}`
  const env = embeddedEnv({ PORT: String(port), HOST: '127.0.0.1', METERING_ROOT_KEY: ROOT_KEY, METERING_INVOICE_INTERVAL_MS: '0', LOG_LEVEL: 'info' })
  gateway = spawnNode('gateway', 'src/bin/gateway.ts', env)
  await waitForHttp(gateway, `${url}/readyz`, START_MS)
}, START_MS + 10_000)

afterAll(async () => {
  await gateway?.kill('SIGKILL')
  await rm(dir, { recursive: true, force: true })
}, 30_000)

describe('npm run cli on the embedded defaults, while the gateway runs', () => {
  let projectId = ''
  let apiKey = ''
  const count = `SELECT count() AS n FROM usage_events FINAL WHERE project_id = '{p}'`

  test('the gateway publishes its URL in the data directory', async () => {
    expect((await readFile(path.join(dataDir, 'gateway.url'), 'utf8')).trim()).toBe(url)
  })

  test('sql reaches the gateway chDB: the events it drained, as the data team asks for them', async () => {
    // The CLI reaches the gateway's redis-server by <dataDir>/redis/url.
    ;({ projectId, apiKey } = await ok({}, 'project', 'create', '--name', 'embedded'))
    const batch = await post('/v1/usage/record-batch', { events: [1, 2, 3].map((i) => ({ customerId: 'acme', eventSlug: 'calls', id: `e-${i}` })) }, apiKey)
    expect(batch.status, JSON.stringify(batch.body)).toBe(200)
    const query = count.replace('{p}', projectId)
    await waitFor(
      'the gateway ingest worker stores the events in chDB',
      async () => {
        const res = await post('/v1/admin/sql', { query }, ROOT_KEY)
        return res.status === 200 && res.body.rows[0]?.n === '3'
      },
      60_000,
      { intervalMs: 100, detail: () => gateway.output() },
    )
    const run = await cli(withRoot, 'sql', query, '--format', 'json')
    expect(run.code, run.err).toBe(0)
    expect(run.out.trim()).toBe('{"n":"3"}')
    const table = await cli(withRoot, 'sql', `SELECT event_id FROM usage_events WHERE project_id = '${projectId}' ORDER BY event_id`, '--format', 'table')
    expect(table.out.trim().split('\n')).toEqual(['event_id', '--------', 'e-1', 'e-2', 'e-3', '(3 rows)'])
  })

  test('without the root key, the CLI says what it needs (exit 1)', async () => {
    const run = await cli({}, 'sql', 'SELECT 1')
    expect(run.code).toBe(1)
    expect(run.err).toContain('METERING_ROOT_KEY')
    expect(run.err).toContain(url)
  })

  test('a write is refused by the CLI, by the route, and by chDB itself; nothing changed', async () => {
    const query = count.replace('{p}', projectId)
    const refused = await cli(withRoot, 'sql', `ALTER TABLE usage_events DELETE WHERE project_id = '${projectId}'`)
    expect(refused.code).toBe(1)
    expect(refused.err).toContain('not_read_only')
    // The route checks on its own (a client other than the CLI)...
    const route = await post('/v1/admin/sql', { query: `TRUNCATE TABLE usage_events` }, ROOT_KEY)
    expect(route.status).toBe(400)
    expect(route.body.error.details.reason).toBe('not_read_only')
    // ...and what passes the check runs with readonly = 1: chDB refuses the table function.
    const engine = await cli(withRoot, 'sql', "SELECT * FROM url('http://127.0.0.1:9/x', 'LineAsString')")
    expect(engine.code).toBe(1)
    expect(engine.err).toContain('not_read_only')
    expect(engine.err).toMatch(/readonly/i)
    // A project key is not the root key.
    expect((await post('/v1/admin/sql', { query }, apiKey)).status).toBe(403)
    expect((await post('/v1/admin/sql', { query }, ROOT_KEY)).body.rows).toEqual([{ n: '3' }])
  })

  test('invoices close goes through the gateway; list and show read its Redis', async () => {
    const now = new Date()
    const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)
    const document = path.join(dir, 'catalog.json')
    await writeFile(
      document,
      JSON.stringify({
        features: [{ slug: 'calls', title: 'Calls', unitOfMeasure: 'calls' }],
        plans: [{ slug: 'basic', title: 'Basic' }],
        planVersions: [
          {
            plan: 'basic',
            version: 1,
            status: 'published',
            title: 'Basic',
            currency: 'USD',
            whenToBill: 'pay_in_arrear',
            billingConfig: { billingInterval: 'month' },
            features: [{ featureSlug: 'calls', featureType: 'flat', config: { price: '25' } }],
          },
        ],
        customers: [{ id: 'acme' }],
        subscriptions: [{ id: 'sub-acme', customerId: 'acme', phases: [{ plan: 'basic', version: 1, startAt: start }] }],
      }),
    )
    await ok({}, 'apply', document, '--project', projectId)
    const closed = await ok<{ created: string[]; errors: unknown[] }>(withRoot, 'invoices', 'close', '--project', projectId)
    expect(closed).toMatchObject({ created: [expect.stringMatching(/^inv_/)], errors: [] })
    const listed = await ok<{ invoices: { id: string; statement_start_at: number }[] }>({}, 'invoices', 'list', '--project', projectId)
    expect(listed.invoices.map((i) => [i.id, i.statement_start_at])).toEqual([[closed.created[0], start]])
    const shown = await ok<{ invoice: { id: string; currency: string } }>({}, 'invoices', 'show', closed.created[0]!, '--project', projectId)
    expect(shown.invoice).toMatchObject({ id: closed.created[0], currency: 'USD' })
  })
})

describe('after the gateway stops', () => {
  test('its URL file is gone and the CLI opens chDB itself: the same rows', async () => {
    await gateway.kill('SIGTERM')
    expect((await gateway.exited).code, gateway.output()).toBe(0)
    expect(existsSync(path.join(dataDir, 'gateway.url'))).toBe(false)
    const run = await cli({}, 'sql', "SELECT count() AS n FROM usage_events FINAL WHERE event_id IN ('e-1', 'e-2', 'e-3')", '--format', 'json')
    expect(run.code, run.err).toBe(0)
    expect(run.out.trim()).toBe('{"n":"3"}')
  }, 60_000)
})
