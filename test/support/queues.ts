// Waiting for background work to finish, instead of waiting for time: a queue is idle when no
// job of it is waiting, active, delayed (a retry's backoff included) or otherwise pending.
import { Queue } from 'bullmq'
import { QUEUE_PREFIX } from '../../src/infra/redis/keys.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { waitFor } from './processes.js'

export async function untilQueuesIdle(connection: RedisClient, names: string[], timeoutMs = 20_000): Promise<void> {
  const queues = names.map((name) => new Queue(name, { connection: connection.duplicate(), prefix: QUEUE_PREFIX }))
  try {
    let counts: Record<string, number>[] = []
    await waitFor(
      `queues ${names.join(', ')} to be idle`,
      async () => {
        counts = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children')))
        return counts.every((c) => Object.values(c).every((n) => n === 0))
      },
      timeoutMs,
      { intervalMs: 20, detail: () => JSON.stringify(counts) },
    )
  } finally {
    for (const q of queues) {
      await q.close()
      await (q.opts.connection as RedisClient).quit().catch(() => undefined)
    }
  }
}
