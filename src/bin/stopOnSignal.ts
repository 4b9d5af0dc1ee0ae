import type { Logger } from 'pino'

/**
 * On SIGTERM or SIGINT (the first one; later ones are ignored): runs `stop`, then exits 0, or 1
 * when it fails. However stuck a store is, the process exits by `deadlineMs` (code 1).
 * The gateway's and the worker's graceful stop (README "Failures and shutdown").
 */
export function stopOnSignal(logger: Logger, deadlineMs: number, stop: () => Promise<void>): void {
  let stopping = false
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    logger.info({ signal, deadlineMs }, 'stopping')
    setTimeout(() => {
      logger.error({ deadlineMs }, 'stop did not finish by the deadline; exiting')
      process.exit(1)
    }, deadlineMs).unref()
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'stop failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
}
