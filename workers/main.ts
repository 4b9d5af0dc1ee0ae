import { Worker } from 'bullmq'
import { BudgetService } from '../src/budgets/service.js'
import { systemClock } from '../src/clock.js'
import { loadConfig } from '../src/config.js'
import { createLogger } from '../src/main.js'
import { NOTIFICATIONS_QUEUE, QUEUE_PREFIX, type LimitCrossed } from '../src/notifications/queue.js'
import { connectRedis } from '../src/redis/connection.js'
import { startHoldExpiry } from './holdExpiry.js'

/**
 * `npm run worker`: the background work, runnable apart from the gateway for scale-out.
 * It sweeps expired holds and consumes the notifications queue (delivery over webhooks comes
 * with the ingestion issue; until then notifications are logged).
 */
const config = loadConfig()
const logger = createLogger(config)
if (!config.redisUrl) {
  logger.fatal('REDIS_URL must be set: a worker shares the Redis of the gateways it serves')
  process.exit(1)
}
const redis = connectRedis(config.redisUrl, 'metering-worker')
const budgets = new BudgetService(redis, systemClock)
const stopSweep = startHoldExpiry(redis, budgets, config.sweepIntervalMs || 5000, (err) => logger.error({ err }, 'hold expiry sweep failed'))
const notifications = new Worker<LimitCrossed>(
  NOTIFICATIONS_QUEUE,
  async (job) => { logger.info({ notification: job.data }, job.data.type) },
  { connection: connectRedis(config.redisUrl, 'metering-notifications', { blocking: true }), prefix: QUEUE_PREFIX },
)
logger.info('metering worker running')

const stop = async () => {
  stopSweep()
  await notifications.close()
  await redis.quit()
  process.exit(0)
}
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
