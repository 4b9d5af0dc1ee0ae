import type { Logger } from 'pino'
import type { Clock } from '../kernel/clock.js'
import type { InvoiceService } from '../invoices/service.js'
import type { CloseReport } from '../invoices/types.js'
import { isUnavailable } from '../infra/availability.js'
import { serialLoop } from './every.js'

export interface InvoiceWorkerOptions {
  invoices: InvoiceService
  /** The clock cycles are closed at (injected: tests move it). */
  clock: Clock
  logger: Logger
  /** Pause between runs (METERING_INVOICE_INTERVAL_MS, default 60000). */
  intervalMs: number
  /** Told about every run (tests wait on it). */
  onRun?: (report: CloseReport) => void
  /** Only this project (tests: the Redis is shared); default every project with a catalog. */
  projectId?: string
}

export interface InvoiceWorker {
  /** Closes due cycles now (after the run in flight, if any). */
  runNow(): Promise<CloseReport>
  /** Stops the timer and waits for the run in flight. */
  close(): Promise<void>
}

/**
 * The invoice worker: every intervalMs, closes every ended billing cycle of every project into
 * its invoice (InvoiceService.closeDueCycles at clock()). One run at a time per worker; any number
 * of workers may run (gateways in-process, `npm run worker`): an invoice is created once whoever
 * closes its cycle (src/invoices/README.md).
 */
export function startInvoiceWorker(options: InvoiceWorkerOptions): InvoiceWorker {
  const { invoices, clock, logger, intervalMs, onRun, projectId } = options
  const loop = serialLoop({
    intervalMs,
    work: () => invoices.closeDueCycles(projectId, clock()),
    observe: (report) => {
      for (const e of report.errors)
        logger.error({ projectId: e.projectId, subscriptionId: e.subscriptionId, err: e.message }, 'closing a billing cycle failed; retried next run')
      if (report.created.length > 0 || report.finalized.length > 0)
        logger.info({ created: report.created.length, finalized: report.finalized.length }, 'invoices issued')
      onRun?.(report)
    },
    onError: (err) => logger[isUnavailable(err) ? 'warn' : 'error']({ err }, 'invoice run failed; retrying'),
  })
  return { runNow: loop.runNow, close: loop.close }
}
