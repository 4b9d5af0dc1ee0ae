// Scale-out on real engines (issue 11): 2 gateway processes and 2 worker processes
// (src/bin/gateway.ts, src/bin/worker.ts) on one 3-master Redis Cluster and one ClickHouse
// database, under concurrent load through both gateways.
//
// The cluster is this file's own (test/support/cluster.ts), not the globalSetup's shared one: a
// worker process sweeps expired holds and runs and drains journal outboxes of every project on
// its Redis, by the real clock, and would expire or drain what other test files keep on the
// shared cluster under their manual clocks.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Queue } from 'bullmq'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { INGEST_QUEUE, QUEUE_PREFIX } from '../../src/events/queue.js'
import { eventIdOf } from '../../src/events/service.js'
import { freePort } from '../../src/infra/redis/embedded.js'
import { projectTag } from '../../src/infra/redis/keys.js'
import { formatUnits, parseAmount } from '../../src/kernel/money.js'
import { startRedisCluster, type RedisClusterHandle } from '../support/cluster.js'
import { spawnNode, waitFor, waitForHttp, waitForOutput, type NodeProcess } from '../support/processes.js'
import { prng } from '../support/prng.js'
import { openTestStore, type TestStore } from '../support/store.js'

const ROOT_KEY = `scale-root-${randomBytes(8).toString('hex')}`
const START_MS = 90_000

interface Gw {
  proc: NodeProcess
  url: string
}
interface Answer {
  status: number
  body: any
}

let dir = ''
let cluster: RedisClusterHandle | undefined
let store: TestStore | undefined
let admins: Redis[] = []
let slotRanges: { from: number; to: number; master: number }[] = []
const gateways: Gw[] = []
const workers: NodeProcess[] = []
const database = `test_scale_${randomBytes(6).toString('hex')}`

async function call(g: Gw, route: string, key: string, body: unknown): Promise<Answer> {
  const res = await fetch(g.url + route, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

async function ok(g: Gw, route: string, key: string, body: unknown): Promise<any> {
  const a = await call(g, route, key, body)
  if (a.status !== 200) throw new Error(`${route} → ${a.status} ${JSON.stringify(a.body)}`)
  return a.body
}

/** The master (index into admins) owning each hash tag's slot. */
async function mastersOf(tags: string[]): Promise<number[]> {
  const slots = await Promise.all(tags.map((t) => admins[0]!.call('CLUSTER', 'KEYSLOT', t) as Promise<number>))
  return slots.map((s) => slotRanges.find((r) => s >= r.from && s <= r.to)!.master)
}

function env(): Record<string, string> {
  const url = `redis+cluster://${cluster!.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`
  return { REDIS_URL: url, CLICKHOUSE_URL: inject('clickhouseUrl'), CLICKHOUSE_DATABASE: database, LOG_PRETTY: '0' }
}

async function startGateway(i: number): Promise<void> {
  const port = await freePort()
  const proc = spawnNode(`gateway-${i}`, 'src/bin/gateway.ts', {
    ...env(),
    PORT: String(port),
    HOST: '127.0.0.1',
    METERING_DATA_DIR: path.join(dir, `gateway-${i}`),
    METERING_ROOT_KEY: ROOT_KEY,
    LOG_LEVEL: 'warn',
    // The hot path only: ingest, journal, invoices, sweeps and delivery are the workers' part.
    METERING_INGEST_WORKER: '0',
    METERING_JOURNAL_INTERVAL_MS: '0',
    METERING_INVOICE_INTERVAL_MS: '0',
    METERING_SWEEP_MS: '0',
    METERING_NOTIFICATIONS_WORKER: '0',
    // An ingest job that fails (a ClickHouse insert timing out on a loaded machine) is retried
    // within seconds, not the default backoff's minutes: the drain below has a deadline.
    METERING_INGEST_BACKOFF_MS: '200',
  })
  gateways.push({ proc, url: `http://127.0.0.1:${port}` })
  // /readyz: the library is on every master (loadLibrary waits for the Cluster client to know them).
  await waitForHttp(proc, `http://127.0.0.1:${port}/readyz`, START_MS)
}

async function startWorker(i: number): Promise<void> {
  const proc = spawnNode(`worker-${i}`, 'src/bin/worker.ts', { ...env(), METERING_DATA_DIR: path.join(dir, `worker-${i}`), LOG_LEVEL: 'info' })
  workers.push(proc)
  await waitForOutput(proc, 'metering worker running', START_MS)
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'metering-scale-'))
  ;[cluster, store] = await Promise.all([startRedisCluster({ dataDir: path.join(dir, 'redis') }), openTestStore('server', database)])
  admins = cluster.nodes.map((n) => new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 1 }))
  const ports = cluster.nodes.map((n) => n.port)
  const slots = (await admins[0]!.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
  slotRanges = slots.map(([from, to, [, port]]) => ({ from, to, master: ports.indexOf(port) }))
  // Gateway 0 alone first: it runs the ClickHouse migrations the others then find done.
  await startGateway(0)
  await Promise.all([startGateway(1), startWorker(0), startWorker(1)])
}, 180_000)

afterAll(async () => {
  await Promise.all([...gateways.map((g) => g.proc.kill('SIGKILL')), ...workers.map((w) => w.kill('SIGKILL'))])
  for (const a of admins) a.disconnect()
  await cluster?.stop()
  await store?.close()
  if (dir) await rm(dir, { recursive: true, force: true })
})

const units = (s: string): bigint => (s.startsWith('-') ? -parseAmount(s.slice(1))! : parseAmount(s)!)

interface Limit {
  id: string
  enforce: string
  amount: string
  consumed: string
  held: string
}

/** Every hard limit of a balance: consumed + held ≤ amount. */
function expectWithinHardLimits(balance: { limits: Limit[] } | undefined, where: string): void {
  if (!balance?.limits?.length) throw new Error(`${where}: no balance in the answer`)
  for (const l of balance.limits) {
    if (l.enforce === 'hard' && units(l.consumed) + units(l.held) > units(l.amount)) {
      throw new Error(`${where}: ${l.id} consumed ${l.consumed} + held ${l.held} > ${l.amount}`)
    }
  }
}

/** A project, by the first gateway. */
async function newProject(g: Gw, name: string): Promise<{ projectId: string; apiKey: string }> {
  return ok(g, '/v1/projects/create', ROOT_KEY, { name })
}

interface Model {
  open: Map<string, bigint>
  consumed: bigint
  holdIds: Set<string>
}

const WINDOWS = ['hour', 'day', 'month'] as const
const AMOUNTS = ['0.25', '0.5', '1', '1.5']

/** One client: authorize (sometimes retried through the other gateway), then settle, release or leave the hold open. */
async function client(c: number, rand: () => number, apiKey: string, keys: string[], models: Map<string, Model>, tally: { ok: number; denied: number }) {
  for (let i = 0; i < 30; i++) {
    const g = gateways[(c + i) % 2]!
    const other = gateways[(c + i + 1) % 2]!
    const key = keys[Math.floor(rand() * keys.length)]!
    const model = models.get(key)!
    const body = { key, amount: AMOUNTS[Math.floor(rand() * AMOUNTS.length)]!, idempotencyKey: `a-${c}-${i}` }
    const a = await call(g, '/v1/budgets/authorize', apiKey, body)
    if (a.status === 402) {
      expect(a.body.error.code).toBe('BUDGET_EXCEEDED')
      expectWithinHardLimits(a.body.error.details.balance, `402 of ${key}`)
      tally.denied++
      continue
    }
    expect(a.status, JSON.stringify(a.body)).toBe(200)
    expect(a.body.replayed).toBe(false)
    expectWithinHardLimits(a.body.balance, `authorize of ${key}`)
    expect(model.holdIds.has(a.body.holdId), `${key}: ${a.body.holdId} answered twice`).toBe(false)
    model.holdIds.add(a.body.holdId)
    model.open.set(a.body.holdId, units(body.amount))
    tally.ok++
    if (rand() < 0.25) {
      const again = await ok(other, '/v1/budgets/authorize', apiKey, body)
      expect([again.replayed, again.holdId]).toEqual([true, a.body.holdId])
    }
    const r = rand()
    if (r < 0.45) {
      // Settle for a part of the hold, in hundredths (≤ the hold).
      const settled = (units(body.amount) * BigInt(Math.floor(rand() * 101))) / 100n
      const s = await ok(other, '/v1/budgets/settle', apiKey, { key, holdId: a.body.holdId, amount: formatUnits(settled) })
      expectWithinHardLimits(s.balance, `settle of ${key}`)
      model.open.delete(a.body.holdId)
      model.consumed += settled
    } else if (r < 0.75) {
      const s = await ok(g, '/v1/budgets/release', apiKey, { key, holdId: a.body.holdId })
      expectWithinHardLimits(s.balance, `release of ${key}`)
      model.open.delete(a.body.holdId)
    }
  }
}

describe('2 gateways and 2 workers on a 3-master Redis Cluster', () => {
  it('authorize, settle and release through both gateways never pass a hard limit; the budgets end as the answers say', async () => {
    const seed = Number(process.env.SCALE_SEED ?? Date.now() % 1_000_000)
    const project = await newProject(gateways[0]!, 'scale-budgets')
    // Three budgets on each master; each with hard hour, day and month limits, one of them tighter.
    const candidates = Array.from({ length: 64 }, (_, i) => `b${i}`)
    const owners = await mastersOf(candidates.map((k) => budgetTag(project.projectId, k)))
    const keys = [0, 1, 2].flatMap((m) => candidates.filter((_, i) => owners[i] === m).slice(0, 3))
    expect(keys).toHaveLength(9)
    for (const [j, key] of keys.entries()) {
      const limits = WINDOWS.map((w, k) => ({ id: w, window: w, enforce: 'hard', amount: k === j % 3 ? '3' : '4.5' }))
      await ok(gateways[j % 2]!, '/v1/budgets/upsert', project.apiKey, { key, limits, holds: { defaultTtlMs: 3_600_000, maxTtlMs: 3_600_000 } })
    }
    const models = new Map(keys.map((k) => [k, { open: new Map(), consumed: 0n, holdIds: new Set() } as Model]))
    const tally = { ok: 0, denied: 0 }
    const startedMs = Date.now()
    await Promise.all(Array.from({ length: 16 }, (_, c) => client(c, prng(seed + c + 1), project.apiKey, keys, models, tally))).catch((err: Error) => {
      throw new Error(`seed ${seed} (SCALE_SEED=${seed} replays it): ${err.message}`)
    })
    // 480 authorizes of 0.25–1.5 against 9 budgets of at most 3: most are refused.
    expect(tally.denied, `seed ${seed}`).toBeGreaterThan(100)
    expect(tally.ok, `seed ${seed}`).toBeGreaterThan(20)

    const sameHour = Math.floor(startedMs / 3_600_000) === Math.floor(Date.now() / 3_600_000)
    const sameDay = Math.floor(startedMs / 86_400_000) === Math.floor(Date.now() / 86_400_000)
    for (const [j, key] of keys.entries()) {
      const model = models.get(key)!
      const got = await ok(gateways[j % 2]!, '/v1/budgets/get', project.apiKey, { key })
      expectWithinHardLimits(got.balance, `final ${key}`)
      const held = [...model.open.values()].reduce((s, v) => s + v, 0n)
      expect(units(got.balance.held), `${key} held (seed ${seed})`).toBe(held)
      for (const l of got.balance.limits as Limit[]) {
        expect(units(l.held), `${key}/${l.id} held`).toBe(held)
        // A window that rolled over during the test restarted its count.
        if (l.id === 'month' || (l.id === 'day' && sameDay) || (l.id === 'hour' && sameHour))
          expect(units(l.consumed), `${key}/${l.id} consumed (seed ${seed})`).toBe(model.consumed)
      }
    }
    // Every budget's hash sits on the master its slot names, and every master holds three.
    const hashes = new Set(keys.map((k) => budgetKeys(budgetTag(project.projectId, k)).budget))
    const perMaster = await Promise.all(admins.map((a) => a.keys(`*${budgetTag(project.projectId, '*')}*`)))
    expect(perMaster.map((found) => found.filter((k) => hashes.has(k)).length)).toEqual([3, 3, 3])
  })

  it('record and record-batch, each sent twice at once through both gateways, reach ClickHouse exactly once', async () => {
    const projects: { projectId: string; apiKey: string; master: number }[] = []
    for (let i = 0; projects.length < 3 && i < 100; i++) {
      const p = await newProject(gateways[i % 2]!, `scale-usage-${i}`)
      const [master] = await mastersOf([projectTag(p.projectId)])
      if (!projects.some((x) => x.master === master)) projects.push({ ...p, master: master! })
    }
    expect(projects.map((p) => p.master).sort()).toEqual([0, 1, 2])
    const expected = new Map<string, Set<string>>()
    const requests: { project: (typeof projects)[number]; route: string; body: unknown }[] = []
    for (const project of projects) {
      const ids = new Set<string>()
      expected.set(project.projectId, ids)
      // An id, an idempotency key, or both (the key dedups; the id is the stored event_id).
      const event = (n: number) => {
        const e = n % 3 === 0 ? { id: `ev-${n}` } : n % 3 === 1 ? { idempotencyKey: `ik-${n}` } : { id: `evk-${n}`, idempotencyKey: `k-${n}` }
        ids.add(eventIdOf(project.projectId, e))
        return { ...e, customerId: `c-${n % 7}`, eventSlug: 'api_call', properties: { value: 1 } }
      }
      for (let b = 0; b < 4; b++)
        requests.push({ project, route: '/v1/usage/record-batch', body: { events: Array.from({ length: 100 }, (_, i) => event(b * 100 + i)) } })
      for (let s = 400; s < 440; s++) requests.push({ project, route: '/v1/usage/record', body: event(s) })
    }
    const answers = await Promise.all(
      requests.flatMap((r) => gateways.map((g) => call(g, r.route, r.project.apiKey, r.body).then((a) => ({ ...a, route: r.route })))),
    )
    for (const a of answers) {
      expect(a.status, JSON.stringify(a.body)).toBe(200)
      if (a.route.endsWith('batch')) expect((a.body.results as { accepted: boolean }[]).every((x) => x.accepted)).toBe(true)
      else expect(a.body).toEqual({ accepted: true })
    }

    const connection = new Cluster(cluster!.nodes)
    const queue = new Queue(INGEST_QUEUE, { connection, prefix: QUEUE_PREFIX })
    const q = async (sql: string): Promise<number> => Number(Object.values((await store!.store.query(sql))[0] ?? {})[0] ?? 0)
    const list = projects.map((p) => `'${p.projectId}'`).join(',')
    try {
      // Drained: every event queryable, and no job left that could insert one again.
      await waitFor(
        'the workers to drain every event',
        async () => {
          const distinct = await q(`SELECT count() FROM (SELECT DISTINCT project_id, event_id FROM usage_events WHERE project_id IN (${list}))`)
          const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')
          return distinct === 3 * 440 && Object.values(counts).every((c) => c === 0)
        },
        60_000,
        { intervalMs: 100 },
      )
    } finally {
      await queue.close()
      connection.disconnect()
    }
    for (const p of projects) {
      const rows = await store!.store.query<{ event_id: string }>(`SELECT event_id FROM usage_events WHERE project_id = '${p.projectId}'`)
      expect(rows.map((r) => r.event_id).sort()).toEqual([...expected.get(p.projectId)!].sort())
      // The materialized view counts every insert, so a duplicate shows even after a merge took it out of usage_events.
      expect(await q(`SELECT sum(event_count) FROM usage_daily WHERE project_id = '${p.projectId}'`)).toBe(440)
      // The project's ingestion keys (dedup claims, …) live on its master and on no other.
      const keysPerMaster = await Promise.all(admins.map((a) => a.keys(`*${projectTag(p.projectId)}*`)))
      expect(keysPerMaster.map((k, m) => (m === p.master ? k.length > 0 : k.length === 0))).toEqual([true, true, true])
    }
  })
})
