// One FCALL carrying a turn's script calls (src/infra/redis/multi.ts): the lean connection sends
// a turn's calls as one FCALL of the library's multi function, and each caller gets what its own
// FCALL would have given. Proved on a redis-server of the file's own (its stats, its FUNCTION
// FLUSH and its SIGSTOP touch no other suite): replies of every script a gateway workload makes,
// replayed through both paths on two databases holding the same data, are equal and leave equal
// keys; a sub-call's error fails that call only; a timeout, a closed connection and a library
// that went missing behave as with separate FCALLs.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isUnavailable } from '../../src/infra/availability.js'
import { closeRedis, connectRedis, type RedisClient } from '../../src/infra/redis/connection.js'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { LeanConnection, leanFor, leanTarget, MAX_BATCH } from '../../src/infra/redis/lean.js'
import { loadLibrary, MULTI_FUNCTION, Script } from '../../src/infra/redis/scripts.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'

const hit = new Script('hitRateLimit-1')

let tmp: string
let server: RedisServerHandle
let admin: Redis
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'multi-'))
  server = await startRedisServer({ dataDir: tmp, appendOnly: false })
  admin = new Redis(server.url)
  await loadLibrary(admin)
})
afterAll(async () => {
  await admin?.quit()
  await server?.stop()
  if (tmp) await rm(tmp, { recursive: true, force: true })
})

/** A lean connection to database `db` of the file's server, multi calls on or off. */
async function openLean(db: number, multi: boolean, timeoutMs = 5_000): Promise<LeanConnection> {
  const lean = new LeanConnection({ ...leanTarget(`${server.url}/${db}`, `test-multi-${db}`, timeoutMs)!, multi })
  lean.connect()
  await waitFor(`lean ${db} ready`, () => lean.ready)
  return lean
}

/** A reply with each error as its name and its message without the location Redis adds (" script: …"). */
function comparable(value: unknown): unknown {
  if (value instanceof Error) return { error: value.name, message: value.message.replace(/ script: .*$/, '') }
  return Array.isArray(value) ? value.map(comparable) : value
}

/** Every key of database `db`, with its type, its content (sorted where Redis keeps no order) and whether it expires. */
async function keyspace(db: number): Promise<Record<string, unknown>> {
  const redis = new Redis(`${server.url}/${db}`)
  try {
    const out: Record<string, unknown> = {}
    for (const key of ((await redis.keys('*')) as string[]).sort()) {
      const type = await redis.type(key)
      const expires = (await redis.pttl(key)) >= 0
      let value: unknown
      if (type === 'string') value = await redis.get(key)
      else if (type === 'hash') value = Object.entries(await redis.hgetall(key)).sort()
      else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES')
      else if (type === 'list') value = await redis.lrange(key, 0, -1)
      else if (type === 'set') value = (await redis.smembers(key)).sort()
      else if (type === 'stream') value = await redis.xrange(key, '-', '+')
      out[key] = { type, expires, value }
    }
    return out
  } finally {
    await redis.quit()
  }
}

interface Recorded {
  fn: string
  name: string
  keys: string[]
  args: (string | number)[]
}

/**
 * A gateway workload over most routes, on database 3, recording every script call it makes:
 * budgets (upsert, authorizes in bursts, settle, release, charge, record, get), a catalog, usage,
 * the wallet, runs, access, an invoice close.
 */
async function recordWorkload(): Promise<Recorded[]> {
  const recorded: Recorded[] = []
  const run = Script.prototype.run
  Script.prototype.run = function (this: Script, redis, keys, args) {
    recorded.push({ fn: this.functionName, name: this.name, keys: [...keys], args: [...args] })
    return run.call(this, redis, keys, args)
  }
  let gw: TestGateway | undefined
  try {
    gw = await startTestGateway({ redisUrl: `${server.url}/3` })
    await workload(gw)
  } finally {
    Script.prototype.run = run
    await gw?.close()
  }
  return recorded
}

async function workload(gw: TestGateway): Promise<void> {
  const { apiKey } = await gw.project()
  const ok = async (route: string, body: unknown): Promise<any> => {
    const res = await gw.post(route, body, apiKey)
    expect(res.status, `${route}: ${JSON.stringify(res.body)}`).toBeLessThan(500)
    return res.body
  }
  const customer = 'c-multi'
  await ok('/v1/config/apply', {
    features: [{ slug: 'calls', title: 'Calls', unitOfMeasure: 'calls' }],
    plans: [{ slug: 'p', title: 'P' }],
    planVersions: [
      {
        plan: 'p',
        version: 1,
        status: 'published',
        title: 'P',
        currency: 'USD',
        billingConfig: { billingInterval: 'month' },
        features: [{ featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 5 }],
      },
    ],
    customers: [{ id: customer }],
    subscriptions: [{ id: 'sub', customerId: customer, phases: [{ plan: 'p', version: 1, startAt: Date.UTC(2024, 0, 1) }] }],
    budgets: [{ key: 'b', limits: [{ id: 'total', window: 'never', enforce: 'hard', amount: '10' }] }],
  })
  await ok('/v1/budgets/upsert', { key: 'd', limits: [{ id: 'day', window: 'day', enforce: 'hard', amount: '7.5' }] })
  // Bursts: a turn's authorizes (some over the limit, some repeated idempotency keys) leave together.
  const holds = await Promise.all(
    Array.from({ length: 12 }, (_, i) => ok('/v1/budgets/authorize', { key: i % 2 ? 'b' : 'd', amount: '1.25', idempotencyKey: `a${i % 9}` })),
  )
  const held = holds.filter((h) => h.holdId).map((h, i) => ({ key: i % 2 ? 'b' : 'd', id: h.holdId as string }))
  await Promise.all(held.slice(0, 3).map((h) => ok('/v1/budgets/settle', { key: h.key, holdId: h.id, amount: '0.5' })))
  await Promise.all(held.slice(3, 5).map((h) => ok('/v1/budgets/release', { key: h.key, holdId: h.id })))
  await Promise.all([
    ok('/v1/budgets/charge', { key: 'b', amount: '3', idempotencyKey: 'c1' }),
    ok('/v1/budgets/record', { key: 'd', amount: '4', idempotencyKey: 'r1' }),
    ok('/v1/budgets/settle', { key: 'b', holdId: 'h_missing', amount: '1' }),
    ok('/v1/budgets/get', { key: 'b' }),
    ok('/v1/budgets/get', { key: 'nothing-here' }),
  ])
  await Promise.all([
    ok('/v1/wallet/top-up', { customerId: customer, amount: '10', idempotencyKey: 't1' }),
    ok('/v1/wallet/credits/grant', { customerId: customer, amount: '1', source: 'promo', idempotencyKey: 'g1' }),
    ok('/v1/access/update', { customerId: customer, updates: { customerUsageLimitReached: false } }),
    ok('/v1/entitlements/get', { customerId: customer }),
    ...Array.from({ length: 4 }, (_, i) =>
      ok('/v1/usage/record', { customerId: customer, eventSlug: 'calls', idempotencyKey: `u${i % 3}`, properties: { value: 2 } }),
    ),
  ])
  const started = await ok('/v1/runs/start', { customerId: customer, budgetAmountMinor: 500, idempotencyKey: 'run1', ttlMs: 3_600_000 })
  if (started.runId) {
    await Promise.all(Array.from({ length: 3 }, (_, i) => ok(`/v1/runs/consume/${started.runId}`, { featureSlug: 'calls', idempotencyKey: `k${i % 2}` })))
    await ok(`/v1/runs/end/${started.runId}`, { status: 'completed' })
  }
  await fetch(`${gw.url}/v1/wallet/balance?customerId=${customer}`, { headers: { authorization: `Bearer ${apiKey}` } })
  await ok('/v1/invoices/close', { customerId: customer })
}

describe('a turn of script calls in one FCALL', () => {
  let on: LeanConnection
  let off: LeanConnection
  beforeAll(async () => {
    on = await openLean(1, true)
    off = await openLean(2, false)
  })
  afterAll(() => {
    on?.close()
    off?.close()
  })

  it('leaves as one FCALL of the multi function in one write; each call gets its own reply, in order', async () => {
    await admin.config('RESETSTAT')
    const writes = on.writes
    const replies = await Promise.all(Array.from({ length: 5 }, () => on.fcall(hit.functionName, ['n'], [60_000], MULTI_FUNCTION)))
    expect(replies).toEqual([1, 2, 3, 4, 5])
    expect(on.writes - writes).toBe(1)
    const stats = (await admin.info('commandstats')) as string
    expect(stats).toMatch(/cmdstat_fcall:calls=1,/)
    // Alone in its turn, a call is a plain FCALL; a full batch leaves at once, the rest after.
    expect(await on.fcall(hit.functionName, ['n'], [60_000], MULTI_FUNCTION)).toBe(6)
    const many = await Promise.all(Array.from({ length: MAX_BATCH + 2 }, () => on.fcall(hit.functionName, ['m'], [60_000], MULTI_FUNCTION)))
    expect(many).toEqual(Array.from({ length: MAX_BATCH + 2 }, (_, i) => i + 1))
    expect(((await admin.info('commandstats')) as string).match(/cmdstat_fcall:calls=(\d+),/)?.[1]).toBe('4')
  })

  it("a sub-call's error fails that call only, with Redis' error; the others run, before and after it", async () => {
    for (const lean of [on, off]) await lean.command(['SET', 'text', 'not a number'])
    const turn = (lean: LeanConnection) =>
      Promise.all(['e', 'text', 'e'].map((key) => lean.fcall(hit.functionName, [key], [60_000], MULTI_FUNCTION).catch((e: unknown) => e)))
    const [multi, separate] = [await turn(on), await turn(off)]
    expect(multi[0]).toBe(1)
    expect(multi[2]).toBe(2)
    expect(multi[1]).toBeInstanceOf(Error)
    expect((multi[1] as Error).name).toBe('ReplyError')
    expect((multi[1] as Error).message).toMatch(/^ERR value is not an integer or out of range script: hitRateLimit_1_\w+\.$/)
    expect(comparable(multi)).toEqual(comparable(separate))
  })

  it('replies and resulting keys equal separate FCALLs for every script of a gateway workload', async () => {
    const recorded = await recordWorkload()
    const names = new Set(recorded.map((r) => r.name))
    for (const name of [
      'authorizeHold-4',
      'settleHold-4',
      'chargeBudget-4',
      'getBudget-4',
      'upsertBudget-4',
      'applyCatalog-N',
      'topUpWallet-3',
      'startRun-9',
      'consumeRun-12',
      'endRun-7',
    ])
      expect(names, `${name} in ${[...names].join(' ')}`).toContain(name)
    for (const db of [1, 2]) {
      const redis = new Redis(`${server.url}/${db}`)
      await redis.flushdb()
      await redis.quit()
    }
    const replay = async (lean: LeanConnection): Promise<unknown[]> => {
      const replies: unknown[] = []
      // Turns of 1 to MAX_BATCH calls, the same on both sides.
      for (let at = 0, size = 1; at < recorded.length; at += size, size = (size % MAX_BATCH) + 1) {
        const turn = recorded.slice(at, at + size).map((r) => lean.fcall(r.fn, r.keys, r.args, MULTI_FUNCTION).catch((e: unknown) => e))
        replies.push(...(await Promise.all(turn)))
      }
      return replies
    }
    const separate = await replay(off)
    const multi = await replay(on)
    expect(multi.length).toBe(recorded.length)
    for (let i = 0; i < recorded.length; i++) expect(comparable(multi[i]), `${i}: ${recorded[i]!.name}`).toEqual(comparable(separate[i]))
    expect(await keyspace(1)).toEqual(await keyspace(2))
    expect(Object.keys(await keyspace(1)).length).toBeGreaterThan(10)
  }, 60_000)
})

describe('a multi call that fails as a whole fails every caller as separate calls would', () => {
  it('timed out: "Command timed out" for each; after the stall replies still match their calls', async () => {
    const lean = await openLean(5, true, 200)
    try {
      const base = Number(await lean.fcall(hit.functionName, ['t'], [60_000], MULTI_FUNCTION))
      process.kill(server.pid, 'SIGSTOP')
      let stalled: unknown[]
      try {
        stalled = await Promise.all([1, 2, 3].map(() => lean.fcall(hit.functionName, ['t'], [60_000], MULTI_FUNCTION).catch((e: unknown) => e)))
      } finally {
        process.kill(server.pid, 'SIGCONT')
      }
      for (const error of stalled) {
        expect((error as Error).message).toBe('Command timed out')
        expect(isUnavailable(error)).toBe(true)
      }
      expect(await lean.fcall(hit.functionName, ['t'], [60_000], MULTI_FUNCTION)).toBe(base + 4)
    } finally {
      lean.close()
    }
  })

  it('connection closed, in flight or still in the turn: "Connection is closed." for each', async () => {
    const lean = await openLean(5, true)
    process.kill(server.pid, 'SIGSTOP')
    let inFlight: unknown[]
    let inTurn: unknown[]
    try {
      const sent = Promise.all([1, 2, 3].map(() => lean.fcall(hit.functionName, ['c'], [60_000], MULTI_FUNCTION).catch((e: unknown) => e)))
      await new Promise((resolve) => setImmediate(resolve))
      const waiting = Promise.all([1, 2].map(() => lean.fcall(hit.functionName, ['c'], [60_000], MULTI_FUNCTION).catch((e: unknown) => e)))
      lean.close()
      ;[inFlight, inTurn] = [await sent, await waiting]
    } finally {
      process.kill(server.pid, 'SIGCONT')
    }
    for (const error of [...inFlight, ...inTurn]) {
      expect((error as Error).message).toBe('Connection is closed.')
      expect(isUnavailable(error)).toBe(true)
    }
  })

  it('"Function not found" (the library gone): Script.run loads it and each call is made once more', async () => {
    const was = process.env.METERING_REDIS_MULTI
    process.env.METERING_REDIS_MULTI = '1' // read when the connection is made
    const redis: RedisClient = connectRedis(`${server.url}/6`, 'test-multi-reload', { commandTimeoutMs: 5_000 })
    if (was === undefined) delete process.env.METERING_REDIS_MULTI
    else process.env.METERING_REDIS_MULTI = was
    try {
      await waitFor('the lean connection', async () => {
        await hit.run(redis, ['warm'], [60_000])
        return leanFor(redis)
      })
      await admin.call('FUNCTION', 'FLUSH')
      const counts = await Promise.all(Array.from({ length: 6 }, () => hit.run(redis, ['r'], [60_000])))
      expect([...counts].sort()).toEqual([1, 2, 3, 4, 5, 6])
    } finally {
      await closeRedis(redis)
      await loadLibrary(admin)
    }
  })
})
