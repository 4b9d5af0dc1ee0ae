// The lean FCALL connection (src/infra/redis/lean.ts) beside each ioredis client of connectRedis:
// it decodes every kind of reply as ioredis does, carries Script.run's calls once it is ready
// (a turn's calls in writes of at most MAX_BATCH), fails a call not answered within the command
// timeout with "Command timed out" and a call in flight when the server goes with an error
// counted as unavailable (503), keeps replies matched to their calls after a stall, and comes
// back when the server does.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { isUnavailable } from '../../src/infra/availability.js'
import { closeRedis, connectRedis, type RedisClient } from '../../src/infra/redis/connection.js'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { LeanConnection, leanFor, leanTarget, MAX_BATCH } from '../../src/infra/redis/lean.js'
import { Script } from '../../src/infra/redis/scripts.js'
import { waitFor } from '../support/processes.js'
import { uniquePrefix } from '../support/redis.js'

const hit = new Script('hitRateLimit-1')

/** Lua replies of every RESP2 kind, nested, and one long enough to arrive in several reads. */
const REPLIES = [
  "return {1, -42, 'text', false, {'nested', {7, ''}}, redis.status_reply('FINE')}",
  "return 'ünïcødé ✓'",
  "return string.rep('x', 300000)",
  'return {}',
  'return false',
  "return {1, redis.error_reply('ERR nested failure'), 'after'}",
  'return 9007199254740991',
]

/** A reply with each error as its name and message (ioredis' and ours are different classes). */
function comparable(value: unknown): unknown {
  if (value instanceof Error) return { error: value.name, message: value.message }
  return Array.isArray(value) ? value.map(comparable) : value
}

/** The lean connection of `redis` once it is ready (the first calls of a client open it). */
async function readyLean(redis: RedisClient, key: string): Promise<LeanConnection> {
  return waitFor('the lean connection', async () => {
    await hit.run(redis, [key], [60_000])
    return leanFor(redis)
  })
}

describe('lean replies match ioredis', () => {
  const url = inject('redisUrl')
  let lean: LeanConnection
  let plain: Redis
  beforeAll(async () => {
    plain = new Redis(url)
    lean = new LeanConnection(leanTarget(url, 'test-lean-replies', 2_000)!)
    lean.connect()
    await waitFor('lean ready', () => lean.ready)
  })
  afterAll(async () => {
    lean.close()
    await plain.quit()
  })

  it.each(REPLIES)('%s', async (script) => {
    const expected = await plain.call('EVAL', script, 0)
    const got = await lean.command(['EVAL', script, 0])
    expect(comparable(got)).toEqual(comparable(expected))
  })

  it('an error reply rejects with the message ioredis gives', async () => {
    const script = "return redis.error_reply('BUSY pretend')"
    const expected = await plain.call('EVAL', script, 0).catch((e: Error) => e)
    const got = await lean.command(['EVAL', script, 0]).catch((e: Error) => e)
    expect(got).toBeInstanceOf(Error)
    expect((got as Error).message).toBe((expected as Error).message)
    expect(isUnavailable(got)).toBe(true)
  })
})

describe('Script.run on the lean connection', () => {
  let redis: RedisClient
  let plain: Redis
  beforeAll(() => {
    redis = connectRedis(inject('redisUrl'), 'test-lean', { commandTimeoutMs: 2_000 })
    plain = new Redis(inject('redisUrl'))
  })
  afterAll(async () => {
    await closeRedis(redis)
    await plain.quit()
  })

  it('carries the calls of a turn in writes of at most MAX_BATCH, in order', async () => {
    const key = `${uniquePrefix()}:n`
    const lean = await readyLean(redis, key)
    const before = await plain.get(key)
    const writes = lean.writes
    const calls = 2 * MAX_BATCH + 8
    const counts = await Promise.all(Array.from({ length: calls }, () => hit.run(redis, [key], [60_000])))
    expect(counts).toEqual(Array.from({ length: calls }, (_, i) => Number(before) + i + 1))
    expect(lean.writes - writes).toBe(3)
    const clients = (await plain.call('CLIENT', 'LIST')) as string
    expect(clients).toMatch(/name=test-lean-fcall .*cmd=fcall/)
  })

  it('gives no lean connection to a blocking client, a Cluster URL or when turned off', () => {
    expect(leanTarget('redis+cluster://127.0.0.1:1,127.0.0.1:2', 'x', 100)).toBeUndefined()
    expect(leanTarget('rediss://127.0.0.1:6380', 'x', 100)).toBeUndefined()
    const blocking = connectRedis(inject('redisUrl'), 'test-lean-blocking', { blocking: true })
    const off = connectRedis(inject('redisUrl'), 'test-lean-off', { leanScripts: false })
    expect(leanFor(blocking)).toBeUndefined()
    expect(leanFor(off)).toBeUndefined()
    blocking.disconnect()
    off.disconnect()
  })
})

describe('the lean connection when its server stalls or goes', () => {
  let tmp: string
  let server: RedisServerHandle
  let redis: RedisClient
  const TIMEOUT_MS = 200
  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'lean-'))
    server = await startRedisServer({ dataDir: tmp, appendOnly: false })
    redis = connectRedis(server.url, 'test-lean-faults', { commandTimeoutMs: TIMEOUT_MS })
  })
  afterAll(async () => {
    await closeRedis(redis)
    await server.stop()
    await rm(tmp, { recursive: true, force: true })
  })

  it('SIGSTOP: calls fail "Command timed out" within the timeout; after SIGCONT replies still match their calls', async () => {
    const key = `${uniquePrefix()}:n`
    await readyLean(redis, key)
    const base = Number(await hit.run(redis, [key], [60_000]))
    process.kill(server.pid, 'SIGSTOP')
    let stalled: unknown[]
    const started = Date.now()
    try {
      stalled = await Promise.all([1, 2, 3].map(() => hit.run(redis, [key], [60_000]).catch((e: unknown) => e)))
    } finally {
      process.kill(server.pid, 'SIGCONT')
    }
    const ms = Date.now() - started
    for (const error of stalled) {
      expect((error as Error).message).toBe('Command timed out')
      expect(isUnavailable(error)).toBe(true)
    }
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS)
    expect(ms).toBeLessThan(TIMEOUT_MS * 1.25 + 1_500)
    // The three timed-out calls were made (Redis runs them once it resumes); their late replies
    // are dropped, and the next call gets its own.
    expect(await hit.run(redis, [key], [60_000])).toBe(base + 4)
    expect(leanFor(redis)).toBeDefined()
  })

  it('a server that goes: calls fail as unavailable; once it is back, calls go on the lean connection again', async () => {
    const key = `${uniquePrefix()}:n`
    await readyLean(redis, key)
    const port = server.port
    const inFlight = hit.run(redis, [key], [60_000]).then(
      () => 'answered',
      (e: unknown) => e,
    )
    await server.stop()
    const outcome = await inFlight
    if (outcome !== 'answered') expect(isUnavailable(outcome), String(outcome)).toBe(true)
    const during = await hit.run(redis, [key], [60_000]).catch((e: unknown) => e)
    expect(isUnavailable(during), String(during)).toBe(true)
    expect(leanFor(redis)).toBeUndefined()

    server = await startRedisServer({ dataDir: tmp, appendOnly: false, port })
    const lean = await readyLean(redis, key)
    const writes = lean.writes
    expect(await hit.run(redis, [key], [60_000])).toBeGreaterThan(0)
    expect(lean.writes).toBe(writes + 1)
  })
})
