// Durable before acknowledged; ids never repeat (src/budgets/README.md, "Durability").
//
// (a) The embedded redis-server runs with the appendfsync METERING_REDIS_FSYNC chooses (`always`
//     unless told `everysec`; anything else is a startup error).
// (b) Ids after a lost AOF tail. What a redis-server restarted from an AOF cut back to its last
//     fsync holds is an older state of every key: we take it deterministically with DUMP, go on
//     handing out ids, then RESTORE ... REPLACE the dumps (and delete the keys made since). Every
//     id handed out after that must be new: with the old counters (h_<seq + 1>, HINCRBY) the
//     restored counter handed the lost ids out again, and a client's release of its hold released
//     another client's.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Value } from '@sinclair/typebox/value'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { budgetTag } from '../../src/budgets/keys.js'
import { HoldId } from '../../src/budgets/schemas.js'
import { BudgetService } from '../../src/budgets/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { startEmbeddedRedis } from '../../src/infra/redis/local.js'
import { PREFIX, projectTag } from '../../src/infra/redis/keys.js'
import { manualClock } from '../../src/kernel/clock.js'
import { loadConfig } from '../../src/kernel/config.js'
import { RunService } from '../../src/runs/service.js'
import { walletKeys } from '../../src/wallet/keys.js'
import { WalletService } from '../../src/wallet/service.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { RUNS_CATALOG } from '../support/runsCatalog.js'

const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
const CENT = 1_000_000n // ledger units per cent

describe('appendfsync of the embedded redis-server', () => {
  let tmp: string
  const started: RedisServerHandle[] = []
  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'durability-test-'))
  })
  afterAll(async () => {
    await Promise.allSettled(started.map((s) => s.stop()))
    await rm(tmp, { recursive: true, force: true })
  })

  async function appendfsyncOf(server: RedisServerHandle): Promise<string[]> {
    started.push(server)
    const c = new Redis(server.url)
    try {
      const appendonly = (await c.config('GET', 'appendonly')) as string[]
      const appendfsync = (await c.config('GET', 'appendfsync')) as string[]
      return [...appendonly, ...appendfsync]
    } finally {
      c.disconnect()
      await server.stop()
    }
  }

  it('is always by default, everysec when METERING_REDIS_FSYNC says so', async () => {
    const byDefault = loadConfig({})
    expect(byDefault.redisFsync).toBe('always')
    expect(loadConfig({ METERING_REDIS_FSYNC: '' }).redisFsync).toBe('always')
    expect(await appendfsyncOf(await startEmbeddedRedis(path.join(tmp, 'default'), byDefault.redisFsync))).toEqual([
      'appendonly',
      'yes',
      'appendfsync',
      'always',
    ])
    expect(await appendfsyncOf(await startEmbeddedRedis(path.join(tmp, 'unset')))).toEqual(['appendonly', 'yes', 'appendfsync', 'always'])

    const everysec = loadConfig({ METERING_REDIS_FSYNC: 'everysec' })
    expect(everysec.redisFsync).toBe('everysec')
    expect(await appendfsyncOf(await startEmbeddedRedis(path.join(tmp, 'everysec'), everysec.redisFsync))).toEqual([
      'appendonly',
      'yes',
      'appendfsync',
      'everysec',
    ])
    expect(loadConfig({ METERING_REDIS_FSYNC: 'always' }).redisFsync).toBe('always')
  })

  it('startRedisServer with AOF and no fsync given fsyncs always', async () => {
    expect(await appendfsyncOf(await startRedisServer({ dataDir: path.join(tmp, 'plain') }))).toEqual(['appendonly', 'yes', 'appendfsync', 'always'])
  })

  it('anything else is a startup error', () => {
    for (const bad of ['no', 'sometimes', 'ALWAYS', ' everysec', '1']) {
      expect(() => loadConfig({ METERING_REDIS_FSYNC: bad }), bad).toThrow(/METERING_REDIS_FSYNC must be always or everysec/)
    }
  })
})

// ---------------------------------------------------------------------------------------------
// (b) Ids after a lost tail.
// ---------------------------------------------------------------------------------------------
let redis: Redis
beforeAll(() => {
  redis = testRedis()
})
afterAll(() => redis?.quit())

async function scanAll(pattern: string): Promise<string[]> {
  const keys = new Set<string>()
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    for (const k of batch) keys.add(k)
    cursor = next
  } while (cursor !== '0')
  return [...keys]
}

/**
 * Every key matching `pattern` as it is now; `restore()` puts them back as they were (RESTORE
 * REPLACE) and deletes the keys made since: what a restart from an AOF cut back to this moment
 * leaves.
 */
async function snapshot(pattern: string): Promise<{ keys: number; restore(): Promise<void> }> {
  const dumps = new Map<string, Buffer>()
  for (const key of await scanAll(pattern)) {
    const dump = await redis.dumpBuffer(key)
    if (dump) dumps.set(key, dump)
  }
  return {
    keys: dumps.size,
    restore: async () => {
      const since = (await scanAll(pattern)).filter((k) => !dumps.has(k))
      if (since.length > 0) await redis.del(...since)
      for (const [key, dump] of dumps) await redis.restore(key, 0, dump, 'REPLACE')
    },
  }
}

const numberOf = (id: string) => BigInt(id.slice(id.indexOf('_') + 1))

/** Ids handed out after the restore: none of the lost ones, none of the kept ones, all past every one of them. */
function expectFresh(after: string[], lost: string[], kept: string[]): void {
  expect(new Set(after).size).toBe(after.length)
  for (const id of after) {
    expect(lost, `${id} was handed out before the restore`).not.toContain(id)
    expect(kept, `${id} was handed out before the snapshot`).not.toContain(id)
  }
  let highest = 0n
  for (const id of [...lost, ...kept]) if (numberOf(id) > highest) highest = numberOf(id)
  for (const id of after) expect(numberOf(id) > highest, `${id} after ${highest}`).toBe(true)
}

describe('hold and lease ids after a lost AOF tail', () => {
  const KEY = 'team'
  async function setup() {
    const projectId = uniquePrefix()
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    const upserted = await budgets.upsert(projectId, { key: KEY, unit: 'USD', limits: [{ id: 'day', window: 'day', enforce: 'hard', amount: '1000' }] })
    expect(upserted.ok).toBe(true)
    let n = 0
    const authorize = async (count: number): Promise<string[]> => {
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const r = await budgets.authorize(projectId, { key: KEY, amount: '1', idempotencyKey: `a${n++}` })
        if (!r.ok) throw new Error(r.message)
        expect(r.value.replayed).toBe(false)
        ids.push(r.value.holdId)
      }
      return ids
    }
    const lease = async (count: number): Promise<string[]> => {
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const now = clock()
        const r = await budgets.openLease(projectId, KEY, {
          amount: 100_000_000n,
          ttlMs: 60_000,
          expiresAt: now + 60_000,
          currency: 'USD',
          requestKey: `acme|l${n}`,
          fingerprint: `f${n++}`,
        })
        if (!r.ok) throw new Error(r.message)
        ids.push(r.value.leaseId)
      }
      return ids
    }
    // The budget's keys: hash, open-hold index, purge index, journal outbox.
    const pattern = `${PREFIX}${budgetTag(projectId, KEY)}:*`
    return { projectId, clock, budgets, authorize, lease, pattern }
  }

  it('hold ids are h_ and 16 digits from the clock, consecutive within a millisecond, and settle and release by them', async () => {
    const { projectId, budgets, authorize } = await setup()
    const ids = await authorize(3)
    expect(ids).toEqual([`h_${T0 * 1000}`, `h_${T0 * 1000 + 1}`, `h_${T0 * 1000 + 2}`])
    for (const id of ids) expect(Value.Check(HoldId, id), id).toBe(true)
    const settled = await budgets.settle(projectId, { key: KEY, holdId: ids[0]!, amount: '0.5' })
    expect(settled.ok && [settled.value.holdId, settled.value.state]).toEqual([ids[0], 'settled'])
    const released = await budgets.release(projectId, { key: KEY, holdId: ids[1]! })
    expect(released.ok && [released.value.holdId, released.value.state]).toEqual([ids[1], 'released'])
  })

  it('a hold id handed out before the restore is never handed out again', async () => {
    const { projectId, clock, budgets, authorize, pattern } = await setup()
    const kept = await authorize(3)
    const snap = await snapshot(pattern)
    expect(snap.keys).toBeGreaterThan(0)
    const lost = await authorize(3)
    await snap.restore()
    // The restored budget knows nothing of the lost holds...
    const restored = await budgets.get(projectId, KEY)
    expect(restored.ok && restored.value.balance.held).toBe('3')

    clock.advance(1)
    const after = await authorize(3)
    expectFresh(after, lost, kept)
    // ...so a client that still names one gets hold_not_found, and no other client's hold is touched.
    for (const id of lost) {
      const r = await budgets.release(projectId, { key: KEY, holdId: id })
      expect(!r.ok && r.reason, id).toBe('hold_not_found')
    }
    const view = await budgets.get(projectId, KEY)
    expect(view.ok && view.value.balance.held).toBe('6')
  })

  it('a lease id handed out before the restore is never handed out again', async () => {
    const { clock, lease, pattern } = await setup()
    const kept = await lease(2)
    const snap = await snapshot(pattern)
    const lost = await lease(2)
    await snap.restore()
    clock.advance(1)
    expectFresh(await lease(2), lost, kept)
    expect(kept).toEqual([`l_${T0 * 1000}`, `l_${T0 * 1000 + 1}`])
  })
})

describe('run and credit ids after a lost AOF tail', () => {
  async function setup() {
    const projectId = uniquePrefix()
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    expect((await new CatalogService(redis, clock, budgets).apply(projectId, RUNS_CATALOG, 'test')).ok).toBe(true)
    const wallet = new WalletService(redis, clock)
    const runs = new RunService(redis, clock)
    expect((await wallet.topUp(projectId, { customerId: 'acme', amount: 10_000n * CENT, idempotencyKey: 'initial' })).ok).toBe(true)
    let n = 0
    const start = async (count: number): Promise<string[]> => {
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const r = await runs.start(projectId, { customerId: 'acme', budgetAmountMinor: 100, idempotencyKey: `r${n++}` })
        if (!r.ok) throw new Error(r.message)
        ids.push(r.value.runId)
      }
      return ids
    }
    const grant = async (count: number): Promise<string[]> => {
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const r = await wallet.grant(projectId, { customerId: 'acme', amount: 5n * CENT, source: 'promo', idempotencyKey: `g${n++}` })
        if (!r.ok) throw new Error(r.message)
        ids.push(r.value.creditId)
      }
      return ids
    }
    // Every key of the project's slot: runs, run index and deadlines, wallet, credits, counters, outbox, catalog.
    const pattern = `${PREFIX}${projectTag(projectId)}:*`
    return { projectId, clock, runs, wallet, start, grant, pattern }
  }

  it('run ids are run_ and 16 digits from the clock', async () => {
    const { start, grant } = await setup()
    expect(await start(2)).toEqual([`run_${T0 * 1000}`, `run_${T0 * 1000 + 1}`])
    expect(await grant(2)).toEqual([`cr_${T0 * 1000}`, `cr_${T0 * 1000 + 1}`])
  })

  it('a run id or a credit id handed out before the restore is never handed out again', async () => {
    const { projectId, clock, runs, wallet, start, grant, pattern } = await setup()
    const keptRuns = await start(3)
    const keptCredits = await grant(2)
    const snap = await snapshot(pattern)
    const lostRuns = await start(3)
    const lostCredits = await grant(2)
    await snap.restore()
    for (const id of lostRuns) {
      const r = await runs.get(projectId, id)
      expect(!r.ok && r.reason, id).toBe('run_not_found')
    }

    clock.advance(1)
    const afterRuns = await start(3)
    const afterCredits = await grant(2)
    expectFresh(afterRuns, lostRuns, keptRuns)
    expectFresh(afterCredits, lostCredits, keptCredits)
    // The credits granted before the restore and after it are all there, none overwritten.
    const balance = await wallet.balance(projectId, 'acme')
    const listed = balance.ok ? balance.value.credits.map((c) => c.id) : []
    expect(listed.sort()).toEqual([...keptCredits, ...afterCredits].sort())
  })

  it('an old small counter jumps ahead to the clock; a counter ahead of the clock goes on from itself', async () => {
    const { projectId, clock, start } = await setup()
    const counters = walletKeys(projectId, 'acme').counters
    await redis.hset(counters, 'run', '41')
    expect(await start(1)).toEqual([`run_${T0 * 1000}`])
    await redis.hset(counters, 'run', String(T0 * 1000 + 5000))
    clock.advance(1)
    expect(await start(1)).toEqual([`run_${T0 * 1000 + 5001}`])
  })
})
