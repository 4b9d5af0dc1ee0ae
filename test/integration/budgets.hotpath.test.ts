// What the authorize hot path keeps between calls must never change an answer:
// - the Lua library remembers decoded budget configurations (keyed by the stored bytes), so a
//   changed configuration must be seen by the very next call, on every budget that has it;
// - script calls of one event-loop turn share socket writes (up to 16 per write), and each still
//   gets its own reply.
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Redis } from 'ioredis'
import { BudgetService } from '../../src/budgets/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

let redis: Redis
beforeAll(async () => {
  redis = testRedis()
  await redis.ping()
})
afterAll(async () => {
  await redis.quit()
})

const day = (amount: string) => [{ id: 'd', window: 'day' as const, enforce: 'hard' as const, amount }]

test('a configuration change is seen by the next authorize, and budgets with the same configuration stay apart', async () => {
  const clock = manualClock(Date.UTC(2025, 4, 1, 12))
  const budgets = new BudgetService(redis, clock)
  const project = uniquePrefix()
  const authorize = (key: string, amount: string, idempotencyKey: string) => budgets.authorize(project, { key, amount, idempotencyKey })

  await budgets.upsert(project, { key: 'a', limits: day('10') })
  expect((await authorize('a', '6', 'a1')).ok).toBe(true)
  // Lowered below what is held: the next authorize must use 5, not the 10 it saw before.
  await budgets.upsert(project, { key: 'a', limits: day('5') })
  const denied = await authorize('a', '1', 'a2')
  expect(denied.ok).toBe(false)
  if (!denied.ok) expect(denied.reason).toBe('budget_exceeded')

  // Another budget with byte-for-byte the same configuration: its own counters.
  await budgets.upsert(project, { key: 'b', limits: day('5') })
  const b1 = await authorize('b', '5', 'b1')
  expect(b1.ok && b1.value.balance.remaining).toBe('0')
  expect((await authorize('b', '0.00000001', 'b2')).ok).toBe(false)

  // Raised again, and a closing time: both take effect at once.
  await budgets.upsert(project, { key: 'a', limits: day('7') })
  const a3 = await authorize('a', '1', 'a3')
  expect(a3.ok && a3.value.balance.remaining).toBe('0')
  await budgets.upsert(project, { key: 'a', limits: day('100'), closesAt: clock() })
  const closed = await authorize('a', '1', 'a4')
  expect(!closed.ok && closed.reason).toBe('budget_closed')
})

test('authorizes started in one event-loop turn go to Redis in writes of up to 16, each answered with its own hold', async () => {
  const clock = manualClock(Date.UTC(2025, 4, 1, 12))
  const budgets = new BudgetService(redis, clock)
  const project = uniquePrefix()
  await budgets.upsert(project, { key: 'k', limits: day('30') })

  // Count the socket's writes (Node calls _write or _writev once per write it makes).
  const socket = (redis as unknown as { stream: { _write: (...a: unknown[]) => unknown; _writev: (...a: unknown[]) => unknown } }).stream
  const { _write, _writev } = socket
  let writes = 0
  socket._write = function (this: unknown, ...a: unknown[]) {
    writes++
    return _write.apply(this, a)
  }
  socket._writev = function (this: unknown, ...a: unknown[]) {
    writes++
    return _writev.apply(this, a)
  }
  try {
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => budgets.authorize(project, { key: 'k', amount: '1', idempotencyKey: `i${i}` })))
    expect(writes).toBe(3) // 16 + 16 + 8
    // 30 fit under the limit of 30, each with a hold of its own; the other 10 are denied.
    const holds = answers.flatMap((a) => (a.ok ? [a.value.holdId] : []))
    expect(new Set(holds).size).toBe(30)
    expect(answers.filter((a) => !a.ok && a.reason === 'budget_exceeded')).toHaveLength(10)
  } finally {
    socket._write = _write
    socket._writev = _writev
  }
})
