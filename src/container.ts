// The one wiring of the domain services and the background work, used by every entry point
// (src/bin/gateway.ts, src/bin/worker.ts, src/bin/cli.ts), so they cannot drift apart.

import type { Logger } from 'pino'
import { AnalyticsService } from './analytics/service.js'
import { BudgetService } from './budgets/service.js'
import { CatalogService } from './catalog/service.js'
import { EntitlementService } from './entitlements/service.js'
import { clickHouseEventSink } from './events/clickhouse.js'
import { loadEventOptions, type EventOptions } from './events/options.js'
import { DEAD_LETTER_QUEUE, INGEST_QUEUE } from './events/queue.js'
import { EventService } from './events/service.js'
import type { Services } from './http/services.js'
import type { ClickHouseStore } from './infra/clickhouse/store.js'
import { connectRedis, type RedisClient } from './infra/redis/connection.js'
import { requireReplicas } from './infra/redis/replicas.js'
import { InvoiceService } from './invoices/service.js'
import { walletForInvoices } from './invoices/wallet.js'
import type { Clock } from './kernel/clock.js'
import type { Config } from './kernel/config.js'
import { KeyService } from './keys/service.js'
import { loadNotificationOptions, type NotificationOptions } from './notifications/options.js'
import { Notifications } from './notifications/queue.js'
import { WebhookService } from './notifications/webhooks.js'
import { PaymentService } from './payments/service.js'
import { RateLimiter } from './ratelimit/limiter.js'
import { RunService } from './runs/service.js'
import { WalletService } from './wallet/service.js'
import { startHoldExpiry } from './workers/holdExpiry.js'
import { startIngestWorker, type IngestWorker } from './workers/ingest.js'
import { startInvoiceWorker, type InvoiceWorker } from './workers/invoices.js'
import { startJournalWorker, type JournalWorker } from './workers/journal.js'
import { startNotificationWorker, type DeliveryOutcome, type NotificationWorker } from './workers/notifications.js'
import { startRunExpiry } from './workers/runExpiry.js'
import { isUnavailable } from './infra/availability.js'

export interface ContainerOptions {
  config: Config
  redis: RedisClient
  clock: Clock
  logger: Logger
  /** The usage history; undefined: analytics answer from no data and no history is written. */
  clickhouse?: ClickHouseStore | undefined
  /** Overrides of the environment's ingestion options (src/events/options.ts). */
  events?: Partial<EventOptions> | undefined
  /** Overrides of the environment's notification options (src/notifications/options.ts). */
  notifications?: Partial<NotificationOptions> | undefined
  /** The gateway's public URL for payment setup links; default METERING_PUBLIC_URL. */
  publicUrl?: () => string
}

export interface Container {
  config: Config
  logger: Logger
  services: Services
  /** The notification queue every domain's notices go to (src/notifications/README.md). */
  notifications: Notifications
  notificationOptions: NotificationOptions
  eventOptions: EventOptions
  /** The per-key request rate limit; undefined unless METERING_RATE_LIMIT is set. */
  rateLimiter: RateLimiter | undefined
  /** Closes the connections the services opened (not `redis`, which the caller owns). */
  close(): Promise<void>
}

/** Builds every domain service over one Redis (and the history when there is one). */
export function buildServices(options: ContainerOptions): Container {
  const { config, redis, clock, logger, clickhouse } = options
  const notificationOptions = { ...loadNotificationOptions(), ...options.notifications }
  const eventOptions = { ...loadEventOptions(), ...options.events }
  requireReplicas(redis, config.redisWaitReplicas, config.redisWaitTimeoutMs) // METERING_REDIS_WAIT_REPLICAS (0: off)
  const notifications = new Notifications(redis.duplicate(), logger, notificationOptions.queueName)
  const budgets = new BudgetService(redis, clock, {
    onCrossed: (projectId, budgetKey, crossed) => notifications.limitCrossed({ projectId, budgetKey, crossed, at: clock() }),
    onExceeded: (denial) => notifications.budgetExceeded(denial),
  })
  const catalog = new CatalogService(redis, clock, budgets)
  const entitlements = new EntitlementService(redis, clock)
  const analytics = new AnalyticsService(clickhouse, clock, catalog, entitlements, budgets)
  const events = new EventService(redis, redis.duplicate(), clock, logger, eventOptions)
  const keys = new KeyService(redis, clock, config.rootKey)
  const publicUrl = options.publicUrl ?? (() => config.publicUrl ?? '')
  const services: Services = {
    analytics,
    budgets,
    catalog,
    entitlements,
    events,
    history: clickhouse,
    invoices: new InvoiceService(redis, clock, clickhouse, walletForInvoices(redis, clock), {}, (invoice, lines, invoiceOfCycle) =>
      notifications
        .invoiceFinalized(invoice, lines, invoiceOfCycle, clock())
        .catch((err: unknown) => logger.error({ err, invoiceId: invoice.id }, 'could not queue invoice notifications')),
    ),
    keys,
    payments: new PaymentService(redis, clock, {
      baseUrl: publicUrl,
      setupTtlMs: config.paymentSetupTtlMs,
      stripeSecretKey: config.stripeSecretKey,
      squareAccessToken: config.squareAccessToken,
    }),
    runs: new RunService(redis, clock, budgets, (projectId, runId, decision) =>
      notifications
        .limitReached(projectId, [decision], { kind: 'run', runId })
        .catch((err: unknown) => logger.error({ err, projectId, runId }, 'could not queue limit.reached')),
    ),
    wallet: new WalletService(redis, clock),
    webhooks: new WebhookService(redis, clock, notificationOptions),
  }
  return {
    config,
    logger,
    services,
    notifications,
    notificationOptions,
    eventOptions,
    rateLimiter: config.rateLimit ? new RateLimiter(redis, clock, config.rateLimit) : undefined,
    async close() {
      await events.close()
      await keys.close()
      await notifications.close()
    },
  }
}

export interface BackgroundOptions {
  /** The Redis URL, for the connections BullMQ workers block on. */
  redisUrl: string
  /** Drain accepted usage events into the history (needs `clickhouse`). */
  ingest: boolean
  /** 0: no journal drain. */
  journalIntervalMs: number
  /** Glob(s) of the outbox lists to drain; default all. */
  journalMatch?: string | string[] | undefined
  /** 0: no invoice worker. */
  invoiceIntervalMs: number
  /** 0: no expiry sweeps of holds and runs. */
  sweepIntervalMs: number
  /** Deliver notifications to the projects' webhooks. */
  deliver: boolean
  /** Told of each webhook delivery attempt's outcome (the metrics). */
  onDelivery?: ((outcome: DeliveryOutcome) => void) | undefined
}

export interface Background {
  journal: JournalWorker | undefined
  invoices: InvoiceWorker | undefined
  close(): Promise<void>
}

/**
 * Starts the background work over the container's services: expiry sweeps, the ingest drain,
 * the journal drain, the invoice worker and webhook delivery, each when its option asks for it.
 * The gateway runs it in-process; `npm run worker` runs it alone for scale-out.
 */
export function startBackground(
  container: Container,
  clickhouse: ClickHouseStore | undefined,
  options: BackgroundOptions & { redis: RedisClient; clock: Clock; logger: Logger },
): Background {
  const { services, logger } = container
  const { redis, clock } = options
  const onSweepError = (what: string) => (err: unknown) => logger[isUnavailable(err) ? 'warn' : 'error']({ err }, `${what} expiry sweep failed`)
  const stopSweeps =
    options.sweepIntervalMs > 0
      ? [
          startHoldExpiry(redis, services.budgets, options.sweepIntervalMs, onSweepError('hold')),
          startRunExpiry(redis, services.runs, options.sweepIntervalMs, onSweepError('run')),
        ]
      : []
  const ingest = clickhouse && options.ingest ? startIngest(container, clickhouse, options.redisUrl, logger) : undefined
  // Other gateways and `npm run worker` may drain too: claims keep them off each other's lists.
  const journal =
    clickhouse && options.journalIntervalMs > 0
      ? startJournalWorker({
          redis,
          store: clickhouse,
          logger,
          intervalMs: options.journalIntervalMs,
          ...(options.journalMatch === undefined ? {} : { match: options.journalMatch }),
        })
      : undefined
  // Ended billing cycles into invoices (src/invoices/README.md); any number of workers may run.
  const invoices =
    clickhouse && options.invoiceIntervalMs > 0
      ? startInvoiceWorker({ invoices: services.invoices, clock, logger, intervalMs: options.invoiceIntervalMs })
      : undefined
  const delivery = options.deliver ? startDelivery(container, options.redisUrl, clock, logger, options.onDelivery) : undefined
  logger.info(
    {
      ingest: ingest !== undefined,
      journal: journal !== undefined,
      invoices: invoices !== undefined,
      delivery: delivery !== undefined,
      sweeps: stopSweeps.length > 0,
    },
    'background work running',
  )
  return {
    journal,
    invoices,
    async close() {
      for (const stop of stopSweeps) stop()
      await journal?.close()
      await invoices?.close()
      if (ingest) {
        await ingest.worker.close()
        await ingest.connection.quit()
      }
      if (delivery) {
        await delivery.worker.close()
        await delivery.connection.quit()
      }
    },
  }
}

function startIngest(container: Container, clickhouse: ClickHouseStore, redisUrl: string, logger: Logger): { worker: IngestWorker; connection: RedisClient } {
  const connection = connectRedis(redisUrl, 'metering-ingest', { blocking: true })
  const ingestQueue = container.eventOptions.queueName
  const worker = startIngestWorker({
    connection,
    sink: clickHouseEventSink(clickhouse),
    logger,
    concurrency: container.config.ingestConcurrency,
    lockMs: container.config.ingestLockMs,
    ingestQueue,
    deadLetterQueue: queueNames(container).deadLetter,
    onLimitReached: (projectId, decisions) => container.notifications.limitReached(projectId, decisions, { kind: 'ingest' }),
  })
  return { worker, connection }
}

function startDelivery(
  container: Container,
  redisUrl: string,
  clock: Clock,
  logger: Logger,
  onDelivery: BackgroundOptions['onDelivery'],
): { worker: NotificationWorker; connection: RedisClient } {
  const connection = connectRedis(redisUrl, 'metering-notifications', { blocking: true })
  const worker = startNotificationWorker({
    connection,
    webhooks: container.services.webhooks,
    clock,
    logger,
    options: container.notificationOptions,
    onDelivery,
  })
  return { worker, connection }
}

/** The BullMQ queues of this container: ingestion's (a test queue gets its own dead-letter queue) and notifications'. */
export function queueNames(container: Container): { ingest: string; deadLetter: string; notifications: string; deliveries: string } {
  const ingest = container.eventOptions.queueName
  return {
    ingest,
    deadLetter: ingest === INGEST_QUEUE ? DEAD_LETTER_QUEUE : `${ingest}-dlq`,
    notifications: container.notificationOptions.queueName,
    deliveries: container.notificationOptions.deliveryQueueName,
  }
}
