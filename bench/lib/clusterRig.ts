// The processes of one cluster-bench leg: N gateways (src/bin/gateway.ts) and M workers
// (src/bin/worker.ts) against one Redis Cluster and one clickhouse-server database, plus the
// project and budgets the load runs on, each budget's key chosen so the budgets spread evenly
// over the masters.

import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { parseAmount } from '../../src/kernel/money.js'
import type { BenchCluster } from './clusterRedis.js'
import { freePort, spawnTs, waitForHttp200, waitForLine, type Child } from './proc.js'

const JSON_HEADERS = { 'content-type': 'application/json' }

export interface Rig {
  urls: string[]
  rootKey: string
  gateways: Child[]
  workers: Child[]
}

export interface Answer {
  status: number
  body: any
}

/** POST a JSON body with a bearer key; the answer parsed (never throws on a status). */
export async function call(base: string, route: string, key: string, body: unknown): Promise<Answer> {
  const res = await fetch(base + route, {
    method: 'POST',
    headers: { ...JSON_HEADERS, authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

/** `call`, failing on anything but 200. */
export async function post(base: string, route: string, key: string, body: unknown): Promise<any> {
  const a = await call(base, route, key, body)
  if (a.status !== 200) throw new Error(`POST ${route} → ${a.status}: ${JSON.stringify(a.body).slice(0, 300)}`)
  return a.body
}

/** Runs `fn` over `items`, at most `width` at a time. */
export async function pool<T, R>(items: T[], width: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await fn(items[i]!, i)
      }
    }),
  )
  return out
}

/**
 * Gateway 0 first (it runs the ClickHouse migrations; several processes creating the same
 * tables at once is not what is measured here), then the other gateways and the workers.
 * Gateways run only the hot path: no in-process ingest, journal, invoice, sweep nor delivery;
 * that is the workers' part, as in a scaled-out deployment.
 */
export async function startRig(cluster: BenchCluster, chUrl: string, database: string, dir: string, gateways: number, workers: number): Promise<Rig> {
  const rootKey = randomBytes(24).toString('hex')
  const common = { REDIS_URL: cluster.url, CLICKHOUSE_URL: chUrl, CLICKHOUSE_DATABASE: database, LOG_PRETTY: '0' }
  const startGateway = async (i: number): Promise<[Child, string]> => {
    const port = await freePort()
    const child = spawnTs(`gateway-${i}`, 'src/bin/gateway.ts', {
      ...common,
      PORT: String(port),
      HOST: '127.0.0.1',
      METERING_ROOT_KEY: rootKey,
      METERING_DATA_DIR: path.join(dir, `gateway-${i}`),
      LOG_LEVEL: 'warn',
      METERING_INGEST_WORKER: '0',
      METERING_JOURNAL_INTERVAL_MS: '0',
      METERING_INVOICE_INTERVAL_MS: '0',
      METERING_SWEEP_MS: '0',
      METERING_NOTIFICATIONS_WORKER: '0',
    })
    const url = `http://127.0.0.1:${port}`
    await waitForHttp200(child, `${url}/readyz`, 120_000)
    return [child, url]
  }
  const startWorker = async (i: number): Promise<Child> => {
    const child = spawnTs(`worker-${i}`, 'src/bin/worker.ts', { ...common, METERING_DATA_DIR: path.join(dir, `worker-${i}`), LOG_LEVEL: 'info' })
    await waitForLine(child, 'metering worker running', 120_000)
    return child
  }
  const first = await startGateway(0)
  const [rest, ws] = await Promise.all([
    Promise.all(Array.from({ length: gateways - 1 }, (_, i) => startGateway(i + 1))),
    Promise.all(Array.from({ length: workers }, (_, i) => startWorker(i))),
  ])
  const all = [first, ...rest]
  return { urls: all.map(([, u]) => u), rootKey, gateways: all.map(([c]) => c), workers: ws }
}

export const AMOUNT = '0.25'
/** Never reached in a bench run (0.25 per authorize). */
const WIDE = '100000000000'
/** Every TIGHT_EVERY-th budget has limits a few seconds of load pass: its 402s make the limit check bite. */
const TIGHT_EVERY = 8
const TIGHT = { hour: '5', day: '7.5', month: '10' } as const

export interface Budgets {
  projectId: string
  apiKey: string
  /** Budget keys per master (index = master). */
  byMaster: string[][]
  tight: Set<string>
}

/** The budget keys with `perMaster` on each master (CLUSTER KEYSLOT of their hash tag). */
async function keysByMaster(cluster: BenchCluster, projectId: string, perMaster: number): Promise<string[][]> {
  const byMaster: string[][] = cluster.masters.map(() => [])
  for (let start = 0; byMaster.some((k) => k.length < perMaster); start += 256) {
    const keys = Array.from({ length: 256 }, (_, i) => `b${start + i}`)
    // The budget's hash tag (src/budgets/keys.ts budgetTag): the slot of all its keys.
    const owners = await cluster.mastersOf(keys.map((k) => `{${projectId}/${k}}`))
    keys.forEach((k, i) => {
      const list = byMaster[owners[i]!]!
      if (list.length < perMaster) list.push(k)
    })
  }
  return byMaster
}

/** A project and `perMaster` budgets on every master, each with hard hour, day and month limits. */
export async function setUpBudgets(rig: Rig, cluster: BenchCluster, perMaster: number): Promise<Budgets> {
  const project = await post(rig.urls[0]!, '/v1/projects/create', rig.rootKey, { name: 'bench-cluster' })
  const byMaster = await keysByMaster(cluster, project.projectId, perMaster)
  const all = byMaster.flat()
  const tight = new Set(all.filter((_, i) => i % TIGHT_EVERY === 0))
  await pool(all, 16, (key, i) =>
    post(rig.urls[i % rig.urls.length]!, '/v1/budgets/upsert', project.apiKey, {
      key,
      limits: (['hour', 'day', 'month'] as const).map((w) => ({ id: w, window: w, enforce: 'hard', amount: tight.has(key) ? TIGHT[w] : WIDE })),
      holds: { defaultTtlMs: 600_000, maxTtlMs: 3_600_000 },
    }),
  )
  // One authorize by hand through every gateway: a contract mismatch fails here, readably.
  for (const [i, url] of rig.urls.entries()) {
    const probe = await post(url, '/v1/budgets/authorize', project.apiKey, { key: byMaster[0]![1]!, amount: AMOUNT, idempotencyKey: `probe-${i}` })
    if (!probe.allowed || !probe.holdId) throw new Error(`probe authorize not allowed: ${JSON.stringify(probe)}`)
  }
  for (const url of rig.urls) {
    const ready = await fetch(`${url}/readyz`)
    if (ready.status !== 200) throw new Error(`${url}/readyz after the probes: ${ready.status} ${await ready.text()}`)
  }
  return { projectId: project.projectId, apiKey: project.apiKey, byMaster, tight }
}

/** A decimal amount of the API (signed) as units of 10⁻⁸. */
export function units(text: string): bigint {
  const neg = text.startsWith('-')
  const u = parseAmount(neg ? text.slice(1) : text)
  if (u === undefined) throw new Error(`not an amount: ${text}`)
  return neg ? -u : u
}

export interface BudgetCheck {
  budgets: number
  hardLimits: number
  /** Hard limits whose consumed + held passed their amount. */
  violations: string[]
  /** Tight budgets that reached their limit (less than one authorize left): the check had something to catch. */
  tightFull: number
}

/** Reads every budget back through the gateways (round robin) and checks consumed + held ≤ amount on every hard limit. */
export async function checkBudgets(rig: Rig, b: Budgets): Promise<BudgetCheck> {
  const keys = b.byMaster.flat()
  const got = await pool(keys, 16, (key, i) => post(rig.urls[i % rig.urls.length]!, '/v1/budgets/get', b.apiKey, { key }))
  const check: BudgetCheck = { budgets: keys.length, hardLimits: 0, violations: [], tightFull: 0 }
  got.forEach((budget, i) => {
    for (const l of budget.balance.limits as { id: string; enforce: string; amount: string; consumed: string; held: string }[]) {
      if (l.enforce !== 'hard') continue
      check.hardLimits++
      if (units(l.consumed) + units(l.held) > units(l.amount)) check.violations.push(`${keys[i]}/${l.id}: ${l.consumed} + ${l.held} > ${l.amount}`)
    }
    if (b.tight.has(keys[i]!) && units(budget.balance.remaining) < units(AMOUNT)) check.tightFull++
  })
  return check
}
