import { Queue, Worker, type Job } from 'bullmq'
import type { Logger } from 'pino'
import type { Clock } from '../kernel/clock.js'
import { attemptDelivery, deliveryIdOf, payloadOf, type DeliveryJobData } from '../notifications/delivery.js'
import type { NotificationOptions } from '../notifications/options.js'
import { QUEUE_PREFIX } from '../infra/redis/keys.js'
import type { Notification } from '../notifications/queue.js'
import type { WebhookService } from '../notifications/webhooks.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { isUnavailable } from '../infra/availability.js'

export interface NotificationWorkerOptions {
  /** A connection made for BullMQ workers: `connectRedis(url, name, { blocking: true })`. */
  connection: RedisClient
  webhooks: WebhookService
  clock: Clock
  logger: Logger
  options: NotificationOptions
  /** Told of each delivery attempt's outcome (the metrics' webhook deliveries counter). */
  onDelivery?: ((outcome: DeliveryOutcome) => void) | undefined
}

/**
 * What one delivery attempt came to: `delivered` (2xx), `failed_attempt` (it threw: retried with
 * backoff while attempts remain), `dead` (the last attempt failed: recorded in the failed list),
 * `skipped` (the endpoint was deleted, disabled or unsubscribed meanwhile).
 */
export type DeliveryOutcome = 'delivered' | 'failed_attempt' | 'dead' | 'skipped'

export interface NotificationWorker {
  notifications: Worker<Notification>
  deliveries: Worker<DeliveryJobData>
  close(): Promise<void>
}

/**
 * The processors of notifications (src/notifications/README.md):
 * - the notifications queue: each notification fans out into one delivery job per enabled
 *   endpoint of its project subscribed to its type (job id = the delivery id, so a fan-out
 *   retried after a crash adds nothing twice);
 * - the deliveries queue: each job POSTs the signed notification to its endpoint; a failed
 *   attempt throws and BullMQ retries it with exponential backoff; the last failed attempt
 *   records the delivery in the project's failed list and completes the job.
 * The endpoint is read at each attempt: a deleted or disabled endpoint, or one no longer
 * subscribed to the type, ends its deliveries (completed, skipped).
 */
export function startNotificationWorker(input: NotificationWorkerOptions): NotificationWorker {
  const { connection, webhooks, logger, options } = input
  const deliveryQueue = new Queue<DeliveryJobData>(options.deliveryQueueName, { connection, prefix: QUEUE_PREFIX })

  const fanOut = fanOutTo(deliveryQueue, webhooks, options)
  const deliver = deliverWith(input)

  const notifications = new Worker<Notification>(options.queueName, fanOut, { connection, prefix: QUEUE_PREFIX, concurrency: 4 })
  const deliveries = new Worker<DeliveryJobData>(options.deliveryQueueName, deliver, { connection, prefix: QUEUE_PREFIX, concurrency: options.concurrency })
  // A Redis outage is a warning (the workers reconnect on their own); anything else an error.
  notifications.on('error', (err) => logger[isUnavailable(err) ? 'warn' : 'error']({ err }, 'notification worker error'))
  deliveries.on('error', (err) => logger[isUnavailable(err) ? 'warn' : 'error']({ err }, 'webhook delivery worker error'))
  notifications.on('failed', (job, err) => logger.warn({ err, jobId: job?.id }, 'notification fan-out attempt failed'))
  deliveries.on('failed', (job, err) => {
    input.onDelivery?.('failed_attempt')
    logger.warn(
      { err: err.message, jobId: job?.id, attemptsMade: job?.attemptsMade },
      'webhook delivery attempt failed (retried with backoff while attempts remain)',
    )
  })
  return {
    notifications,
    deliveries,
    async close() {
      await notifications.close()
      await deliveries.close()
      await deliveryQueue.close()
    },
  }
}

/** The fan-out processor: one delivery job per endpoint subscribed to the notification's type. */
function fanOutTo(deliveryQueue: Queue<DeliveryJobData>, webhooks: NotificationWorkerOptions['webhooks'], options: NotificationWorkerOptions['options']) {
  return async (job: Job<Notification>): Promise<{ deliveries: number }> => {
    const notification = { ...job.data, id: job.data.id ?? `ntf_job_${job.id}` }
    const endpoints = (await webhooks.endpoints(notification.projectId)).filter((e) => e.enabled && e.events.includes(notification.type))
    if (endpoints.length === 0) return { deliveries: 0 }
    await deliveryQueue.addBulk(
      endpoints.map((endpoint) => {
        const deliveryId = deliveryIdOf(notification.id, endpoint.id)
        return {
          name: notification.type,
          data: { deliveryId, endpointId: endpoint.id, notification },
          opts: {
            jobId: deliveryId,
            attempts: options.attempts,
            backoff: { type: 'exponential', delay: options.backoffMs },
            removeOnComplete: 1000,
            removeOnFail: 5000,
          },
        }
      }),
    )
    return { deliveries: endpoints.length }
  }
}

/** The delivery processor: POSTs one signed notification; the last failed attempt is recorded, not thrown. */
function deliverWith(input: NotificationWorkerOptions) {
  const { webhooks, clock, logger, options } = input
  const outcome = input.onDelivery ?? (() => {})
  const skip = (skipped: string) => {
    outcome('skipped')
    return { delivered: false, skipped }
  }
  return async (job: Job<DeliveryJobData>): Promise<{ delivered: boolean; status?: number | null; skipped?: string }> => {
    const { deliveryId, endpointId, notification } = job.data
    const endpoint = await webhooks.endpoint(notification.projectId, endpointId)
    if (!endpoint) return skip('endpoint deleted')
    if (!endpoint.enabled) return skip('endpoint disabled')
    if (!endpoint.events.includes(notification.type)) return skip('endpoint no longer subscribed')
    const result = await attemptDelivery({
      url: endpoint.url,
      secret: endpoint.secret,
      type: notification.type,
      deliveryId,
      body: payloadOf(notification),
      nowS: Math.floor(clock() / 1000),
      timeoutMs: options.timeoutMs,
    })
    if (result.ok) {
      outcome('delivered')
      return { delivered: true, status: result.status }
    }
    const attempts = job.opts.attempts ?? 1
    if (job.attemptsMade + 1 < attempts) throw new Error(`delivery ${deliveryId} to ${endpoint.url}: ${result.error}`)
    await webhooks.recordFailure(
      notification.projectId,
      {
        deliveryId,
        endpointId,
        url: endpoint.url,
        notificationId: notification.id,
        type: notification.type,
        attempts,
        lastStatus: result.status,
        lastError: result.error ?? 'failed',
        failedAt: clock(),
        notification,
      },
      options.failedKept,
    )
    logger.error(
      { deliveryId, endpointId, url: endpoint.url, attempts, error: result.error },
      'webhook delivery failed every attempt: recorded in the failed list',
    )
    outcome('dead')
    return { delivered: false, status: result.status }
  }
}
