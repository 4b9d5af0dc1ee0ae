import { randomBytes } from 'node:crypto'
import { Queue } from 'bullmq'
import type { Clock } from '../kernel/clock.js'
import { failure, invalid, success, type Result } from '../kernel/errors.js'
import { QUEUE_PREFIX } from '../infra/redis/keys.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import type { DeliveryJobData } from './delivery.js'
import { endpointsKey, failedIndexKey, failedKey } from './keys.js'
import { DEFAULT_NOTIFICATION_OPTIONS, type NotificationOptions } from './options.js'
import type { Notification, NotificationType } from './queue.js'
import { generateSecret } from './signature.js'

/** Endpoints a project may have. */
export const MAX_ENDPOINTS = 20

/** A project's webhook endpoint as stored (the secret included). */
export interface WebhookEndpoint {
  id: string
  url: string
  secret: string
  events: NotificationType[]
  enabled: boolean
  createdAt: number
  updatedAt: number
}

/** What the routes show of an endpoint: everything but the secret. */
export type WebhookView = Omit<WebhookEndpoint, 'secret'>

export interface UpsertWebhook {
  id?: string
  url: string
  secret?: string
  events: NotificationType[]
  enabled?: boolean
}

/** A delivery that failed every attempt. */
export interface FailedDelivery {
  deliveryId: string
  endpointId: string
  url: string
  notificationId: string
  type: NotificationType
  attempts: number
  /** The last attempt's HTTP status, when the receiver answered. */
  lastStatus: number | null
  lastError: string
  failedAt: number
  notification: Notification
}

const view = ({ secret: _secret, ...rest }: WebhookEndpoint): WebhookView => rest

/** http or https, with a host, no credentials in it; the problem otherwise. */
export function urlProblem(text: string): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'must be an absolute URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL'
  if (!url.hostname) return 'must name a host'
  if (url.username || url.password) return 'must not carry credentials'
  return undefined
}

/**
 * Webhook endpoints per project, and the deliveries that failed, in Redis (keys.ts): one hash
 * of endpoints per project (field = endpoint id, value = its JSON), and the failed deliveries in
 * a hash by delivery id with a sorted set giving their order.
 */
export class WebhookService {
  /** `delivery`: where replayed deliveries are queued and how often they are tried (the container's notification options). */
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly delivery: Pick<NotificationOptions, 'deliveryQueueName' | 'attempts' | 'backoffMs'> = DEFAULT_NOTIFICATION_OPTIONS,
  ) {}

  /**
   * Creates an endpoint (`id` absent or new) or replaces what the body says of an existing one.
   * A secret is generated when a new endpoint has none, and returned this once; an update
   * without `secret` keeps the stored one.
   */
  async upsert(projectId: string, body: UpsertWebhook): Promise<Result<WebhookView & { created: boolean; secret?: string }>> {
    const problem = urlProblem(body.url)
    if (problem) return invalid([{ path: '$.url', message: problem }])
    const id = body.id ?? 'wh_' + randomBytes(12).toString('hex')
    const key = endpointsKey(projectId)
    const storedText = await this.redis.hget(key, id)
    const stored = storedText ? (JSON.parse(storedText) as WebhookEndpoint) : undefined
    if (!stored && (await this.redis.hlen(key)) >= MAX_ENDPOINTS) {
      return failure('conflict', 'too_many_webhooks', `A project has at most ${MAX_ENDPOINTS} webhook endpoints; delete one first.`)
    }
    const now = this.clock()
    const generated = !stored && body.secret === undefined ? generateSecret() : undefined
    const endpoint: WebhookEndpoint = {
      id,
      url: body.url,
      secret: body.secret ?? stored?.secret ?? generated!,
      events: [...body.events],
      enabled: body.enabled ?? stored?.enabled ?? true,
      createdAt: stored?.createdAt ?? now,
      updatedAt: now,
    }
    await this.redis.hset(key, id, JSON.stringify(endpoint))
    return success({ ...view(endpoint), created: !stored, ...(generated ? { secret: generated } : {}) })
  }

  async list(projectId: string, event?: NotificationType): Promise<Result<{ webhooks: WebhookView[] }>> {
    const all = await this.endpoints(projectId)
    const webhooks = all.filter((e) => event === undefined || e.events.includes(event)).map(view)
    return success({ webhooks })
  }

  /** Deletes an endpoint; deleting one that does not exist (or no longer) answers `deleted: false`. */
  async delete(projectId: string, id: string): Promise<Result<{ id: string; deleted: boolean }>> {
    const removed = await this.redis.hdel(endpointsKey(projectId), id)
    return success({ id, deleted: removed > 0 })
  }

  /** Every endpoint of the project, secrets included, in creation order. */
  async endpoints(projectId: string): Promise<WebhookEndpoint[]> {
    const all = await this.redis.hgetall(endpointsKey(projectId))
    return Object.values(all)
      .map((text) => JSON.parse(text) as WebhookEndpoint)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  }

  async endpoint(projectId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const text = await this.redis.hget(endpointsKey(projectId), id)
    return text ? (JSON.parse(text) as WebhookEndpoint) : undefined
  }

  /**
   * Records a delivery that failed every attempt. Idempotent by delivery id (a worker that
   * dies after recording and retries records the same entry); keeps the newest `kept`.
   */
  async recordFailure(projectId: string, failed: FailedDelivery, kept: number): Promise<void> {
    const index = failedIndexKey(projectId)
    await this.redis.multi().hset(failedKey(projectId), failed.deliveryId, JSON.stringify(failed)).zadd(index, failed.failedAt, failed.deliveryId).exec()
    const excess = (await this.redis.zcard(index)) - kept
    if (excess > 0) {
      const old = await this.redis.zrange(index, 0, excess - 1)
      if (old.length > 0)
        await this.redis
          .multi()
          .zrem(index, ...old)
          .hdel(failedKey(projectId), ...old)
          .exec()
    }
  }

  /** The failed deliveries, newest first. */
  async failures(projectId: string, limit: number): Promise<Result<{ failures: FailedDelivery[] }>> {
    const ids = await this.redis.zrevrange(failedIndexKey(projectId), 0, limit - 1)
    if (ids.length === 0) return success({ failures: [] })
    const texts = await this.redis.hmget(failedKey(projectId), ...ids)
    return success({ failures: texts.filter((t): t is string => t !== null).map((t) => JSON.parse(t) as FailedDelivery) })
  }

  /**
   * Queues failed deliveries of the project again (POST /v1/webhooks/failures/replay): each under
   * its delivery id, so receivers see the same `x-metering-delivery`, with the full attempts, then
   * takes it off the failed list (a replay that fails every attempt again is recorded again). A
   * finished job of that id is removed first (BullMQ adds nothing under the id of a job it still
   * keeps); one waiting or running is left to run. Ids not in the failed list are `notFound`.
   */
  async replayFailures(projectId: string, deliveryIds: readonly string[]): Promise<Result<{ requeued: string[]; notFound: string[] }>> {
    const ids = [...new Set(deliveryIds)]
    const texts = ids.length > 0 ? await this.redis.hmget(failedKey(projectId), ...ids) : []
    const failed = texts.filter((t): t is string => t !== null).map((t) => JSON.parse(t) as FailedDelivery)
    const notFound = ids.filter((_, i) => texts[i] === null)
    if (failed.length === 0) return success({ requeued: [], notFound })
    const connection = this.redis.duplicate()
    const queue = new Queue<DeliveryJobData>(this.delivery.deliveryQueueName, { connection, prefix: QUEUE_PREFIX })
    const requeued: string[] = []
    try {
      for (const f of failed) {
        await this.requeue(queue, f)
        await this.redis.multi().zrem(failedIndexKey(projectId), f.deliveryId).hdel(failedKey(projectId), f.deliveryId).exec()
        requeued.push(f.deliveryId)
      }
    } finally {
      await queue.close()
      await connection.quit().catch(() => undefined)
    }
    return success({ requeued, notFound })
  }

  /** Adds the delivery job of a failed delivery unless a job of its id is still waiting or running. */
  private async requeue(queue: Queue<DeliveryJobData>, f: FailedDelivery): Promise<void> {
    const job = await queue.getJob(f.deliveryId)
    const state = job ? await job.getState() : 'unknown'
    if (job && state !== 'completed' && state !== 'failed' && state !== 'unknown') return
    if (job) await job.remove()
    const { attempts, backoffMs } = this.delivery
    await queue.add(
      f.type,
      { deliveryId: f.deliveryId, endpointId: f.endpointId, notification: { ...f.notification, id: f.notificationId } },
      { jobId: f.deliveryId, attempts, backoff: { type: 'exponential', delay: backoffMs }, removeOnComplete: 1000, removeOnFail: 5000 },
    )
  }
}
