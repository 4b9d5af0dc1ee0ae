// A real 3-master Redis Cluster on loopback, for tests of the cluster code
// paths (hash tags, CROSSSLOT, MOVED handling in ioredis).

import { execFile } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'

const execFileP = promisify(execFile)
const HOST = '127.0.0.1'
const STATE_OK_TIMEOUT_MS = 20_000

export interface RedisClusterHandle {
  nodes: { host: string; port: number }[]
  stop(): Promise<void>
}

export async function startRedisCluster(opts: { dataDir: string; masters?: number }): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3
  // Each node needs a client port and a cluster-bus port. The bus port is
  // given explicitly: the default (port + 10000) overflows for ephemeral
  // ports above 55535 and may be taken.
  const ports = await distinctFreePorts(masters * 2)
  const servers: RedisServerHandle[] = []
  const stop = async (): Promise<void> => {
    await Promise.allSettled(servers.map((s) => s.stop()))
  }

  try {
    const started = await Promise.allSettled(
      Array.from({ length: masters }, (_, i) => {
        const port = ports[2 * i]!
        return startRedisServer({
          dataDir: path.join(opts.dataDir, `node-${port}`),
          port,
          appendOnly: false,
          extraArgs: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
            '--cluster-node-timeout',
            '5000',
            '--cluster-port',
            String(ports[2 * i + 1]!),
          ],
        })
      }),
    )
    for (const r of started) if (r.status === 'fulfilled') servers.push(r.value)
    const failed = started.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason

    const addrs = servers.map((s) => `${HOST}:${s.port}`)
    await execFileP('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 }).catch(
      (err: Error & { stdout?: string; stderr?: string }) => {
        throw new Error(`redis-cli --cluster create failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`, { cause: err })
      },
    )

    await waitForClusterOk(servers, masters)
  } catch (err) {
    await stop()
    throw err
  }

  return { nodes: servers.map((s) => ({ host: s.host, port: s.port })), stop }
}

/**
 * `redis-cli --cluster create` returns once slots are assigned, but gossip may
 * not have reached every node yet, and a master reports cluster_state:ok only
 * ~2 s after it started (redis's CLUSTER_WRITABLE_DELAY); clients landing on a
 * node still in cluster_state:fail get CLUSTERDOWN. So wait until every node
 * agrees.
 */
async function waitForClusterOk(servers: RedisServerHandle[], masters: number): Promise<void> {
  const clients = servers.map((s) => new Redis({ host: s.host, port: s.port, lazyConnect: true, maxRetriesPerRequest: 1 }))
  try {
    await clusterAgrees(clients, masters, STATE_OK_TIMEOUT_MS)
  } finally {
    for (const c of clients) c.disconnect()
  }
}

/** Until every node (through `clients`, one each) says cluster_state:ok, all slots assigned, and knows `masters` nodes. */
export async function clusterAgrees(clients: Redis[], masters: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  for (;;) {
    const infos = await Promise.all(clients.map((c) => c.cluster('INFO').catch(String)))
    last = infos.join('\n---\n')
    const ok = infos.every(
      (info) => info.includes('cluster_state:ok') && info.includes('cluster_slots_assigned:16384') && info.includes(`cluster_known_nodes:${masters}`),
    )
    if (ok) return
    if (Date.now() > deadline) {
      throw new Error(`cluster of ${masters} not ok after ${timeoutMs} ms; CLUSTER INFO:\n${last}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** n distinct free ports: all listeners are held open until every port is known. */
async function distinctFreePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Server>((resolve, reject) => {
          const srv = net.createServer()
          srv.once('error', reject)
          srv.listen(0, HOST, () => resolve(srv))
        }),
    ),
  )
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port)
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))))
  return ports
}
