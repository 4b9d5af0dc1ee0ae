// Script time alone: the budget scripts called with FCALL on one real redis-server, no gateway,
// no load generator. Two source trees (A and B, e.g. this one and a pristine copy) each load
// their own Function library (the names carry a hash of the text, so both live in one server)
// and their own budgets; rounds alternate A and B and read `usec_per_call` of FCALL from INFO
// commandstats (reset before each round), so both sides see the same server and the same noise.
//
//   npx tsx bench/lib/scriptBench.ts [--a <root>] [--b <root>] [--op authorize|charge|settle|get]
//                                    [--calls n] [--rounds n] [--limits n] [--budgets n]
//
// --b defaults to $B_ROOT (none: A alone); a comma list of roots compares more (B, C, …). Each round makes `calls` calls, 64 in flight. The
// median round of each side is printed, with every round, and the machine's other CPU load.

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { startRedisServer } from '../../src/infra/redis/embedded.js'
import { procCpuUs, systemBusyUs } from './proc.js'

type Op = 'authorize' | 'charge' | 'settle' | 'get'

interface Side {
  name: string
  root: string
  store: StoreModule
  tags: string[]
  /** Open holds left by authorizes, for settle rounds. */
  holds: { tag: string; id: string }[]
}

interface StoreModule {
  upsertBudget(r: Redis, tag: string, now: number, retention: number, config: unknown): Promise<{ status: string }>
  authorizeHold(r: Redis, tag: string, now: number, ret: number, amount: bigint, ttl: number | undefined, key: string): Promise<{ status: string; s: string[] }>
  chargeBudget(r: Redis, tag: string, now: number, ret: number, amount: bigint, mode: 'charge' | 'record', key: string): Promise<{ status: string }>
  closeHold(r: Redis, tag: string, now: number, ret: number, id: string, action: 'settle' | 'release', usage: bigint): Promise<{ status: string }>
  getBudget(r: Redis, tag: string, now: number, ret: number): Promise<{ status: string }>
}

const RETENTION_MS = 86_400_000
const IN_FLIGHT = 64

function arg(name: string, fallback: string | undefined): string | undefined {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : fallback
}

async function loadSide(name: string, root: string, redis: Redis, budgets: number, limits: number): Promise<Side> {
  const store = (await import(path.join(path.resolve(root), 'src/budgets/redis.ts'))) as StoreModule
  const windows = ['hour', 'day', 'month', 'week', 'never']
  const config = {
    unit: 'USD',
    defaultTtlMs: 600_000,
    maxTtlMs: 3_600_000,
    closesAt: null,
    limits: Array.from({ length: limits }, (_, i) => ({ id: `l${i}`, window: windows[i % 5], enforce: 'hard', amount: 10n ** 30n })),
  }
  const tags = Array.from({ length: budgets }, (_, i) => `{sb${name}/bench-${i}}`)
  for (const tag of tags) {
    const snap = await store.upsertBudget(redis, tag, Date.now(), RETENTION_MS, config)
    if (snap.status !== 'created' && snap.status !== 'updated') throw new Error(`${name}: upsert answered ${snap.status}`)
  }
  return { name, root, store, tags, holds: [] }
}

let seq = 0
function call(side: Side, redis: Redis, op: Op, i: number): Promise<unknown> {
  const tag = side.tags[i % side.tags.length]!
  const now = Date.now()
  if (op === 'charge') return side.store.chargeBudget(redis, tag, now, RETENTION_MS, 25_000_000n, 'charge', `c-${++seq}`)
  if (op === 'get') return side.store.getBudget(redis, tag, now, RETENTION_MS)
  if (op === 'settle') {
    const hold = side.holds.pop()
    if (!hold) throw new Error('no hold left to settle')
    return side.store.closeHold(redis, hold.tag, now, RETENTION_MS, hold.id, 'settle', 20_000_000n)
  }
  return side.store.authorizeHold(redis, tag, now, RETENTION_MS, 25_000_000n, undefined, `a-${++seq}`).then((snap) => {
    if (snap.status !== 'ok') throw new Error(`${side.name}: authorize answered ${snap.status}`)
    side.holds.push({ tag, id: snap.s[0]! })
  })
}

/** `calls` calls with IN_FLIGHT in flight; returns FCALL µs per call from commandstats. */
async function round(side: Side, redis: Redis, admin: Redis, op: Op, calls: number): Promise<number> {
  await admin.config('RESETSTAT')
  let next = 0
  const worker = async () => {
    while (next < calls) await call(side, redis, op, next++)
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  const stats = await admin.info('commandstats')
  const m = /cmdstat_fcall:calls=(\d+),usec=(\d+)/.exec(stats)
  if (!m) throw new Error('no FCALL in commandstats')
  return Number(m[2]) / Number(m[1])
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function main(): Promise<void> {
  const op = (arg('op', 'authorize') ?? 'authorize') as Op
  const calls = Number(arg('calls', '20000'))
  const rounds = Number(arg('rounds', '6'))
  const limits = Number(arg('limits', '3'))
  const budgets = Number(arg('budgets', '64'))
  const roots = [arg('a', process.cwd())!, ...(arg('b', process.env.B_ROOT) ?? '').split(',').filter((r) => r !== '')]
  const dir = mkdtempSync(path.join(tmpdir(), 'scriptbench-'))
  const server = await startRedisServer({ dataDir: dir, appendOnly: false, extraArgs: ['--save', ''] })
  const redis = new Redis(server.url)
  const admin = new Redis(server.url)
  try {
    const sides: Side[] = []
    for (const [i, root] of roots.entries()) sides.push(await loadSide(String.fromCharCode(65 + i), root, redis, budgets, limits))
    // Settle rounds settle what a preceding authorize round (not measured) left open.
    const results = new Map<string, number[]>(sides.map((s) => [s.name, []]))
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse()
      for (const side of order) {
        if (op === 'settle') await round(side, redis, admin, 'authorize', calls)
        const cpu0 = procCpuUs(server.pid)
        const busy0 = systemBusyUs()
        const self0 = process.cpuUsage()
        const started = performance.now()
        const usec = await round(side, redis, admin, op, calls)
        const wallUs = (performance.now() - started) * 1000
        const redisCpu = procCpuUs(server.pid) - cpu0
        const self = process.cpuUsage(self0)
        const other = Math.max(0, systemBusyUs() - busy0 - redisCpu - self.user - self.system)
        results.get(side.name)!.push(usec)
        console.log(
          `round ${r + 1} ${side.name} ${op}: ${usec.toFixed(2)} µs/FCALL, ${(calls / (wallUs / 1e6)).toFixed(0)} calls/s, other CPU ${((other / wallUs) * 100).toFixed(0)}%`,
        )
      }
    }
    for (const side of sides) {
      const xs = results.get(side.name)!
      console.log(
        `${side.name} (${side.root}) ${op}, ${limits} limits: median ${median(xs).toFixed(2)} µs/FCALL, rounds ${xs.map((x) => x.toFixed(1)).join(' ')}`,
      )
    }
  } finally {
    redis.disconnect()
    admin.disconnect()
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
