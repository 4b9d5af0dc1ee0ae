/**
 * Runs `work` every `intervalMs` until stopped, one run at a time: a tick that finds the previous
 * run still going is skipped, so a slow sweep never piles up behind itself. The timer does not
 * keep the process alive.
 */
export function every(intervalMs: number, work: () => Promise<unknown>, onError: (err: unknown) => void): () => void {
  let running = false
  const timer = setInterval(() => {
    if (running) return
    running = true
    work()
      .catch(onError)
      .finally(() => {
        running = false
      })
  }, intervalMs)
  timer.unref()
  return () => clearInterval(timer)
}

export interface SerialLoop<T> {
  /** Runs `work` now (after the run in flight, if any). */
  runNow(): Promise<T>
  /** Stops the timer and waits for the run in flight. */
  close(): Promise<void>
}

/**
 * Runs `work` one run at a time, on a timer that does not keep the process alive: first after
 * `intervalMs`, then after `delayAfter(result)` ms (default `intervalMs`), and after a failed run
 * (told to `onError`) after `intervalMs`. `runNow()` runs it out of turn, queued behind a run in
 * flight; `observe` sees the result of every run, timer's or not. The journal and invoice workers.
 */
export function serialLoop<T>(options: {
  intervalMs: number
  work: () => Promise<T>
  observe?: (result: T) => void
  delayAfter?: (result: T) => number
  onError: (err: unknown) => void
}): SerialLoop<T> {
  const { intervalMs, work, observe, delayAfter, onError } = options
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let current: Promise<T> | undefined

  const run = (): Promise<T> => {
    const previous = current ?? Promise.resolve(undefined)
    const next = previous.catch(() => undefined).then(work)
    current = next
    next
      .then(
        (result) => observe?.(result),
        () => undefined,
      )
      .finally(() => {
        if (current === next) current = undefined
      })
    return next
  }
  const schedule = (ms: number) => {
    if (stopped) return
    timer = setTimeout(tick, ms)
    timer.unref()
  }
  const tick = () => {
    timer = undefined
    run().then(
      (result) => schedule(delayAfter ? delayAfter(result) : intervalMs),
      (err: unknown) => {
        onError(err)
        schedule(intervalMs)
      },
    )
  }
  schedule(intervalMs)

  return {
    runNow: run,
    async close() {
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
      await current?.catch(() => undefined)
    },
  }
}
