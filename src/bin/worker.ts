import { buildServices, startBackground } from '../container.js'
import { Metrics, serveMetrics } from '../http/metrics.js'
import { observeInserts } from '../infra/clickhouse/observed.js'
import { openHistory } from '../infra/clickhouse/open.js'
import { closeRedis, connectRedis } from '../infra/redis/connection.js'
import { loadLibrary } from '../infra/redis/scripts.js'
import { systemClock } from '../kernel/clock.js'
import { loadConfig } from '../kernel/config.js'
import { createLogger } from '../kernel/logger.js'
import { stopOnSignal } from './stopOnSignal.js'

/**
 * `npm run worker`: the background work, runnable apart from the gateway for scale-out.
 * It sweeps expired holds and runs, drains accepted usage events into ClickHouse (the ingest
 * worker of src/workers/ingest.ts) checking entitlement limits after each batch (limit.reached),
 * delivers notifications to the projects' webhooks (src/workers/notifications.ts), drains the
 * journal outbox (budget movements, …) into ClickHouse (src/workers/journal.ts) and closes ended
 * billing cycles (src/workers/invoices.ts). It needs REDIS_URL and CLICKHOUSE_URL: the embedded
 * Redis and chDB data directories belong to the gateway's process (chDB allows one process per
 * data directory).
 */
const config = loadConfig()
const logger = createLogger(config)
if (!config.redisUrl) {
  logger.fatal('REDIS_URL must be set: a worker shares the Redis of the gateways it serves')
  process.exit(1)
}
if (!config.clickhouseUrl) {
  logger.fatal(
    'CLICKHOUSE_URL must be set: the embedded chDB of METERING_DATA_DIR belongs to the gateway process (one process per data directory); without a ClickHouse server, let `npm start` drain events in-process',
  )
  process.exit(1)
}
// Inserts, deliveries, scripts and the process; served on METERING_METRICS_PORT when set (README "Metrics").
const metrics = new Metrics()
const store = observeInserts(await openHistory(config), metrics.clickhouse)
const metricsServer = config.metricsPort === undefined ? undefined : await serveMetrics(metrics, config.host, config.metricsPort)
const redis = connectRedis(config.redisUrl, 'metering-worker', {
  commandTimeoutMs: config.redisTimeoutMs,
  onError: (err) => logger.warn({ err }, 'redis connection lost; reconnecting'),
})
await loadLibrary(redis)
const container = buildServices({ config, redis, clock: systemClock, logger, clickhouse: store })
// Unlike the gateway's in-process workers, a worker process always runs every part.
const background = startBackground(container, store, {
  redis,
  redisUrl: config.redisUrl,
  clock: systemClock,
  logger,
  ingest: true,
  journalIntervalMs: config.journalIntervalMs || 1000,
  invoiceIntervalMs: config.invoiceIntervalMs || 60_000,
  sweepIntervalMs: config.sweepIntervalMs || 5000,
  deliver: true,
  onDelivery: metrics.onDelivery,
})
logger.info(
  { clickhouse: store.kind, database: store.database, concurrency: config.ingestConcurrency },
  'metering worker running (hold expiry, ingest into ClickHouse, journal outbox into ClickHouse, limit checks, webhook delivery)',
)

// Finishes the jobs in hand and closes in order; by METERING_SHUTDOWN_MS it exits anyway (code 1).
stopOnSignal(logger, config.shutdownDeadlineMs, async () => {
  await background.close()
  await container.close()
  await metricsServer?.close()
  await metrics.close()
  await store.close()
  await closeRedis(redis)
})
