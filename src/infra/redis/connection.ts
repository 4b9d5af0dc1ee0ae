import { Cluster, Redis } from 'ioredis'
import { attachLean, leanTarget } from './lean.js'
import { attachLeanCluster } from './leanCluster.js'

/** A connection to our Redis: one server, or a Cluster. */
export type RedisClient = Redis | Cluster

export interface ConnectOptions {
  /** For BullMQ workers, which block on their connection and require commands never to be given up on. */
  blocking?: boolean
  /**
   * Rejects a command not answered within this many milliseconds ("Command timed out", which
   * src/infra/availability.ts counts as unavailable: a 503). Not for blocking connections.
   */
  commandTimeoutMs?: number
  /**
   * Told of a connection error (refused, reset, …) once per outage: the first error after the
   * connection was ready, not each of ioredis' reconnect attempts. Duplicates of the client
   * (`duplicate()`, for subscribers and queues) report here too. Without it, errors go unreported
   * (ioredis would print each one to the console as an unhandled error event).
   */
  onError?: (err: Error) => void
  /**
   * Script calls (FCALL) on a socket of their own with a lean RESP client (src/infra/redis/lean.ts)
   * instead of through ioredis: on by default for a standalone server (`redis://`) and for a Cluster
   * (one per master, src/infra/redis/leanCluster.ts), never for TLS or a blocking connection. ioredis still carries them while that socket is not ready.
   * Default: on unless the environment has METERING_REDIS_LEAN=0 (an escape hatch, and the B side of
   * an A/B benchmark: `B_ENV=METERING_REDIS_LEAN=0`).
   */
  leanScripts?: boolean
}

/**
 * Connects to Redis from a URL. `redis://host:port/db` is a standalone server;
 * `redis+cluster://host1:port1,host2:port2` names seed nodes of a Redis Cluster.
 * While the server is unreachable the client reconnects on its own (ioredis' backoff); commands
 * made meanwhile wait in its queue until the connection is back or their timeout passes.
 */
export function connectRedis(url: string, name = 'metering', options: ConnectOptions = {}): RedisClient {
  const retries = options.blocking
    ? { maxRetriesPerRequest: null }
    : { maxRetriesPerRequest: 3, ...(options.commandTimeoutMs ? { commandTimeout: options.commandTimeoutMs } : {}) }
  const leanScripts = options.leanScripts ?? process.env.METERING_REDIS_LEAN !== '0'
  if (url.startsWith('redis+cluster://')) {
    const seeds = url
      .slice('redis+cluster://'.length)
      .split(',')
      .map((hostPort) => {
        const [host, port] = hostPort.split(':')
        return { host: host ?? '127.0.0.1', port: Number(port ?? 6379) }
      })
    const cluster = reportErrors(new Cluster(seeds, { redisOptions: { connectionName: name, ...retries }, enableReadyCheck: true }), options.onError)
    const timeoutMs = options.commandTimeoutMs && options.commandTimeoutMs > 0 ? options.commandTimeoutMs : undefined
    if (!options.blocking && leanScripts) attachLeanCluster(cluster, { name, timeoutMs })
    return cluster
  }
  // No auto-pipelining: its setImmediate hop cost more than its batching saved (bench/README.md).
  const client = reportErrors(new Redis(url, { connectionName: name, ...retries }), options.onError)
  const lean = options.blocking || !leanScripts ? undefined : leanTarget(url, name, options.commandTimeoutMs)
  if (lean) attachLean(client, lean, () => client.status === 'ready')
  return client
}

/** Listens for the client's errors (and its duplicates'), passing on the first of each outage. */
function reportErrors<C extends RedisClient>(client: C, report: ((err: Error) => void) | undefined): C {
  let reported = false
  client.on('error', (err: Error) => {
    if (!reported) report?.(err)
    reported = true
  })
  client.on('ready', () => {
    reported = false
  })
  const duplicate = client.duplicate.bind(client) as (...args: unknown[]) => RedisClient
  ;(client as { duplicate: (...args: unknown[]) => RedisClient }).duplicate = (...args) => reportErrors(duplicate(...args), report)
  return client
}

/**
 * QUIT, or — when the server does not answer within `timeoutMs` (stalled, gone, reconnecting) —
 * drops the connection: a stop never waits on an unreachable Redis.
 */
export async function closeRedis(redis: RedisClient, timeoutMs = 1_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const gaveUp = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs)
  })
  try {
    const outcome = await Promise.race([redis.quit().catch(() => 'failed' as const), gaveUp])
    if (outcome !== 'OK') redis.disconnect()
  } finally {
    clearTimeout(timer)
  }
}
