import { Cluster, Redis } from 'ioredis'

/** A connection to our Redis: one server, or a Cluster. */
export type RedisClient = Redis | Cluster

/**
 * Connects to Redis from a URL. `redis://host:port/db` is a standalone server;
 * `redis+cluster://host1:port1,host2:port2` names seed nodes of a Redis Cluster.
 */
export function connectRedis(url: string, name = 'metering', options: { blocking?: boolean } = {}): RedisClient {
  // BullMQ workers block on their connection and require commands never to be given up on.
  const retries = options.blocking ? { maxRetriesPerRequest: null } : { maxRetriesPerRequest: 3 }
  if (url.startsWith('redis+cluster://')) {
    const seeds = url
      .slice('redis+cluster://'.length)
      .split(',')
      .map((hostPort) => {
        const [host, port] = hostPort.split(':')
        return { host: host ?? '127.0.0.1', port: Number(port ?? 6379) }
      })
    return new Cluster(seeds, { redisOptions: { connectionName: name, ...retries }, enableReadyCheck: true })
  }
  // No auto-pipelining: its setImmediate hop cost more than its batching saved (bench/README.md).
  return new Redis(url, { connectionName: name, ...retries })
}
