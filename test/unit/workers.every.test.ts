// The loop behind the expiry sweeps: one run at a time, errors reported and the loop kept, stop
// ends it. On vitest's fake clock, so no real time passes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { every, serialLoop } from '../../src/workers/every.js'

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

describe('serialLoop (the journal and invoice workers)', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('runs one at a time: runNow waits for the run in flight; the next run comes after delayAfter, or intervalMs after a failure', async () => {
    const started: number[] = []
    const finishers: ((more: boolean) => void)[] = []
    const failures: unknown[] = []
    const observed: boolean[] = []
    let fail = false
    const loop = serialLoop<boolean>({
      intervalMs: 100,
      work: () => {
        started.push(Date.now())
        if (fail) return Promise.reject(new Error('down'))
        return new Promise<boolean>((resolve) => finishers.push(resolve))
      },
      observe: (more) => observed.push(more),
      delayAfter: (more) => (more ? 0 : 100),
      onError: (err) => failures.push(err),
    })
    const t0 = Date.now()
    await vi.advanceTimersByTimeAsync(100)
    expect(started).toEqual([t0 + 100])
    const now = loop.runNow()
    await vi.advanceTimersByTimeAsync(500)
    expect(started).toHaveLength(1) // queued behind the run in flight, and no timer run meanwhile
    finishers[0]!(true)
    await vi.advanceTimersByTimeAsync(0)
    expect(started).toHaveLength(2)
    finishers[1]!(false)
    expect(await now).toBe(false)
    await vi.advanceTimersByTimeAsync(0)
    expect(started).toHaveLength(3) // the timer's run left more behind: the next at once
    fail = true
    finishers[2]!(false)
    await vi.advanceTimersByTimeAsync(99)
    expect(started).toHaveLength(3)
    await vi.advanceTimersByTimeAsync(1)
    expect(started).toHaveLength(4)
    expect(failures).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(100)
    expect(started).toHaveLength(5) // after a failure: intervalMs
    expect(observed).toEqual([true, false, false])
    await loop.close()
    await vi.advanceTimersByTimeAsync(1000)
    expect(started).toHaveLength(5)
  })
})
