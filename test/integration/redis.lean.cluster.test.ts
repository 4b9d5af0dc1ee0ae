// Lean script calls on a Redis Cluster (src/infra/redis/leanCluster.ts): one lean connection per
// master, placed by the slot of the call's first key from ioredis' slot map; a slot that moved
// (ASK while it migrates, MOVED once it has) is answered through ioredis, transparently, and the
// lean path follows the new owner once ioredis refreshed its map.
//
// The cluster is this file's own: moving a slot on the shared one would redirect other files' calls.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { closeRedis, connectRedis, type RedisClient } from '../../src/infra/redis/connection.js'
import { isRedirection, keySlot, leanClusterNode } from '../../src/infra/redis/leanCluster.js'
import { Script } from '../../src/infra/redis/scripts.js'
import { startRedisCluster, type RedisClusterHandle } from '../support/cluster.js'
import { waitFor } from '../support/processes.js'
import { uniquePrefix } from '../support/redis.js'

const hit = new Script('hitRateLimit-1')

let dir = ''
let handle: RedisClusterHandle
let admins: Redis[] = []
let ids: string[] = []
let redis: RedisClient

/** The index (in `handle.nodes`) of the master that owns `slot`, by CLUSTER SLOTS of the first node. */
async function ownerOf(slot: number): Promise<number> {
  const ranges = (await admins[0]!.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
  const range = ranges.find(([from, to]) => from <= slot && slot <= to)!
  return handle.nodes.findIndex((n) => n.port === Number(range[2][1]))
}

/** A key with its own hash tag whose slot is owned by master `index`. */
async function keyOn(index: number): Promise<string> {
  for (;;) {
    const key = `{${uniquePrefix()}}:n`
    if ((await ownerOf(keySlot(key))) === index) return key
  }
}

/** The lean connection the client uses for `key`, once it is ready and its node is `port`. */
function leanOn(key: string, port: number) {
  return waitFor(`the lean connection of ${key} on ${port}`, async () => {
    await hit.run(redis, [key], [600_000])
    const lean = leanClusterNode(redis, key)
    return lean?.target.port === port ? lean : undefined
  })
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'lean-cluster-'))
  handle = await startRedisCluster({ dataDir: dir })
  admins = handle.nodes.map((n) => new Redis({ host: n.host, port: n.port }))
  ids = (await Promise.all(admins.map((a) => a.call('CLUSTER', 'MYID')))) as string[]
  const seeds = handle.nodes.map((n) => `${n.host}:${n.port}`).join(',')
  redis = connectRedis(`redis+cluster://${seeds}`, 'test-lean-cluster', { commandTimeoutMs: 5_000 })
}, 60_000)

afterAll(async () => {
  if (redis) await closeRedis(redis)
  for (const a of admins) a.disconnect()
  await handle?.stop()
  if (dir) await rm(dir, { recursive: true, force: true })
})

describe('lean calls on a Redis Cluster', () => {
  it('computes the slot of a key as Redis does (hash tags, empty tags, non-ASCII)', async () => {
    const keys = ['a', 'foo', '{user1000}.following', '{}x', 'x{}y', '{a}{b}', 'p{ünï}q', 'ünïcødé ✓', '{tag', 'x}{y}', '']
    for (const key of keys) expect(keySlot(key), key).toBe(await admins[0]!.call('CLUSTER', 'KEYSLOT', key))
  })

  it('each master gets its own lean connection, and the calls of a slot go to its master', async () => {
    for (let index = 0; index < handle.nodes.length; index++) {
      const key = await keyOn(index)
      const lean = await leanOn(key, handle.nodes[index]!.port)
      const writes = lean.writes
      const counts = (await Promise.all([1, 2, 3, 4].map(() => hit.run(redis, [key], [600_000])))).map(Number)
      expect(lean.writes).toBe(writes + 1)
      expect(counts.map((n) => n - counts[0]!)).toEqual([0, 1, 2, 3])
      expect(Number(await admins[index]!.get(key))).toBe(counts[3])
      const clients = (await admins[index]!.call('CLIENT', 'LIST')) as string
      expect(clients).toMatch(/name=test-lean-cluster-fcall .*cmd=fcall/)
    }
  })

  it('a slot that migrates (ASK) and then moves (MOVED): the caller gets the right count, the key lives on the new master, and lean calls follow it', async () => {
    const from = 0
    const to = 1
    const key = await keyOn(from)
    const slot = keySlot(key)
    const other = await keyOn(from)
    const lean = await leanOn(key, handle.nodes[from]!.port)
    const base = Number(await hit.run(redis, [key], [600_000]))
    expect(await admins[from]!.get(key)).toBe(String(base))

    // Migrating: the key goes to `to`; `from` answers ASK for it.
    const target = handle.nodes[to]!
    await admins[to]!.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids[from]!)
    await admins[from]!.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids[to]!)
    await admins[from]!.call('MIGRATE', target.host, target.port, '', 0, 5_000, 'KEYS', key)
    const asked = await lean.fcall(hit.functionName, [key], [600_000]).catch((e: unknown) => e)
    expect(isRedirection(asked), String(asked)).toBe(true)
    expect(String(asked)).toMatch(/^ReplyError: ASK /)
    expect(await hit.run(redis, [key], [600_000])).toBe(base + 1)
    // The node that redirected is set aside (the slot map did not change): its other slots go through ioredis a while.
    expect(leanClusterNode(redis, other)).toBeUndefined()
    expect(await hit.run(redis, [other], [600_000])).toBeGreaterThan(0)

    // Moved: every node learns the new owner; the client's slot map does not yet.
    await Promise.all(admins.map((a) => a.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids[to]!)))
    const moved = await lean.fcall(hit.functionName, [key], [600_000]).catch((e: unknown) => e)
    expect(String(moved)).toMatch(/^ReplyError: MOVED /)
    expect(await hit.run(redis, [key], [600_000])).toBe(base + 2)
    expect(await admins[to]!.get(key)).toBe(String(base + 2))
    expect(await admins[from]!.call('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0)

    // Once ioredis refreshed its map, the key's calls go on the new master's lean connection.
    const moving = await leanOn(key, target.port)
    const writes = moving.writes
    const count = Number(await hit.run(redis, [key], [600_000]))
    expect(moving.writes).toBe(writes + 1)
    expect(await admins[to]!.get(key)).toBe(String(count))
    // And the old master is used again for the slots it kept.
    await leanOn(other, handle.nodes[from]!.port)
  })

  it('a call sent to the wrong master by hand is refused there (MOVED), so the lean path never runs a script on a stale node', async () => {
    const key = await keyOn(2)
    const wrong = await leanOn(await keyOn(0), handle.nodes[0]!.port)
    const refused = await wrong.fcall(hit.functionName, [key], [600_000]).catch((e: unknown) => e)
    expect(isRedirection(refused), String(refused)).toBe(true)
    expect(await admins[0]!.call('CLUSTER', 'COUNTKEYSINSLOT', keySlot(key))).toBe(0)
  })

  it('the lean connections close when the client ends', async () => {
    const key = await keyOn(2)
    const lean = await leanOn(key, handle.nodes[2]!.port)
    await closeRedis(redis)
    await waitFor('the lean connection closed', () => !lean.ready, 10_000)
    expect(leanClusterNode(redis, key)).toBeUndefined()
  })
})
