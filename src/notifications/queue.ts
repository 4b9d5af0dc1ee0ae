import { randomUUID } from 'node:crypto'
import { Queue } from 'bullmq'
import type { Logger } from 'pino'
import type { Blocked, LimitState } from '../budgets/types.js'
import type { LimitReachedDecision } from '../entitlements/usage.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { QUEUE_PREFIX } from '../infra/redis/keys.js'
import type { StoredInvoice, StoredLine } from '../invoices/types.js'
import { budgetExceededOf, invoiceNotificationsOf, limitReachedOf, notificationIdOf, type LimitReachedSource } from './build.js'
import { budgetExceededKey } from './keys.js'
import type { BudgetExceeded, LimitCrossed, Notification } from './types.js'

/** The hash-tagged prefix keeps each BullMQ queue in one Cluster slot, as BullMQ requires there. */
export const NOTIFICATIONS_QUEUE = 'notifications'
export const WEBHOOK_DELIVERIES_QUEUE = 'webhook-deliveries'

export {
  NOTIFICATION_TYPES,
  type BudgetExceeded,
  type InvoiceCreated,
  type InvoiceUpdated,
  type LimitCrossed,
  type LimitReached,
  type Notification,
  type NotificationType,
} from './types.js'
export { notificationIdOf } from './build.js'

const JOB_OPTIONS = { removeOnComplete: 1000, removeOnFail: 5000, attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const
/** How long a budget.exceeded dedup key outlives its period's end (and how long one of a period that never ends lives). */
const KEEP_AFTER_PERIOD_MS = 7 * 86_400_000
const FOREVER_TTL_MS = 400 * 86_400_000
/** The longest close() waits for notifications still being queued. */
const CLOSE_WAIT_MS = 2_000

/**
 * Queues notifications as BullMQ jobs for the notification worker (src/workers/notifications.ts),
 * which fans each one out to the project's webhook endpoints. Notifications of requests (budget
 * crossings and denials) are queued after the answer is on its way, never on the request's
 * critical path; a failure to queue them is logged, not raised to the caller. A notification
 * with a stable id (limit.reached, budget.exceeded, invoice.*) is queued under that job id, so
 * queuing it twice queues it once while the job is kept.
 */
export class Notifications {
  private readonly queue: Queue
  /** Notifications being queued without their caller waiting (limitCrossed, budgetExceeded): close() waits for them. */
  private readonly queuing = new Set<Promise<void>>()

  /**
   * `connection` is the queue's own: sharing the gateway's command connection with BullMQ cost
   * the budget hot path about 15% of its throughput (measured with bench/authorize).
   */
  constructor(
    private readonly connection: RedisClient,
    private readonly logger: Logger,
    queueName = NOTIFICATIONS_QUEUE,
  ) {
    this.queue = new Queue(queueName, { connection, prefix: QUEUE_PREFIX })
  }

  limitCrossed(event: Omit<LimitCrossed, 'type' | 'id'>): void {
    const job: LimitCrossed = { type: 'limit.crossed', id: 'ntf_' + randomUUID().replace(/-/g, ''), ...event }
    this.track(
      this.queue
        .add(job.type, job, JOB_OPTIONS)
        .catch((err: unknown) => this.logger.error({ err, event: job }, 'could not queue a limit.crossed notification')),
    )
  }

  /** Queues the limit.reached of decisions the counting scripts made (the ingest claim, a run's consume). */
  async limitReached(projectId: string, decisions: readonly LimitReachedDecision[], source: LimitReachedSource): Promise<void> {
    await this.addAll(decisions.map((d) => limitReachedOf(projectId, d, source)))
  }

  /**
   * A budget's hard limit denied an operation: budget.exceeded, once per (budget, limit, limit
   * amount, period). `SET NX` of a key named by them decides which denial sends it; a failure to
   * queue deletes the key again (the next denial retries). Never throws (logged).
   */
  budgetExceeded(input: {
    projectId: string
    budgetKey: string
    operation: BudgetExceeded['operation']
    amount: string
    blocked: Blocked
    limit: LimitState
    at: number
  }): void {
    const { projectId, budgetKey, blocked, limit } = input
    const key = budgetExceededKey(projectId, budgetKey, blocked.limitId, String(limit.amount), blocked.resetsAt === null ? 'never' : String(blocked.resetsAt))
    const ttlMs = blocked.resetsAt === null ? FOREVER_TTL_MS : Math.max(1000, blocked.resetsAt - input.at + KEEP_AFTER_PERIOD_MS)
    const event = budgetExceededOf(notificationIdOf(key), input)
    const send = async () => {
      if ((await this.connection.set(key, String(input.at), 'PX', ttlMs, 'NX')) !== 'OK') return
      try {
        await this.addAll([event])
      } catch (err) {
        await this.connection.del(key).catch(() => undefined)
        throw err
      }
    }
    this.track(send().catch((err: unknown) => this.logger.error({ err, event }, 'could not queue a budget.exceeded notification')))
  }

  private track(queuing: Promise<unknown>): void {
    const done = queuing.then(() => undefined)
    this.queuing.add(done)
    void done.finally(() => this.queuing.delete(done))
  }

  /**
   * An invoice was finalized: invoice.created, and invoice.updated for each earlier invoice whose
   * late usage its adjustment lines bill (`invoiceOfCycle` names the invoice of a cycle start).
   */
  async invoiceFinalized(invoice: StoredInvoice, lines: readonly StoredLine[], invoiceOfCycle: (cycleStartAt: number) => string, at: number): Promise<void> {
    await this.addAll(invoiceNotificationsOf(invoice, lines, invoiceOfCycle, at))
  }

  private async addAll(events: readonly Notification[]): Promise<void> {
    if (events.length === 0) return
    await this.queue.addBulk(events.map((event) => ({ name: event.type, data: event, opts: { ...JOB_OPTIONS, jobId: event.id } })))
  }

  /**
   * Once what is being queued is queued (a CLI command that crossed a limit exits right after),
   * or CLOSE_WAIT_MS passed (a Redis that does not answer must not hold a shutdown up).
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const gaveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, CLOSE_WAIT_MS)
    })
    await Promise.race([Promise.all(this.queuing), gaveUp])
    clearTimeout(timer)
    await this.queue.close()
    await this.connection.quit()
  }
}
