import { pathToFileURL } from 'node:url'
import { pino, type Logger } from 'pino'
import { AnalyticsService } from '../analytics/service.js'
import { BudgetService } from '../budgets/service.js'
import { budgetScripts } from '../budgets/redis.js'
import { catalogScripts } from '../catalog/redis.js'
import { CatalogService } from '../catalog/service.js'
import { clickHouseEventSink } from '../events/clickhouse.js'
import { migrate } from '../infra/clickhouse/migrations.js'
import { openClickHouse, type ClickHouseStore } from '../infra/clickhouse/store.js'
import { systemClock, type Clock } from '../kernel/clock.js'
import { loadConfig, type Config } from '../kernel/config.js'
import { loadEventOptions, type EventOptions } from '../events/options.js'
import { DEAD_LETTER_QUEUE, INGEST_QUEUE } from '../events/queue.js'
import { eventScripts } from '../events/redis.js'
import { entitlementScripts } from '../entitlements/redis.js'
import { EntitlementService } from '../entitlements/service.js'
import { EventService } from '../events/service.js'
import { createHttpApp, listen } from '../http/app.js'
import { Metrics } from '../http/metrics.js'
import { buildOpenApi } from '../http/openapi.js'
import { rawRoutes, routes } from '../http/routes/index.js'
import { KeyService } from '../keys/service.js'
import { LimitChecker } from '../notifications/limits.js'
import { loadNotificationOptions, type NotificationOptions } from '../notifications/options.js'
import { Notifications } from '../notifications/queue.js'
import { WebhookService } from '../notifications/webhooks.js'
import { PaymentService } from '../payments/service.js'
import { RateLimiter } from '../ratelimit/limiter.js'
import { connectRedis } from '../infra/redis/connection.js'
import { startEmbeddedRedis } from '../infra/redis/local.js'
import { loadLibrary, type RedisClient } from '../infra/redis/scripts.js'
import type { Services } from '../http/services.js'
import { startHoldExpiry, sweepExpiredHolds } from '../workers/holdExpiry.js'
import { startIngestWorker, type IngestWorker } from '../workers/ingest.js'
import { startJournalWorker, type JournalWorker } from '../workers/journal.js'
import { startInvoiceWorker, type InvoiceWorker } from '../workers/invoices.js'
import { invoiceScripts } from '../invoices/redis.js'
import { InvoiceService } from '../invoices/service.js'
import { walletForInvoices } from '../invoices/wallet.js'
import { journalScripts } from '../journal/drain.js'
import { startNotificationWorker, type NotificationWorker } from '../workers/notifications.js'
import { startRunExpiry, sweepExpiredRuns } from '../workers/runExpiry.js'
import { runScripts } from '../runs/redis.js'
import { RunService } from '../runs/service.js'
import { walletScripts } from '../wallet/redis.js'
import { WalletService } from '../wallet/service.js'

export interface Gateway {
  port: number
  redis: RedisClient
  services: Services
  logger: Logger
  /** The usage history (undefined when started with `clickhouse: 'off'`). */
  clickhouse: ClickHouseStore | undefined
  /** One sweep of expired holds now (tests call it with a moved clock). */
  sweep(): ReturnType<typeof sweepExpiredHolds>
  /** One sweep of runs past their deadline now (`match`: the deadline sets to scan, default every project's). */
  sweepRuns(match?: string): ReturnType<typeof sweepExpiredRuns>
  /** The in-process journal worker (undefined when ClickHouse is off or METERING_JOURNAL_INTERVAL_MS=0). */
  journal: JournalWorker | undefined
  /** The in-process invoice worker (undefined when ClickHouse is off or METERING_INVOICE_INTERVAL_MS=0). */
  invoiceWorker: InvoiceWorker | undefined
  close(): Promise<void>
}

export function createLogger(config: Pick<Config, 'logLevel' | 'prettyLogs'>): Logger {
  return config.prettyLogs
    ? pino({ level: config.logLevel, transport: { target: 'pino-pretty', options: { colorize: true } } })
    : pino({ level: config.logLevel })
}

export interface GatewayOverrides {
  clock?: Clock
  logger?: Logger
  events?: Partial<EventOptions>
  /**
   * 'off': no ClickHouse store and no ingest worker (analytics answer from no data; accepted
   * events wait in Redis). For tests that do not need the history; default 'on'.
   */
  clickhouse?: 'on' | 'off'
  /** Notification queues and webhook delivery (defaults from the environment, src/notifications/options.ts). */
  notifications?: Partial<NotificationOptions>
  /** Glob(s) of the journal outbox lists the in-process journal worker drains (tests: their project's); default all. */
  journalMatch?: string | string[]
}

/** The host part of a URL for the listening address (a wildcard address → loopback). */
function hostForUrl(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1'
  if (host === '::') return '[::1]'
  return host.includes(':') ? `[${host}]` : host
}

/** Opens the ClickHouse store of the config and applies its migrations. */
export async function openHistory(config: Pick<Config, 'clickhouseUrl' | 'dataDir' | 'clickhouseDatabase'>): Promise<ClickHouseStore> {
  const store = await openClickHouse({ url: config.clickhouseUrl, dataDir: config.dataDir, database: config.clickhouseDatabase })
  try {
    await migrate(store)
  } catch (err) {
    await store.close().catch(() => {})
    throw err
  }
  return store
}

/**
 * Starts the gateway: Redis (the given URL, or a private redis-server child with AOF under the
 * data directory), the ClickHouse store (CLICKHOUSE_URL, or chDB in a child process under the
 * data directory; migrated on start), the domain services, the uWS app, the background sweep of
 * expired holds and (unless METERING_INGEST_WORKER=0) the ingest worker that drains accepted
 * usage events into ClickHouse and checks entitlement limits after each batch (limit.reached),
 * and (unless METERING_NOTIFICATIONS_WORKER=0) the notification worker that delivers
 * notifications to the projects' webhooks.
 */
export async function startGateway(config: Config, overrides: GatewayOverrides = {}): Promise<Gateway> {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config)
  // The store opens (and migrates) while Redis starts.
  const clickhouseP = overrides.clickhouse === 'off' ? Promise.resolve(undefined) : openHistory(config)
  clickhouseP.catch(() => {}) // awaited below; a failure of Redis first must not leave it unhandled
  let embedded: Awaited<ReturnType<typeof startEmbeddedRedis>> | undefined
  try {
    embedded = config.redisUrl ? undefined : await startEmbeddedRedis(config.dataDir)
  } catch (err) {
    await clickhouseP.then((store) => store?.close(), () => {})
    throw err
  }
  if (embedded) logger.info({ url: embedded.url, dir: embedded.dir }, 'started embedded redis-server (AOF)')
  const redis = connectRedis(config.redisUrl ?? embedded!.url)
  await loadLibrary(redis)
  let ready = false

  const notificationOptions = { ...loadNotificationOptions(), ...overrides.notifications }
  const notifications = new Notifications(redis.duplicate(), logger, notificationOptions.queueName)
  const webhooks = new WebhookService(redis, clock)
  const keys = new KeyService(redis, clock, config.rootKey)
  await keys.listen()
  const budgets = new BudgetService(redis, clock, {
    onCrossed: (projectId, budgetKey, crossed) => notifications.limitCrossed({ projectId, budgetKey, crossed, at: clock() }),
  })
  const catalog = new CatalogService(redis, clock, budgets)
  // Ingestion answers once events are queued; the ingest worker drains them into ClickHouse.
  const eventOptions = { ...loadEventOptions(), ...overrides.events }
  const events = new EventService(redis, redis.duplicate(), clock, logger, eventOptions)
  let clickhouse: ClickHouseStore | undefined
  try {
    clickhouse = await clickhouseP
  } catch (err) {
    await events.close().catch(() => {})
    await keys.close().catch(() => {})
    await notifications.close().catch(() => {})
    await redis.quit().catch(() => {})
    await embedded?.stop()
    throw err
  }
  if (clickhouse) logger.info({ kind: clickhouse.kind, database: clickhouse.database }, 'clickhouse store migrated')
  const analytics = new AnalyticsService(clickhouse, clock, catalog, budgets)
  const invoices = new InvoiceService(redis, clock, clickhouse, walletForInvoices(redis, clock))
  // Setup links name the gateway's public URL; without METERING_PUBLIC_URL, the address it listens on.
  let listeningUrl = ''
  const payments = new PaymentService(redis, clock, {
    baseUrl: () => config.publicUrl ?? listeningUrl,
    setupTtlMs: config.paymentSetupTtlMs,
    stripeSecretKey: config.stripeSecretKey,
    squareAccessToken: config.squareAccessToken,
  })
  const entitlements = new EntitlementService(redis, clock)
  const wallet = new WalletService(redis, clock)
  const runs = new RunService(redis, clock, budgets)
  const services: Services = { analytics, budgets, catalog, entitlements, keys, events, webhooks, payments, invoices, runs, wallet }
  const limits = new LimitChecker({ redis, analytics, queue: (event) => notifications.limitReached(event), clock, logger })
  const rateLimiter = config.rateLimit ? new RateLimiter(redis, clock, config.rateLimit) : undefined

  const app = createHttpApp({
    routes,
    rawRoutes,
    services,
    logger,
    metrics: new Metrics([...budgetScripts, ...catalogScripts, ...entitlementScripts, ...eventScripts, ...journalScripts, ...invoiceScripts, ...walletScripts, ...runScripts]),
    openapi: buildOpenApi(routes),
    docsUrl: config.docsUrl,
    maxBodyBytes: config.maxBodyBytes,
    rateLimiter,
    isReady: () => ready,
  })
  const server = await listen(app, config.host, config.port)
  listeningUrl = `http://${hostForUrl(config.host)}:${server.port}`
  const stopSweep = config.sweepIntervalMs > 0
    ? startHoldExpiry(redis, budgets, config.sweepIntervalMs, (err) => logger.error({ err }, 'hold expiry sweep failed'))
    : () => {}
  const stopRunSweep = config.sweepIntervalMs > 0
    ? startRunExpiry(redis, runs, config.sweepIntervalMs, (err) => logger.error({ err }, 'run expiry sweep failed'))
    : () => {}
  let ingest: { worker: IngestWorker; connection: RedisClient } | undefined
  if (clickhouse && config.ingestWorker) {
    const connection = connectRedis(config.redisUrl ?? embedded!.url, 'metering-ingest', { blocking: true })
    const ingestQueue = eventOptions.queueName
    ingest = {
      connection,
      worker: startIngestWorker({
        connection,
        sink: clickHouseEventSink(clickhouse),
        logger,
        concurrency: config.ingestConcurrency,
        lockMs: config.ingestLockMs,
        ingestQueue,
        deadLetterQueue: ingestQueue === INGEST_QUEUE ? DEAD_LETTER_QUEUE : `${ingestQueue}-dlq`,
        afterInsert: (rows) => limits.afterInsert(rows),
      }),
    }
    logger.info({ queue: ingestQueue, store: clickhouse.kind, concurrency: config.ingestConcurrency }, 'ingest worker running in-process')
  }
  // The journal outbox (budget movements, …) into ClickHouse; other gateways and `npm run
  // worker` may drain too: claims keep them off each other's lists.
  let journal: JournalWorker | undefined
  if (clickhouse && config.journalIntervalMs > 0) {
    journal = startJournalWorker({
      redis, store: clickhouse, logger, intervalMs: config.journalIntervalMs,
      ...(overrides.journalMatch === undefined ? {} : { match: overrides.journalMatch }),
    })
    logger.info({ intervalMs: config.journalIntervalMs }, 'journal worker running in-process')
  }
  // Ended billing cycles into invoices (src/invoices/README.md); any number of workers may run.
  let invoiceWorker: InvoiceWorker | undefined
  if (clickhouse && config.invoiceIntervalMs > 0) {
    invoiceWorker = startInvoiceWorker({ invoices, clock, logger, intervalMs: config.invoiceIntervalMs })
    logger.info({ intervalMs: config.invoiceIntervalMs }, 'invoice worker running in-process')
  }
  let delivery: { worker: NotificationWorker; connection: RedisClient } | undefined
  if (notificationOptions.worker) {
    const connection = connectRedis(config.redisUrl ?? embedded!.url, 'metering-notifications', { blocking: true })
    delivery = { connection, worker: startNotificationWorker({ connection, webhooks, clock, logger, options: notificationOptions }) }
    logger.info({ queue: notificationOptions.queueName, deliveries: notificationOptions.deliveryQueueName }, 'notification worker running in-process')
  }
  if (!config.rootKey) logger.warn('METERING_ROOT_KEY is not set: create projects with `npm run cli -- project create`')
  ready = true
  logger.info({ port: server.port }, 'metering gateway listening')

  return {
    port: server.port,
    redis,
    services,
    logger,
    clickhouse,
    sweep: () => sweepExpiredHolds(redis, budgets),
    sweepRuns: (match) => sweepExpiredRuns(redis, runs, match),
    journal,
    invoiceWorker,
    async close() {
      ready = false
      stopSweep()
      stopRunSweep()
      server.close()
      await events.close()
      await journal?.close()
      await invoiceWorker?.close()
      if (ingest) {
        await ingest.worker.close()
        await ingest.connection.quit()
      }
      if (delivery) {
        await delivery.worker.close()
        await delivery.connection.quit()
      }
      await clickhouse?.close()
      await keys.close()
      await notifications.close()
      await redis.quit()
      await embedded?.stop()
    },
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const config = loadConfig()
  const logger = createLogger(config)
  startGateway(config, { logger }).then(
    (gateway) => {
      let stopping = false
      const stop = (signal: string) => {
        if (stopping) return
        stopping = true
        logger.info({ signal }, 'stopping')
        gateway.close().then(() => process.exit(0), (err: unknown) => { logger.error({ err }, 'stop failed'); process.exit(1) })
      }
      process.on('SIGINT', () => stop('SIGINT'))
      process.on('SIGTERM', () => stop('SIGTERM'))
    },
    (err: unknown) => {
      logger.fatal({ err }, 'could not start')
      process.exit(1)
    },
  )
}
