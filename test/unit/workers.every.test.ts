// The loop behind the expiry sweeps: one run at a time, errors reported and the loop kept, stop
// ends it. On vitest's fake clock, so no real time passes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { every } from '../../src/workers/every.js'

describe('every', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('skips a tick while the previous run is still going, then runs again', async () => {
    let finish: () => void = () => {}
    let runs = 0
    const stop = every(
      100,
      () => {
        runs++
        return new Promise<void>((resolve) => {
          finish = resolve
        })
      },
      () => {},
    )
    await vi.advanceTimersByTimeAsync(350)
    expect(runs).toBe(1)
    finish()
    await vi.advanceTimersByTimeAsync(100)
    expect(runs).toBe(2)
    stop()
    finish()
    await vi.advanceTimersByTimeAsync(1000)
    expect(runs).toBe(2)
  })

  it('reports a failed run and keeps going', async () => {
    const errors: unknown[] = []
    let runs = 0
    const stop = every(
      50,
      async () => {
        runs++
        throw new Error(`run ${runs}`)
      },
      (err) => errors.push(err),
    )
    await vi.advanceTimersByTimeAsync(160)
    stop()
    expect(runs).toBe(3)
    expect(errors.map((e) => (e as Error).message)).toEqual(['run 1', 'run 2', 'run 3'])
  })
})
