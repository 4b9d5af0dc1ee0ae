import { AnalyticsService } from '../analytics/service.js'
import { BudgetService } from '../budgets/service.js'
import { CatalogService } from '../catalog/service.js'
import { systemClock } from '../kernel/clock.js'
import { loadConfig } from '../kernel/config.js'
import { clickHouseEventSink } from '../events/clickhouse.js'
import { createLogger, openHistory } from './gateway.js'
import { LimitChecker } from '../notifications/limits.js'
import { loadNotificationOptions } from '../notifications/options.js'
import { Notifications } from '../notifications/queue.js'
import { WebhookService } from '../notifications/webhooks.js'
import { connectRedis } from '../infra/redis/connection.js'
import { loadLibrary } from '../infra/redis/scripts.js'
import { startHoldExpiry } from '../workers/holdExpiry.js'
import { startIngestWorker } from '../workers/ingest.js'
import { startJournalWorker } from '../workers/journal.js'
import { startInvoiceWorker } from '../workers/invoices.js'
import { InvoiceService } from '../invoices/service.js'
import { walletForInvoices } from '../invoices/wallet.js'
import { startNotificationWorker } from '../workers/notifications.js'
import { startRunExpiry } from '../workers/runExpiry.js'
import { RunService } from '../runs/service.js'

/**
 * `npm run worker`: the background work, runnable apart from the gateway for scale-out.
 * It sweeps expired holds, drains accepted usage events into ClickHouse (the ingest worker of
 * src/workers/ingest.ts) checking entitlement limits after each batch (limit.reached), and
 * delivers notifications to the projects' webhooks (src/workers/notifications.ts), and drains the
 * journal outbox (budget movements, …) into ClickHouse (src/workers/journal.ts). It needs
 * REDIS_URL and CLICKHOUSE_URL: the embedded Redis and chDB data directories belong to the
 * gateway's process (chDB allows one process per data directory).
 */
const config = loadConfig()
const logger = createLogger(config)
if (!config.redisUrl) {
  logger.fatal('REDIS_URL must be set: a worker shares the Redis of the gateways it serves')
  process.exit(1)
}
if (!config.clickhouseUrl) {
  logger.fatal('CLICKHOUSE_URL must be set: the embedded chDB of METERING_DATA_DIR belongs to the gateway process (one process per data directory); without a ClickHouse server, let `npm start` drain events in-process')
  process.exit(1)
}
const store = await openHistory(config)
const redis = connectRedis(config.redisUrl, 'metering-worker')
await loadLibrary(redis)
const notificationOptions = loadNotificationOptions()
const notifications = new Notifications(redis.duplicate(), logger, notificationOptions.queueName)
const budgets = new BudgetService(redis, systemClock, {
  onCrossed: (projectId, budgetKey, crossed) => notifications.limitCrossed({ projectId, budgetKey, crossed, at: systemClock() }),
})
const catalog = new CatalogService(redis, systemClock, budgets)
const analytics = new AnalyticsService(store, systemClock, catalog, budgets)
const limits = new LimitChecker({ redis, analytics, queue: (event) => notifications.limitReached(event), clock: systemClock, logger })
const ingestConnection = connectRedis(config.redisUrl, 'metering-ingest', { blocking: true })
const ingest = startIngestWorker({
  connection: ingestConnection, sink: clickHouseEventSink(store), logger, concurrency: config.ingestConcurrency, lockMs: config.ingestLockMs,
  afterInsert: (rows) => limits.afterInsert(rows),
})
const journal = startJournalWorker({ redis, store, logger, intervalMs: config.journalIntervalMs || 1000 })
// Ended billing cycles into invoices (src/invoices/README.md): safe beside the gateways' own.
const invoiceWorker = startInvoiceWorker({
  invoices: new InvoiceService(redis, systemClock, store, walletForInvoices(redis, systemClock)), clock: systemClock, logger, intervalMs: config.invoiceIntervalMs || 60_000,
})
const stopSweep = startHoldExpiry(redis, budgets, config.sweepIntervalMs || 5000, (err) => logger.error({ err }, 'hold expiry sweep failed'))
const stopRunSweep = startRunExpiry(redis, new RunService(redis, systemClock, budgets), config.sweepIntervalMs || 5000, (err) => logger.error({ err }, 'run expiry sweep failed'))
const webhooks = new WebhookService(redis, systemClock)
const deliveryConnection = connectRedis(config.redisUrl, 'metering-notifications', { blocking: true })
const delivery = startNotificationWorker({ connection: deliveryConnection, webhooks, clock: systemClock, logger, options: notificationOptions })
logger.info({ clickhouse: store.kind, database: store.database, concurrency: config.ingestConcurrency }, 'metering worker running (hold expiry, ingest into ClickHouse, journal outbox into ClickHouse, limit checks, webhook delivery)')

const stop = async () => {
  stopSweep()
  stopRunSweep()
  await journal.close()
  await invoiceWorker.close()
  await ingest.close()
  await ingestConnection.quit()
  await store.close()
  await delivery.close()
  await deliveryConnection.quit()
  await notifications.close()
  await redis.quit()
  process.exit(0)
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
