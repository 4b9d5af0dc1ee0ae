import { NOTIFICATIONS_QUEUE, WEBHOOK_DELIVERIES_QUEUE } from './queue.js'
import { envInt } from '../kernel/env.js'

/** How notifications are queued and webhooks delivered, with their defaults and environment variables. */
export interface NotificationOptions {
  /** The queue of notifications (one job per notification). */
  queueName: string
  /** The queue of webhook deliveries (one job per notification and endpoint). */
  deliveryQueueName: string
  /** Attempts per delivery, the first included. */
  attempts: number
  /** The first retry's delay; each next one doubles it (BullMQ's exponential backoff). */
  backoffMs: number
  /** How long a receiver has to answer one attempt. */
  timeoutMs: number
  /** Deliveries in flight per worker. */
  concurrency: number
  /** How many failed deliveries are kept per project (the newest). */
  failedKept: number
  /** Whether `npm start` runs the notification worker in-process. */
  worker: boolean
}

export const DEFAULT_NOTIFICATION_OPTIONS: NotificationOptions = {
  queueName: NOTIFICATIONS_QUEUE,
  deliveryQueueName: WEBHOOK_DELIVERIES_QUEUE,
  attempts: 8,
  backoffMs: 1000,
  timeoutMs: 10_000,
  concurrency: 16,
  failedKept: 1000,
  worker: true,
}

export function loadNotificationOptions(env: NodeJS.ProcessEnv = process.env): NotificationOptions {
  const d = DEFAULT_NOTIFICATION_OPTIONS
  return {
    queueName: env.METERING_NOTIFICATIONS_QUEUE || d.queueName,
    deliveryQueueName: env.METERING_WEBHOOK_QUEUE || d.deliveryQueueName,
    attempts: envInt(env, 'METERING_WEBHOOK_ATTEMPTS', d.attempts, 1),
    backoffMs: envInt(env, 'METERING_WEBHOOK_BACKOFF_MS', d.backoffMs, 0),
    timeoutMs: envInt(env, 'METERING_WEBHOOK_TIMEOUT_MS', d.timeoutMs, 1),
    concurrency: envInt(env, 'METERING_WEBHOOK_CONCURRENCY', d.concurrency, 1),
    failedKept: envInt(env, 'METERING_WEBHOOK_FAILED_KEPT', d.failedKept, 1),
    worker: env.METERING_NOTIFICATIONS_WORKER !== '0',
  }
}
