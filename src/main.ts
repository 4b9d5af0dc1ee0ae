import { pathToFileURL } from 'node:url'
import { pino, type Logger } from 'pino'
import { BudgetService } from './budgets/service.js'
import { budgetScripts } from './budgets/redis.js'
import { catalogScripts } from './catalog/redis.js'
import { CatalogService } from './catalog/service.js'
import { systemClock, type Clock } from './clock.js'
import { loadConfig, type Config } from './config.js'
import { loadEventOptions, type EventOptions } from './events/options.js'
import { eventScripts } from './events/redis.js'
import { EventService } from './events/service.js'
import { createHttpApp, listen } from './http/app.js'
import { Metrics } from './http/metrics.js'
import { buildOpenApi } from './http/openapi.js'
import { routes } from './http/routes/index.js'
import { KeyService } from './keys/service.js'
import { Notifications } from './notifications/queue.js'
import { RateLimiter } from './ratelimit/limiter.js'
import { connectRedis } from './redis/connection.js'
import { startEmbeddedRedis } from './redis/local.js'
import { loadLibrary, type RedisClient } from './redis/scripts.js'
import type { Services } from './services.js'
import { startHoldExpiry, sweepExpiredHolds } from '../workers/holdExpiry.js'

export interface Gateway {
  port: number
  redis: RedisClient
  services: Services
  logger: Logger
  /** One sweep of expired holds now (tests call it with a moved clock). */
  sweep(): ReturnType<typeof sweepExpiredHolds>
  close(): Promise<void>
}

export function createLogger(config: Pick<Config, 'logLevel' | 'prettyLogs'>): Logger {
  return config.prettyLogs
    ? pino({ level: config.logLevel, transport: { target: 'pino-pretty', options: { colorize: true } } })
    : pino({ level: config.logLevel })
}

/**
 * Starts the gateway: Redis (the given URL, or a private redis-server child with AOF under the
 * data directory), the domain services, the uWS app and the background sweep of expired holds.
 */
export async function startGateway(config: Config, overrides: { clock?: Clock; logger?: Logger; events?: Partial<EventOptions> } = {}): Promise<Gateway> {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config)
  const embedded = config.redisUrl ? undefined : await startEmbeddedRedis(config.dataDir)
  if (embedded) logger.info({ url: embedded.url, dir: embedded.dir }, 'started embedded redis-server (AOF)')
  const redis = connectRedis(config.redisUrl ?? embedded!.url)
  await loadLibrary(redis)
  let ready = false

  const notifications = new Notifications(redis.duplicate(), logger)
  const keys = new KeyService(redis, clock, config.rootKey)
  await keys.listen()
  const budgets = new BudgetService(redis, clock, {
    onCrossed: (projectId, budgetKey, crossed) => notifications.limitCrossed({ projectId, budgetKey, crossed, at: clock() }),
  })
  const catalog = new CatalogService(redis, clock, budgets)
  // Ingestion answers once events are queued; the ingest worker (workers/ingest.ts) is not
  // started here until the ClickHouse sink exists, so jobs wait in Redis.
  const events = new EventService(redis, redis.duplicate(), clock, logger, { ...loadEventOptions(), ...overrides.events })
  const services: Services = { budgets, catalog, keys, events }
  const rateLimiter = config.rateLimit ? new RateLimiter(redis, clock, config.rateLimit) : undefined

  const app = createHttpApp({
    routes,
    services,
    logger,
    metrics: new Metrics([...budgetScripts, ...catalogScripts, ...eventScripts]),
    openapi: buildOpenApi(routes),
    docsUrl: config.docsUrl,
    maxBodyBytes: config.maxBodyBytes,
    rateLimiter,
    isReady: () => ready,
  })
  const server = await listen(app, config.host, config.port)
  const stopSweep = config.sweepIntervalMs > 0
    ? startHoldExpiry(redis, budgets, config.sweepIntervalMs, (err) => logger.error({ err }, 'hold expiry sweep failed'))
    : () => {}
  if (!config.rootKey) logger.warn('METERING_ROOT_KEY is not set: create projects with `npm run cli -- project create`')
  ready = true
  logger.info({ port: server.port }, 'metering gateway listening')

  return {
    port: server.port,
    redis,
    services,
    logger,
    sweep: () => sweepExpiredHolds(redis, budgets),
    async close() {
      ready = false
      stopSweep()
      server.close()
      await events.close()
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
