// Proves the servers from test/support/globalSetup.ts are up and usable.

import { afterAll, describe, expect, it } from 'vitest'
import { testCluster, testRedis, uniquePrefix } from '../support/redis.js'

describe('standalone redis from globalSetup', () => {
  const redis = testRedis()
  afterAll(() => redis.quit())

  it('answers SET/GET', async () => {
    const key = `${uniquePrefix()}:hello`
    await redis.set(key, 'world')
    expect(await redis.get(key)).toBe('world')
  })

  it('runs Lua', async () => {
    const key = `${uniquePrefix()}:n`
    const n = await redis.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, key, 41)
    expect(n).toBe(41)
  })
})

describe('redis cluster from globalSetup', () => {
  const cluster = testCluster()
  afterAll(() => cluster.quit())

  it('reports cluster_state:ok on every node', async () => {
    for (const node of cluster.nodes('master')) {
      expect(await node.cluster('INFO')).toContain('cluster_state:ok')
    }
    expect(cluster.nodes('master')).toHaveLength(3)
  })

  it('stores keys with different hash tags across all masters and reads them back', async () => {
    const p = uniquePrefix()
    const keys = Array.from({ length: 30 }, (_, i) => `{${p}-${i}}:k`)
    await Promise.all(keys.map((k, i) => cluster.set(k, String(i))))
    expect(await Promise.all(keys.map((k) => cluster.get(k)))).toEqual(keys.map((_, i) => String(i)))

    // The keys really are spread over more than one master, and each key
    // lives on exactly one of them.
    const perMaster = await Promise.all(cluster.nodes('master').map((n) => n.keys(`{${p}-*`)))
    expect(perMaster.flat().sort()).toEqual([...keys].sort())
    const owners = perMaster.filter((ks) => ks.length > 0)
    expect(owners.length).toBeGreaterThan(1)
  })

  it('rejects multi-key commands across slots but allows them within one hash tag', async () => {
    const p = uniquePrefix()
    await expect(cluster.mset(`{${p}a}:x`, '1', `{${p}b}:y`, '2')).rejects.toThrow(/CROSSSLOT|same slot/)
    await cluster.mset(`{${p}}:x`, '1', `{${p}}:y`, '2')
    expect(await cluster.mget(`{${p}}:x`, `{${p}}:y`)).toEqual(['1', '2'])
  })
})
