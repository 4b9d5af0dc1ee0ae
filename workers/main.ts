import { Worker } from 'bullmq'
import { BudgetService } from '../src/budgets/service.js'
import { systemClock } from '../src/clock.js'
import { loadConfig } from '../src/config.js'
import { clickHouseEventSink } from '../src/clickhouse/eventSink.js'
import { createLogger, openHistory } from '../src/main.js'
import { NOTIFICATIONS_QUEUE, QUEUE_PREFIX, type LimitCrossed } from '../src/notifications/queue.js'
import { connectRedis } from '../src/redis/connection.js'
import { startHoldExpiry } from './holdExpiry.js'
import { startIngestWorker } from './ingest.js'

/**
 * `npm run worker`: the background work, runnable apart from the gateway for scale-out.
 * It sweeps expired holds, drains accepted usage events into ClickHouse (the ingest worker of
 * workers/ingest.ts) and consumes the notifications queue (delivery over webhooks comes with the
 * ingestion issue; until then notifications are logged). It needs REDIS_URL and CLICKHOUSE_URL:
 * the embedded Redis and chDB data directories belong to the gateway's process (chDB allows one
 * process per data directory).
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
const ingestConnection = connectRedis(config.redisUrl, 'metering-ingest', { blocking: true })
const ingest = startIngestWorker({ connection: ingestConnection, sink: clickHouseEventSink(store), logger, concurrency: config.ingestConcurrency })
const budgets = new BudgetService(redis, systemClock)
const stopSweep = startHoldExpiry(redis, budgets, config.sweepIntervalMs || 5000, (err) => logger.error({ err }, 'hold expiry sweep failed'))
const notifications = new Worker<LimitCrossed>(
  NOTIFICATIONS_QUEUE,
  async (job) => { logger.info({ notification: job.data }, job.data.type) },
  { connection: connectRedis(config.redisUrl, 'metering-notifications', { blocking: true }), prefix: QUEUE_PREFIX },
)
logger.info({ clickhouse: store.kind, database: store.database, concurrency: config.ingestConcurrency }, 'metering worker running (hold expiry, ingest into ClickHouse, notifications)')

const stop = async () => {
  stopSweep()
  await ingest.close()
  await ingestConnection.quit()
  await store.close()
  await notifications.close()
  await redis.quit()
  process.exit(0)
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
