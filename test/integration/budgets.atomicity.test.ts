// A script that fails part-way must leave nothing behind: Redis does not roll a script back,
// so the budget scripts queue every write and make them together at their end.
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Redis } from 'ioredis'
import { BudgetService } from '../../src/budgets/service.js'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { manualClock } from '../../src/kernel/clock.js'
import { Script } from '../../src/infra/redis/scripts.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

let redis: Redis
beforeAll(() => {
  redis = testRedis()
})
afterAll(async () => {
  await redis.quit()
})

async function rawState(tag: string) {
  const k = budgetKeys(tag)
  return {
    budget: await redis.hgetallBuffer(k.budget),
    open: await redis.zrange(k.open, 0, -1, 'WITHSCORES'),
    purge: await redis.zrange(k.purge, 0, -1, 'WITHSCORES'),
  }
}

test('an authorize that fails after applying an expiry in memory writes nothing; the expiry then applies once', async () => {
  const clock = manualClock(Date.UTC(2025, 4, 1, 12))
  const service = new BudgetService(redis, clock)
  const project = uniquePrefix()
  await service.upsert(project, { key: 'b', limits: [{ id: 'd', window: 'day', enforce: 'hard', amount: '10' }] })
  const hold = await service.authorize(project, { key: 'b', amount: '3', ttlMs: 1000, idempotencyKey: 'a' })
  if (!hold.ok) throw new Error(hold.message)
  clock.advance(1000)

  const tag = budgetTag(project, 'b')
  const before = await rawState(tag)
  const k = budgetKeys(tag)
  // An amount that is not a number makes the script fail after touchBudget expired the hold in memory.
  const broken = new Script('authorizeHold-4')
  await expect(broken.run(redis, [k.budget, k.open, k.purge, k.journal], [clock(), 'not-a-number', '0', '', 86_400_000, 'z'])).rejects.toThrow()
  expect(await rawState(tag)).toEqual(before)
  expect(await redis.hexists(k.budget, 'i:z')).toBe(0)

  const after = await service.get(project, 'b')
  expect(after.ok && after.value.balance.limits[0]).toMatchObject({ consumed: '3', held: '0' })
  const settle = await service.settle(project, { key: 'b', holdId: hold.value.holdId, amount: '3' })
  expect(settle.ok && settle.value).toMatchObject({ replayed: true, settledBy: 'expiry' })
  const again = await service.get(project, 'b')
  expect(again.ok && again.value.balance.limits[0]).toMatchObject({ consumed: '3', held: '0' })
})
