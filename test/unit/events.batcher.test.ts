// The group commit (src/events/batcher.ts): by count, by time, and by weight (the ingest
// worker's jobs sharing a ClickHouse insert, weighed by their rows). Its timers run on vitest's
// fake clock: time moves only when the test moves it.
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { Batcher } from '../../src/events/batcher.js'

/** A batcher whose commits are recorded and settled by the test. */
function recording(options: { maxWaitMs: number; maxItems: number; maxInFlight: number; maxWeight?: number }, weigh?: (n: number) => number) {
  const commits: { items: number[]; done: () => void }[] = []
  const batcher = new Batcher<number, number>(
    (items) =>
      new Promise((resolve) => {
        commits.push({ items, done: () => resolve(items.map((i) => i * 10)) })
      }),
    options,
    weigh,
  )
  return { batcher, commits }
}

describe('Batcher', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  test('a full batch by count goes at once; the rest waits for the timer', async () => {
    const { batcher, commits } = recording({ maxWaitMs: 5, maxItems: 3, maxInFlight: 4 })
    const answers = [1, 2, 3, 4].map((i) => batcher.submit(i))
    expect(commits.map((c) => c.items)).toEqual([[1, 2, 3]])
    await vi.advanceTimersByTimeAsync(4)
    expect(commits.map((c) => c.items)).toEqual([[1, 2, 3]]) // maxWaitMs has not passed yet
    await vi.advanceTimersByTimeAsync(1)
    expect(commits.map((c) => c.items)).toEqual([[1, 2, 3], [4]])
    for (const c of commits) c.done()
    expect(await Promise.all(answers)).toEqual([10, 20, 30, 40])
  })

  test('by weight: a batch goes once its items weigh maxWeight, and never weighs more unless one item alone does', async () => {
    const { batcher, commits } = recording({ maxWaitMs: 1_000, maxItems: 100, maxInFlight: 4, maxWeight: 10 }, (n) => n)
    const answers = [4, 4].map((i) => batcher.submit(i))
    expect(commits).toEqual([]) // 8 < 10: waits for company
    answers.push(batcher.submit(4)) // 12 ≥ 10: the first two go (8), the third would make 12
    expect(commits.map((c) => c.items)).toEqual([[4, 4]])
    answers.push(batcher.submit(30)) // 4 + 30 ≥ 10: 4 goes alone, then 30 alone
    expect(commits.map((c) => c.items)).toEqual([[4, 4], [4], [30]])
    for (const c of commits) c.done()
    expect(await Promise.all(answers)).toEqual([40, 40, 40, 300])
    await batcher.drain()
  })

  test('at the in-flight limit items gather, and go together when a commit finishes', async () => {
    const { batcher, commits } = recording({ maxWaitMs: 0, maxItems: 10, maxInFlight: 1 })
    const first = batcher.submit(1)
    await vi.advanceTimersByTimeAsync(0)
    expect(commits.map((c) => c.items)).toEqual([[1]])
    const later = [2, 3, 4].map((i) => batcher.submit(i))
    await vi.advanceTimersByTimeAsync(0)
    expect(commits).toHaveLength(1)
    commits[0]!.done()
    await first
    await vi.advanceTimersByTimeAsync(0)
    expect(commits.map((c) => c.items)).toEqual([[1], [2, 3, 4]])
    commits[1]!.done()
    expect(await Promise.all(later)).toEqual([20, 30, 40])
  })
})
