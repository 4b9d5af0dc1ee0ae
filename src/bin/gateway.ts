import { pathToFileURL } from 'node:url'
import type { Logger } from 'pino'
import { buildServices, queueNames, startBackground, type Container } from '../container.js'
import { publishGatewayUrl } from './cli/gatewayUrl.js'
import type { EventOptions } from '../events/options.js'
import { createHttpApp, listen, Traffic, type Readiness } from '../http/app.js'
import { Metrics } from '../http/metrics.js'
import { buildOpenApi } from '../http/openapi.js'
import { rawRoutes, routes } from '../http/routes/index.js'
import type { Services } from '../http/services.js'
import { observeInserts } from '../infra/clickhouse/observed.js'
import { openHistory } from '../infra/clickhouse/open.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { closeRedis, connectRedis } from '../infra/redis/connection.js'
import { startEmbeddedRedis } from '../infra/redis/local.js'
import { libraryLoaded, loadLibrary, type RedisClient } from '../infra/redis/scripts.js'
import { systemClock, type Clock } from '../kernel/clock.js'
import { loadConfig, type Config } from '../kernel/config.js'
import { createLogger } from '../kernel/logger.js'
import { stopOnSignal } from './stopOnSignal.js'
import type { NotificationOptions } from '../notifications/options.js'
import type { JournalWorker } from '../workers/journal.js'
import type { InvoiceWorker } from '../workers/invoices.js'
import { sweepExpiredHolds } from '../workers/holdExpiry.js'
import { sweepExpiredRuns } from '../workers/runExpiry.js'

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
  const { redis, redisUrl, clickhouse: store, stopStores } = await openStores(config, overrides, logger)
  // Requests, scripts, inserts, deliveries, queues and the process: GET /metrics (README "Metrics").
  const metrics = new Metrics({ logger, accessLogSample: config.accessLogSample })
  const clickhouse = store && observeInserts(store, metrics.clickhouse)
  let state: GatewayState = 'starting'
  // Setup links name the gateway's public URL; without METERING_PUBLIC_URL, the address it listens on.
  let listeningUrl = ''
  const container = buildServices({
    config,
    redis,
    clock,
    logger,
    clickhouse,
    events: overrides.events,
    notifications: overrides.notifications,
    publicUrl: () => config.publicUrl ?? listeningUrl,
  })
  const { services } = container
  metrics.watch(redis, queueNames(container))
  await services.keys.listen()
  const traffic = new Traffic()
  const app = createHttpApp({
    routes,
    rawRoutes,
    services,
    logger,
    metrics,
    openapi: buildOpenApi(routes),
    docsUrl: config.docsUrl,
    maxBodyBytes: config.maxBodyBytes,
    rateLimiter: container.rateLimiter,
    readiness: readinessCheck(() => state, redis, clickhouse),
    traffic,
  })
  const server = await listen(app, config.host, config.port)
  listeningUrl = `http://${hostForUrl(config.host)}:${server.port}`
  const background = startBackground(container, clickhouse, {
    redis,
    redisUrl,
    clock,
    logger,
    ingest: config.ingestWorker,
    journalIntervalMs: config.journalIntervalMs,
    journalMatch: overrides.journalMatch,
    invoiceIntervalMs: config.invoiceIntervalMs,
    sweepIntervalMs: config.sweepIntervalMs,
    deliver: container.notificationOptions.worker,
    onDelivery: metrics.onDelivery,
  })
  if (!config.rootKey) logger.warn('METERING_ROOT_KEY is not set: create projects with `npm run cli -- project create`')
  state = 'serving'
  // A gateway on its data directory's embedded stores tells `npm run cli` where it listens (<dataDir>/gateway.url).
  const unpublish = !config.redisUrl || clickhouse?.kind === 'embedded' ? await publishGatewayUrl(config.dataDir, listeningUrl, logger) : undefined
  logger.info({ port: server.port, url: listeningUrl }, `metering gateway listening on ${listeningUrl}`)
  return gatewayHandle({ port: server.port, redis, container, clickhouse, logger }, background, async () => {
    // Unready at once (/readyz: 503), no new connections; what was received is answered (each
    // answer closing its connection), then the rest closes in dependency order.
    state = 'stopping'
    await unpublish?.()
    traffic.draining = true
    server.close()
    await traffic.idle()
    server.closeAll()
    await background.close()
    await container.close()
    await metrics.close()
    await stopStores()
  })
}

type GatewayState = 'starting' | 'serving' | 'stopping'

/**
 * /readyz: the gateway serves, Redis answers and has this build's script library, and the
 * ClickHouse store (when there is one) answers. Checks asked for while one runs share it.
 */
function readinessCheck(state: () => GatewayState, redis: RedisClient, clickhouse: ClickHouseStore | undefined): () => Promise<Readiness> {
  let running: Promise<Readiness> | undefined
  const check = async (): Promise<Readiness> => {
    const [redisCheck, clickhouseCheck] = await Promise.all([
      libraryLoaded(redis).then(
        (loaded) => (loaded ? 'ok' : 'script library not loaded'),
        (err: Error) => err.message,
      ),
      clickhouse?.query('SELECT 1 AS ok').then(
        () => 'ok',
        (err: Error) => err.message,
      ),
    ])
    const checks: Record<string, string> = { gateway: state() === 'serving' ? 'ok' : state(), redis: redisCheck }
    if (clickhouseCheck !== undefined) checks.clickhouse = clickhouseCheck
    return { ready: Object.values(checks).every((c) => c === 'ok'), checks }
  }
  return () => (running ??= check().finally(() => (running = undefined)))
}

function gatewayHandle(
  parts: { port: number; redis: RedisClient; container: Container; clickhouse: ClickHouseStore | undefined; logger: Logger },
  background: { journal: JournalWorker | undefined; invoices: InvoiceWorker | undefined },
  close: () => Promise<void>,
): Gateway {
  const {
    redis,
    container: { services },
  } = parts
  return {
    port: parts.port,
    redis,
    services,
    logger: parts.logger,
    clickhouse: parts.clickhouse,
    sweep: () => sweepExpiredHolds(redis, services.budgets),
    sweepRuns: (match) => sweepExpiredRuns(redis, services.runs, match),
    journal: background.journal,
    invoiceWorker: background.invoices,
    close,
  }
}

/**
 * Redis (the configured URL, or a private redis-server child with AOF under the data directory)
 * with the script library loaded, and the ClickHouse store (opened and migrated while Redis
 * starts). A failure of either closes what the other opened.
 */
async function openStores(config: Config, overrides: GatewayOverrides, logger: Logger) {
  const clickhouseP = overrides.clickhouse === 'off' ? Promise.resolve(undefined) : openHistory(config)
  clickhouseP.catch(() => {}) // awaited below; a failure of Redis first must not leave it unhandled
  let embedded: Awaited<ReturnType<typeof startEmbeddedRedis>> | undefined
  try {
    embedded = config.redisUrl ? undefined : await startEmbeddedRedis(config.dataDir, config.redisFsync, { logger })
  } catch (err) {
    await clickhouseP.then(
      (store) => store?.close(),
      () => {},
    )
    throw err
  }
  if (embedded)
    logger.info({ url: embedded.url, dir: embedded.dir, pid: embedded.pid, appendfsync: config.redisFsync }, 'started embedded redis-server (AOF), supervised')
  const redisUrl = config.redisUrl ?? embedded!.url
  const redis = connectRedis(redisUrl, 'metering', {
    commandTimeoutMs: config.redisTimeoutMs,
    onError: (err) => logger.warn({ err }, 'redis connection lost; reconnecting (requests answer 503 meanwhile)'),
  })
  let clickhouse: ClickHouseStore | undefined
  try {
    await loadLibrary(redis)
    clickhouse = await clickhouseP
  } catch (err) {
    await closeRedis(redis)
    await embedded?.stop()
    throw err
  }
  if (clickhouse) logger.info({ kind: clickhouse.kind, database: clickhouse.database }, 'clickhouse store migrated')
  const stopStores = async () => {
    await clickhouse?.close()
    await closeRedis(redis)
    await embedded?.stop()
  }
  return { redis, redisUrl, clickhouse, stopStores }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const config = loadConfig()
  const logger = createLogger(config)
  startGateway(config, { logger }).then(
    (gateway) => stopOnSignal(logger, config.shutdownDeadlineMs, () => gateway.close()),
    (err: unknown) => {
      logger.fatal({ err }, 'could not start')
      process.exit(1)
    },
  )
}
