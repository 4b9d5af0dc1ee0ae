// Durable on replicas before acknowledged (METERING_REDIS_WAIT_REPLICAS; src/infra/redis/replicas.ts):
// a real master and a real replica (redis-server --replicaof). A script call resolves only once
// the replica has its write; concurrent calls share WAITs (a group commit, counted in INFO
// commandstats); with the replica stopped, calls fail with ReplicasUnavailableError (a 503)
// within the timeout, and work again once it is back; through a gateway started with the
// setting, such a call answers 503 and its retry replays it.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { BudgetService } from '../../src/budgets/service.js'
import { isUnavailable, UnavailableError } from '../../src/infra/availability.js'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { ReplicasUnavailableError, replicaGate, requireReplicas } from '../../src/infra/redis/replicas.js'
import { loadLibrary } from '../../src/infra/redis/scripts.js'
import { systemClock } from '../../src/kernel/clock.js'
import { loadConfig } from '../../src/kernel/config.js'
import { startTestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'
import { testCluster, uniquePrefix } from '../support/redis.js'

const PROJECT = uniquePrefix()
const BUDGETS = ['b0', 'b1', 'b2', 'b3']

describe('WAIT for replicas before a script call answers', () => {
  let tmp: string
  let master: RedisServerHandle
  let replica: RedisServerHandle
  /** Reads the replica directly (never gated). */
  let onReplica: Redis
  /** Reads the master directly (never gated). */
  let onMaster: Redis
  const clients: Redis[] = []
  let stopped = false

  /** A connection to the master whose script calls wait for `replicas` replicas. */
  async function gatedClient(replicas: number, timeoutMs: number, name = 'gated'): Promise<{ redis: Redis; budgets: BudgetService }> {
    const redis = new Redis(master.url, { maxRetriesPerRequest: 1, connectionName: name })
    clients.push(redis)
    await loadLibrary(redis)
    requireReplicas(redis, replicas, timeoutMs)
    return { redis, budgets: new BudgetService(redis, systemClock) }
  }

  const budgetHash = (key: string) => budgetKeys(budgetTag(PROJECT, key)).budget

  function pauseReplica(): void {
    process.kill(replica.pid, 'SIGSTOP')
    stopped = true
  }
  function resumeReplica(): void {
    if (stopped) process.kill(replica.pid, 'SIGCONT')
    stopped = false
  }

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'replicas-test-'))
    master = await startRedisServer({ dataDir: path.join(tmp, 'master'), appendOnly: false })
    replica = await startRedisServer({
      dataDir: path.join(tmp, 'replica'),
      appendOnly: false,
      extraArgs: ['--replicaof', master.host, String(master.port)],
    })
    onReplica = new Redis(replica.url)
    onMaster = new Redis(master.url)
    await waitFor('the replica to be in sync with the master', async () => {
      const [r, m] = await Promise.all([onReplica.info('replication'), onMaster.info('replication')])
      return r.includes('master_link_status:up') && /connected_slaves:1\r?\n/.test(m)
    })
    const { budgets } = await gatedClient(1, 5_000)
    for (const key of BUDGETS) {
      const r = await budgets.upsert(PROJECT, { key, unit: 'USD', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '1000000' }] })
      expect(r.ok).toBe(true)
    }
  })

  afterAll(async () => {
    resumeReplica()
    for (const c of clients) c.disconnect()
    onReplica?.disconnect()
    onMaster?.disconnect()
    await replica?.stop()
    await master?.stop()
    if (tmp) await rm(tmp, { recursive: true, force: true })
  })

  it('a call resolves only once the replica has its write', async () => {
    const { budgets } = await gatedClient(1, 5_000)
    // Each call, read from the replica the moment it resolves.
    for (let i = 0; i < 40; i++) {
      const r = await budgets.charge(PROJECT, { key: 'b0', amount: '0.01', idempotencyKey: `seq-${i}` })
      expect(r.ok).toBe(true)
      expect(await onReplica.hexists(budgetHash('b0'), `i:seq-${i}`), `charge ${i} on the replica when it resolved`).toBe(1)
    }

    // With the replica stopped the write is made on the master, and the call still does not resolve.
    const slow = await gatedClient(1, 20_000, 'gated-slow')
    pauseReplica()
    try {
      let resolved = false
      const call = slow.budgets.charge(PROJECT, { key: 'b0', amount: '0.01', idempotencyKey: 'paused' }).finally(() => {
        resolved = true
      })
      // The gate sends its WAIT once the call's reply has arrived: seen blocked on the master, the
      // reply is in the client, and the call must still be waiting.
      await waitFor('the WAIT after the call, blocked on the master', async () =>
        ((await onMaster.client('LIST')) as string).split('\n').some((c) => c.includes('name=gated-slow') && / flags=b /.test(c) && c.includes(' cmd=wait ')),
      )
      expect(await onMaster.hexists(budgetHash('b0'), 'i:paused'), 'the write on the master').toBe(1)
      expect(resolved, 'resolved while the replica was stopped').toBe(false)
      resumeReplica()
      expect((await call).ok).toBe(true)
      expect(await onReplica.hexists(budgetHash('b0'), 'i:paused')).toBe(1)
    } finally {
      resumeReplica()
    }
  })

  it('concurrent calls share WAITs: one WAIT covers every call sent before it', async () => {
    const { redis, budgets } = await gatedClient(1, 5_000)
    await onMaster.config('RESETSTAT')
    const gate = replicaGate(redis)!
    const waits0 = gate.waits
    // 32 clients, each making its next call once the previous one answered (as request handlers do).
    const CLIENTS = 32
    const ROUNDS = 20
    const N = CLIENTS * ROUNDS
    const failed: string[] = []
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        for (let round = 0; round < ROUNDS; round++) {
          const i = round * CLIENTS + c
          const r = await budgets.charge(PROJECT, { key: BUDGETS[i % BUDGETS.length]!, amount: '0.01', idempotencyKey: `many-${i}` })
          if (!r.ok) failed.push(JSON.stringify(r))
        }
      }),
    )
    expect(failed).toEqual([])
    const stats = await onMaster.info('commandstats')
    const count = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    const waits = count('wait')
    const fcalls = count('fcall')
    console.log(`[replicas] ${fcalls} FCALLs acknowledged after ${waits} WAITs (${(fcalls / Math.max(1, waits)).toFixed(1)} calls per WAIT)`)
    expect(fcalls).toBe(N)
    expect(waits).toBe(gate.waits - waits0)
    expect(waits).toBeGreaterThan(0)
    expect(waits, 'WAITs are shared, not one per call').toBeLessThan(N / 4)
    // Every call resolved only after the replica had it: all N records are there now.
    const present = await Promise.all(Array.from({ length: N }, (_, i) => onReplica.hexists(budgetHash(BUDGETS[i % BUDGETS.length]!), `i:many-${i}`)))
    expect(present.filter((p) => p === 1).length).toBe(N)
  })

  it('with the replica stopped, calls fail with ReplicasUnavailableError within the timeout, and work again once it is back', async () => {
    const TIMEOUT_MS = 300
    const { budgets } = await gatedClient(1, TIMEOUT_MS)
    pauseReplica()
    try {
      const t0 = performance.now()
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => budgets.charge(PROJECT, { key: BUDGETS[i % BUDGETS.length]!, amount: '0.01', idempotencyKey: `down-${i}` })),
      )
      const elapsedMs = performance.now() - t0
      console.log(`[replicas] 20 calls with the replica stopped failed after ${elapsedMs.toFixed(0)} ms (WAIT timeout ${TIMEOUT_MS} ms)`)
      for (const o of outcomes) {
        expect(o.status).toBe('rejected')
        const error = (o as PromiseRejectedResult).reason as ReplicasUnavailableError
        expect(error).toBeInstanceOf(ReplicasUnavailableError)
        expect(error).toBeInstanceOf(UnavailableError)
        expect(isUnavailable(error), 'the HTTP layer answers it 503').toBe(true)
        expect(error.acknowledged).toBe(0)
        expect(error.required).toBe(1)
        expect(error.message).toMatch(/^NOREPLICAS /)
      }
      // Redis answers a WAIT at its timeout, not before; each WAIT covers the calls sent before it,
      // so the calls fail within a few timeouts (generous: a loaded 2-core machine).
      expect(elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5)
      expect(elapsedMs).toBeLessThan(TIMEOUT_MS * 2 + 3_000)
    } finally {
      resumeReplica()
    }
    const again = await budgets.charge(PROJECT, { key: 'b1', amount: '0.01', idempotencyKey: 'back' })
    expect(again.ok).toBe(true)
    expect(await onReplica.hexists(budgetHash('b1'), 'i:back')).toBe(1)
  })

  it('more replicas than there are: every call fails with how many acknowledged', async () => {
    const { budgets } = await gatedClient(2, 100)
    const outcome = await budgets.charge(PROJECT, { key: 'b2', amount: '0.01', idempotencyKey: 'two' }).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(outcome).toBeInstanceOf(ReplicasUnavailableError)
    expect((outcome as ReplicasUnavailableError).acknowledged).toBe(1)
    expect((outcome as ReplicasUnavailableError).required).toBe(2)
  })

  it('through the gateway: a call no replica has answers 503, and its retry replays it once the replica is back', async () => {
    const gw = await startTestGateway({ redisUrl: master.url, redisWaitReplicas: 1, redisWaitTimeoutMs: 300 })
    try {
      const { apiKey } = await gw.project()
      const upsert = await gw.post(
        '/v1/budgets/upsert',
        { key: 'gw', unit: 'USD', limits: [{ id: 'cap', window: 'never', enforce: 'hard', amount: '10' }] },
        apiKey,
      )
      expect(upsert.status, JSON.stringify(upsert.body)).toBe(200)
      const body = { key: 'gw', amount: '1', idempotencyKey: 'gw-1' }
      pauseReplica()
      let down: Awaited<ReturnType<typeof gw.post>>
      try {
        down = await gw.post('/v1/budgets/authorize', body, apiKey)
      } finally {
        resumeReplica()
      }
      expect(down.status, JSON.stringify(down.body)).toBe(503)
      expect(down.body.error.code).toBe('SERVICE_UNAVAILABLE')
      // The write was made on the master: the retry replays it (and answers once the replica has it).
      const again = await gw.post('/v1/budgets/authorize', body, apiKey)
      expect(again.status, JSON.stringify(again.body)).toBe(200)
      expect(again.body.replayed).toBe(true)
    } finally {
      await gw.close()
    }
  })

  it('is off at 0, refused on a Cluster, and configured by METERING_REDIS_WAIT_REPLICAS with REDIS_URL', async () => {
    const { redis } = await gatedClient(1, 1_000)
    expect(replicaGate(redis)).toBeDefined()
    requireReplicas(redis, 0, 1_000)
    expect(replicaGate(redis)).toBeUndefined()
    const cluster = testCluster()
    try {
      expect(() => requireReplicas(cluster, 1, 1_000)).toThrow(/not a Redis Cluster/)
    } finally {
      cluster.disconnect()
    }
    expect(() => requireReplicas(redis, 1, 0)).toThrow(/at least 1 ms/)

    const off = loadConfig({})
    expect([off.redisWaitReplicas, off.redisWaitTimeoutMs]).toEqual([0, 250])
    const on = loadConfig({ REDIS_URL: master.url, METERING_REDIS_WAIT_REPLICAS: '2', METERING_REDIS_WAIT_TIMEOUT_MS: '800' })
    expect([on.redisWaitReplicas, on.redisWaitTimeoutMs]).toEqual([2, 800])
    expect(() => loadConfig({ METERING_REDIS_WAIT_REPLICAS: '1' })).toThrow(/needs REDIS_URL/)
  })
})
