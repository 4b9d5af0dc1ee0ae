// A Redis Cluster of 1..n masters for the cluster bench, each master a redis-server child with the
// authorize bench's settings (AOF, appendfsync everysec, no RDB, no AOF rewrite).
//
// Why not test/support/cluster.ts: `redis-cli --cluster create` refuses fewer than 3 masters, and
// the bench measures 1, 2 and 3; so the slots are assigned here (CLUSTER ADDSLOTSRANGE, an even
// split) and the nodes meet (CLUSTER MEET), which is all `--cluster create` does without replicas.

import path from 'node:path'
import { Redis } from 'ioredis'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { clusterAgrees } from '../../test/support/cluster.js'
import type { BenchRedis } from './redis.js'
import { freePort, HOST } from './proc.js'

const SLOTS = 16384
const STATE_OK_TIMEOUT_MS = 30_000

export interface BenchMaster extends BenchRedis {
  port: number
  /** The slots it owns: [first, last], inclusive. */
  slots: [number, number]
}

export interface BenchCluster {
  /** `redis+cluster://host:port,…`: REDIS_URL of the gateways and workers. */
  url: string
  masters: BenchMaster[]
  /** The index in `masters` of the master owning the slot of `key` (CLUSTER KEYSLOT, one round trip per key). */
  mastersOf(keys: string[]): Promise<number[]>
  stop(): Promise<void>
}

/** Bus ports the kernel calls free, distinct from each other and from `taken`. */
async function busPorts(n: number, taken: Set<number>): Promise<number[]> {
  const out: number[] = []
  while (out.length < n) {
    const p = await freePort()
    if (!taken.has(p) && !out.includes(p)) out.push(p)
  }
  return out
}

export async function startBenchCluster(dataDir: string, masters: number): Promise<BenchCluster> {
  const servers: RedisServerHandle[] = []
  const admins: Redis[] = []
  const stop = async (): Promise<void> => {
    for (const a of admins) a.disconnect()
    await Promise.allSettled(servers.map((s) => s.stop()))
  }
  try {
    const bus = await busPorts(masters, new Set())
    for (let i = 0; i < masters; i++) {
      servers.push(
        await startRedisServer({
          dataDir: path.join(dataDir, `master-${i}`),
          appendOnly: true,
          fsync: 'everysec',
          extraArgs: [
            ...['--appendfsync', 'everysec', '--auto-aof-rewrite-percentage', '0', '--save', ''],
            ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'],
            // A node that never met another does not know its own address (CLUSTER SLOTS says ""):
            // clients of a 1-master cluster would have nowhere to go.
            ...['--cluster-port', String(bus[i]!), '--cluster-announce-ip', HOST],
          ],
        }),
      )
    }
    for (const s of servers) admins.push(new Redis({ host: s.host, port: s.port, maxRetriesPerRequest: 1 }))
    const ranges = servers.map((_, i): [number, number] => [Math.floor((i * SLOTS) / masters), Math.floor(((i + 1) * SLOTS) / masters) - 1])
    for (let i = 0; i < masters; i++) {
      // Distinct config epochs, as redis-cli sets them: no epoch collision to resolve.
      await admins[i]!.call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1))
      await admins[i]!.call('CLUSTER', 'ADDSLOTSRANGE', String(ranges[i]![0]), String(ranges[i]![1]))
    }
    for (let i = 1; i < masters; i++) await admins[0]!.call('CLUSTER', 'MEET', HOST, String(servers[i]!.port), String(bus[i]!))
    // Every node says cluster_state:ok and knows every other (a master is writable ~2 s after it starts).
    await clusterAgrees(admins, masters, STATE_OK_TIMEOUT_MS)
    const version = /redis_version:(\S+)/.exec(await admins[0]!.info('server'))?.[1] ?? '?'
    const list: BenchMaster[] = servers.map((s, i) => ({
      url: s.url,
      pid: s.pid,
      port: s.port,
      admin: admins[i]!,
      version,
      slots: ranges[i]!,
      stop: () => s.stop(),
    }))
    return {
      url: `redis+cluster://${servers.map((s) => `${HOST}:${s.port}`).join(',')}`,
      masters: list,
      mastersOf: async (keys) => {
        const p = admins[0]!.pipeline()
        for (const k of keys) p.call('CLUSTER', 'KEYSLOT', k)
        const slots = ((await p.exec()) ?? []).map(([err, v]) => {
          if (err) throw err
          return Number(v)
        })
        return slots.map((slot) => ranges.findIndex(([a, b]) => slot >= a && slot <= b))
      },
      stop,
    }
  } catch (err) {
    await stop()
    throw err
  }
}
