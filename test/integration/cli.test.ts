// `npm run cli` builds its services with the gateway's wiring (src/container.ts), so what the
// gateway does on a change the CLI does too: a config document applied from the CLI touches a
// budget whose expired hold is settled on the way (at its full amount, past the limit), and the
// crossing is queued as a limit.crossed notification, as POST /v1/config/apply queues it. (The
// CLI once wired its own BudgetService without the notifier: budgets applied from it never
// notified.) The hold's 1 ms deadline passes while the CLI process starts: its clock is the
// system's, so the hold is made expired-by-then rather than moved past with an injected clock.
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Queue } from 'bullmq'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { QUEUE_PREFIX } from '../../src/infra/redis/keys.js'
import { systemClock } from '../../src/kernel/clock.js'
import { KeyService } from '../../src/keys/service.js'
import type { LimitCrossed } from '../../src/notifications/queue.js'
import { spawnNode } from '../support/processes.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

describe('npm run cli -- apply', () => {
  let redis: Redis
  let dir: string
  beforeAll(async () => {
    redis = testRedis()
    dir = await mkdtemp(path.join(os.tmpdir(), 'cli-test-'))
  })
  afterAll(async () => {
    await redis.quit()
    await rm(dir, { recursive: true, force: true })
  })

  it('queues limit.crossed for a budget the document crosses, like the gateway', async () => {
    const queueName = `notifications-${uniquePrefix()}`
    const keys = new KeyService(redis, systemClock)
    const { projectId } = await keys.createProject('cli')
    await keys.close()
    const budgets = new BudgetService(redis, systemClock)
    const limit = (amount: string) => ({ id: 'daily', window: 'never' as const, enforce: 'soft' as const, amount })
    expect((await budgets.upsert(projectId, { key: 'agent', limits: [limit('10')] })).ok).toBe(true)
    expect((await budgets.record(projectId, { key: 'agent', amount: '8', idempotencyKey: 'r1' })).ok).toBe(true)
    const hold = await budgets.authorize(projectId, { key: 'agent', amount: '4', ttlMs: 1, idempotencyKey: 'h1' })
    expect(hold.ok, JSON.stringify(hold)).toBe(true)
    const document = path.join(dir, 'budgets.json')
    await writeFile(document, JSON.stringify({ budgets: [{ key: 'agent', unit: 'USD', limits: [limit('10')] }] }))

    const cli = spawnNode('cli', 'src/bin/cli.ts', { REDIS_URL: inject('redisUrl'), METERING_NOTIFICATIONS_QUEUE: queueName, LOG_LEVEL: 'warn' }, [
      'apply',
      document,
      '--project',
      projectId,
    ])
    const exit = await cli.exited
    expect(exit.code, cli.output()).toBe(0)

    const queue = new Queue<LimitCrossed>(queueName, { connection: redis.duplicate(), prefix: QUEUE_PREFIX })
    try {
      const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized'])
      expect(jobs.map((j) => j.data)).toEqual([
        expect.objectContaining({
          type: 'limit.crossed',
          projectId,
          budgetKey: 'agent',
          crossed: [expect.objectContaining({ limitId: 'daily', amount: '10', consumed: '12' })],
        }),
      ])
    } finally {
      await queue.close()
    }
  })
})
