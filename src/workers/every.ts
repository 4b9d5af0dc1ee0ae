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
