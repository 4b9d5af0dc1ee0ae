import { resolve } from 'node:path'

/** Everything the service reads from the environment, with its defaults. */
export interface Config {
  port: number
  host: string
  /** Unset: start a private redis-server child under dataDir. */
  redisUrl: string | undefined
  /**
   * METERING_REDIS_FSYNC: `appendfsync` of the embedded redis-server. `always` (the default): a
   * reply leaves only after the fsync of its write, so nothing acknowledged is lost; `everysec`:
   * up to about a second of acknowledged operations may be lost on power loss or an OS crash.
   * Ignored with REDIS_URL (that server's own appendfsync decides). src/budgets/README.md, "Durability".
   */
  redisFsync: RedisFsync
  /**
   * METERING_REDIS_WAIT_REPLICAS: with REDIS_URL, no script call is acknowledged until this many
   * replicas have its write (a WAIT after it; group-committed); 0 (the default) = off.
   * src/infra/redis/replicas.ts; src/budgets/README.md, "Durability".
   */
  redisWaitReplicas: number
  /**
   * METERING_REDIS_WAIT_TIMEOUT_MS: how long a WAIT may wait for the replicas before the calls it
   * covers fail (503). Keep it below METERING_REDIS_TIMEOUT_MS: calls sent behind a blocked WAIT
   * wait with it.
   */
  redisWaitTimeoutMs: number
  /**
   * METERING_REDIS_TIMEOUT_MS: how long a Redis command may take before the request that made it
   * is answered 503 (Redis stalled or gone); the command is not retried (the client's retry with
   * the same idempotency key is safe). 0: no timeout. BullMQ's blocking connections have none.
   */
  redisTimeoutMs: number
  /**
   * METERING_SHUTDOWN_MS: on SIGTERM, the most the gateway takes to stop (answer what it received,
   * drain, stop workers, close Redis) before it exits anyway, with code 1.
   */
  shutdownDeadlineMs: number
  dataDir: string
  /** CLICKHOUSE_URL: a ClickHouse server over HTTP; unset → chDB under dataDir (one process per data dir). */
  clickhouseUrl: string | undefined
  /**
   * METERING_CLICKHOUSE_TIMEOUT_MS: a call to the ClickHouse server not answered by then fails
   * (a 503 on the HTTP path; a worker retries its batch).
   */
  clickhouseTimeoutMs: number
  /** CLICKHOUSE_DATABASE: the database the service's tables live in (created if missing). */
  clickhouseDatabase: string
  /**
   * CLICKHOUSE_CLUSTER: a cluster of the CLICKHOUSE_URL server (remote_servers): the migrations run
   * ON CLUSTER, Replicated* tables on each node under Distributed ones. Needs CLICKHOUSE_URL.
   * src/infra/clickhouse/README.md, "A ClickHouse cluster".
   */
  clickhouseCluster: string | undefined
  /**
   * METERING_CLICKHOUSE_TTL_DAYS_<TABLE> (`…_USAGE_EVENTS=400`): per table (lower-case name), the
   * days its rows are kept, applied on start with ALTER TABLE … MODIFY TTL; 0 removes a TTL set
   * before; a table not named is left as it is. Not on ClickHouse 18.16 (no TTL): logged and
   * skipped. src/infra/clickhouse/README.md, "Retention (TTL)".
   */
  clickhouseTtlDays: Readonly<Record<string, number>>
  /** METERING_INGEST_WORKER: run the ingest worker in the gateway's process ('0' turns it off). */
  ingestWorker: boolean
  /** METERING_INGEST_CONCURRENCY: ingest jobs processed at the same time per worker. */
  ingestConcurrency: number
  /**
   * METERING_INGEST_LOCK_MS: how long a worker's hold on a job lasts unrenewed, and so how soon
   * the job of a crashed worker can be taken over (BullMQ lockDuration; also the stalled-check
   * interval). Keep it well above one batch insert.
   */
  ingestLockMs: number
  rootKey: string | undefined
  docsUrl: string
  maxBodyBytes: number
  /** Requests per second per key; undefined = no limit. */
  rateLimit: number | undefined
  sweepIntervalMs: number
  /**
   * METERING_JOURNAL_INTERVAL_MS: pause between rounds of the journal worker, which drains the
   * outbox lists (budget movements, …) into ClickHouse (src/journal/README.md); 0 turns it off
   * in this process.
   */
  journalIntervalMs: number
  /**
   * METERING_INVOICE_INTERVAL_MS: pause between runs of the invoice worker, which closes ended
   * billing cycles into invoices (src/invoices/README.md); 0 turns it off in this process.
   */
  invoiceIntervalMs: number
  logLevel: string
  prettyLogs: boolean
  /**
   * METERING_ACCESS_LOG_SAMPLE: the share of requests (0..1) that get an access log line (pino,
   * info: method, route, status, ms, requestId, projectId); 0, the default, logs none, 1 every
   * one. Answers of 500 and above are always logged.
   */
  accessLogSample: number
  /**
   * METERING_METRICS_PORT: where `npm run worker` serves its Prometheus metrics (GET /metrics);
   * unset: it serves none. The gateway serves /metrics on its own port.
   */
  metricsPort: number | undefined
  /** METERING_PUBLIC_URL: the base URL clients reach the gateway at (payment setup links); unset → http://<host>:<port>. */
  publicUrl: string | undefined
  /** METERING_PAYMENT_SETUP_TTL_MS: how long a sandbox payment setup link stays valid. */
  paymentSetupTtlMs: number
  /** STRIPE_SECRET_KEY / SQUARE_ACCESS_TOKEN: credentials of the external payment providers. */
  stripeSecretKey: string | undefined
  squareAccessToken: string | undefined
}

const TTL_PREFIX = 'METERING_CLICKHOUSE_TTL_DAYS_'

/** METERING_CLICKHOUSE_TTL_DAYS_<TABLE>: { table: days }; which tables exist is checked where the TTL is applied. */
export function clickhouseTtlDaysOf(env: NodeJS.ProcessEnv): Record<string, number> {
  const days: Record<string, number> = {}
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(TTL_PREFIX) || env[name] === undefined || env[name] === '') continue
    days[name.slice(TTL_PREFIX.length).toLowerCase()] = int(name, 0, env)
  }
  return days
}

/** The `appendfsync` values the embedded redis-server can run with (METERING_REDIS_FSYNC). */
export const REDIS_FSYNC_VALUES = ['always', 'everysec'] as const
export type RedisFsync = (typeof REDIS_FSYNC_VALUES)[number]

/** METERING_REDIS_FSYNC: `always` when unset or empty; anything but `always` or `everysec` is an error. */
export function redisFsyncOf(env: NodeJS.ProcessEnv): RedisFsync {
  const raw = env.METERING_REDIS_FSYNC
  if (raw === undefined || raw === '') return 'always'
  if (!(REDIS_FSYNC_VALUES as readonly string[]).includes(raw)) {
    throw new Error(`METERING_REDIS_FSYNC must be ${REDIS_FSYNC_VALUES.join(' or ')}, got ${raw}`)
  }
  return raw as RedisFsync
}

/** METERING_REDIS_WAIT_REPLICAS: 0 (off) when unset; more needs REDIS_URL (the embedded redis-server has no replicas). */
export function redisWaitReplicasOf(env: NodeJS.ProcessEnv): number {
  const replicas = int('METERING_REDIS_WAIT_REPLICAS', 0, env)
  if (replicas > 0 && !env.REDIS_URL) throw new Error('METERING_REDIS_WAIT_REPLICAS needs REDIS_URL: the embedded redis-server has no replicas')
  return replicas
}

/** METERING_ACCESS_LOG_SAMPLE: a share from 0 to 1 (0 when unset); anything else is an error. */
export function accessLogSampleOf(env: NodeJS.ProcessEnv): number {
  const raw = env.METERING_ACCESS_LOG_SAMPLE
  if (raw === undefined || raw === '') return 0
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new Error(`METERING_ACCESS_LOG_SAMPLE must be a number from 0 to 1, got ${raw}`)
  return value
}

function int(name: string, fallback: number, env: NodeJS.ProcessEnv): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${raw}`)
  return value
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const rate = int('METERING_RATE_LIMIT', 0, env)
  return {
    port: int('PORT', 8787, env),
    host: env.HOST ?? '0.0.0.0',
    redisUrl: env.REDIS_URL || undefined,
    redisFsync: redisFsyncOf(env),
    redisWaitReplicas: redisWaitReplicasOf(env),
    redisWaitTimeoutMs: Math.max(1, int('METERING_REDIS_WAIT_TIMEOUT_MS', 250, env)),
    redisTimeoutMs: int('METERING_REDIS_TIMEOUT_MS', 500, env),
    shutdownDeadlineMs: int('METERING_SHUTDOWN_MS', 15_000, env),
    dataDir: resolve(env.METERING_DATA_DIR ?? './data'),
    clickhouseUrl: env.CLICKHOUSE_URL || undefined,
    clickhouseDatabase: env.CLICKHOUSE_DATABASE || 'default',
    clickhouseCluster: env.CLICKHOUSE_CLUSTER || undefined,
    clickhouseTtlDays: clickhouseTtlDaysOf(env),
    clickhouseTimeoutMs: Math.max(100, int('METERING_CLICKHOUSE_TIMEOUT_MS', 10_000, env)),
    ingestWorker: env.METERING_INGEST_WORKER !== '0',
    ingestConcurrency: Math.max(1, int('METERING_INGEST_CONCURRENCY', 4, env)),
    ingestLockMs: Math.max(1000, int('METERING_INGEST_LOCK_MS', 30_000, env)),
    rootKey: env.METERING_ROOT_KEY || undefined,
    docsUrl: (env.METERING_DOCS_URL ?? 'https://docs.metering.dev').replace(/\/$/, ''),
    maxBodyBytes: int('METERING_MAX_BODY_BYTES', 1024 * 1024, env),
    rateLimit: rate > 0 ? rate : undefined,
    sweepIntervalMs: int('METERING_SWEEP_MS', 5000, env),
    journalIntervalMs: int('METERING_JOURNAL_INTERVAL_MS', 1000, env),
    invoiceIntervalMs: int('METERING_INVOICE_INTERVAL_MS', 60_000, env),
    logLevel: env.LOG_LEVEL ?? 'info',
    prettyLogs: env.LOG_PRETTY ? env.LOG_PRETTY !== '0' : Boolean(process.stdout.isTTY),
    accessLogSample: accessLogSampleOf(env),
    metricsPort: env.METERING_METRICS_PORT ? int('METERING_METRICS_PORT', 0, env) : undefined,
    publicUrl: env.METERING_PUBLIC_URL ? env.METERING_PUBLIC_URL.replace(/\/+$/, '') : undefined,
    paymentSetupTtlMs: Math.max(1000, int('METERING_PAYMENT_SETUP_TTL_MS', 30 * 60_000, env)),
    stripeSecretKey: env.STRIPE_SECRET_KEY || undefined,
    squareAccessToken: env.SQUARE_ACCESS_TOKEN || undefined,
  }
}
