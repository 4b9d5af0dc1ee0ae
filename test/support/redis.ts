// Clients for the servers started by ./globalSetup.ts. Each call returns a new
// client; the test owns it and should quit()/disconnect() it in afterAll.

import { randomBytes } from 'node:crypto'
import { Cluster, Redis } from 'ioredis'
import { inject } from 'vitest'

/** A new client to the shared standalone redis-server. */
export function testRedis(): Redis {
  return new Redis(inject('redisUrl'), { lazyConnect: false })
}

/** A new client to the shared 3-master cluster. */
export function testCluster(): Cluster {
  return new Cluster(inject('clusterNodes'), { lazyConnect: false })
}

/**
 * A short random id (e.g. "t3f9a0c1b") to prefix a test's keys, so tests can
 * share the servers without flushing or colliding. On the cluster, wrap it in
 * a hash tag ("{t3f9a0c1b}:...") where keys must share a slot.
 */
export function uniquePrefix(): string {
  return `t${randomBytes(4).toString('hex')}`
}
