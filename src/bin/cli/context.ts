// What a CLI command works with, opened when first asked for and closed when it ends: Redis (and
// the domain services over it, with the gateway's wiring), and the usage history.

import { pino } from 'pino'
import { buildServices, type Container } from '../../container.js'
import { openClickHouse, openHistory } from '../../infra/clickhouse/open.js'
import type { ClickHouseStore } from '../../infra/clickhouse/store.js'
import { closeRedis, connectRedis } from '../../infra/redis/connection.js'
import type { SupervisedRedisServerHandle } from '../../infra/redis/embedded.js'
import { runningEmbeddedRedis, startEmbeddedRedis } from '../../infra/redis/local.js'
import { libraryLoaded, loadLibrary, type RedisClient } from '../../infra/redis/scripts.js'
import { systemClock } from '../../kernel/clock.js'
import { loadConfig, type Config } from '../../kernel/config.js'
import { CliFailure } from './errors.js'
import { GatewayClient, runningGateway } from './gatewayUrl.js'

/** Where a command reads its environment and writes its answers (the process's, or a test's). */
export interface CliIo {
  env: NodeJS.ProcessEnv
  /** Answers (stdout). */
  out(text: string): void
  /** Usage and failures (stderr). */
  err(text: string): void
  /** stdout is a terminal: `sql` prints a table then, JSON lines otherwise. */
  isTty: boolean
}

/** The usage history as the CLI reaches it: through the running gateway, or a store of its own. */
export type History = { via: 'gateway'; gateway: GatewayClient } | { via: 'store'; store: ClickHouseStore }

export class Context {
  readonly config: Config
  private redisClient: RedisClient | undefined
  private embedded: SupervisedRedisServerHandle | undefined
  private built: Container | undefined
  private store: ClickHouseStore | undefined

  constructor(readonly io: CliIo) {
    this.config = loadConfig(io.env)
  }

  /**
   * REDIS_URL; else the redis-server the running gateway started on METERING_DATA_DIR; else one
   * started on it for this command (stopped when it ends). The script library is loaded if missing.
   */
  async redis(): Promise<RedisClient> {
    if (this.redisClient) return this.redisClient
    const { redisUrl, dataDir, redisFsync } = this.config
    const running = redisUrl ?? (await runningEmbeddedRedis(dataDir))
    this.embedded = running ? undefined : await startEmbeddedRedis(dataDir, redisFsync)
    this.redisClient = connectRedis(running ?? this.embedded!.url, 'metering-cli')
    if (!(await libraryLoaded(this.redisClient))) await loadLibrary(this.redisClient)
    return this.redisClient
  }

  /** The domain services, wired as the gateway wires them (src/container.ts); `history` for those that read it (invoices). */
  async container(history?: ClickHouseStore): Promise<Container> {
    if (this.built) return this.built
    const redis = await this.redis()
    // Logs go to stderr, answers to stdout.
    const logger = pino({ level: this.config.logLevel }, process.stderr)
    this.built = buildServices({ config: this.config, redis, clock: systemClock, logger, clickhouse: history })
    return this.built
  }

  /**
   * The usage history: CLICKHOUSE_URL; else the gateway running on METERING_DATA_DIR (it holds
   * chDB, which allows one process per data directory); else chDB under METERING_DATA_DIR,
   * opened by this process. `migrate`: create the tables first (a command that writes);
   * `timeoutMs`: a server's calls wait at least this long.
   */
  async history(options: { migrate: boolean; timeoutMs?: number }): Promise<History> {
    const c = this.config
    if (!c.clickhouseUrl) {
      const url = await runningGateway(c.dataDir)
      if (url) return { via: 'gateway', gateway: new GatewayClient(url, c.rootKey) }
    }
    const timeoutMs = Math.max(c.clickhouseTimeoutMs, options.timeoutMs ?? 0)
    const open = {
      clickhouseUrl: c.clickhouseUrl,
      dataDir: c.dataDir,
      clickhouseDatabase: c.clickhouseDatabase,
      clickhouseCluster: c.clickhouseCluster,
      clickhouseTimeoutMs: timeoutMs,
    }
    try {
      this.store = options.migrate
        ? await openHistory(open)
        : await openClickHouse({ url: c.clickhouseUrl, dataDir: c.dataDir, database: c.clickhouseDatabase, cluster: c.clickhouseCluster, timeoutMs })
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      if (c.clickhouseUrl) throw new CliFailure(`ClickHouse at ${c.clickhouseUrl}: ${message}`)
      throw new CliFailure(
        `chDB under ${c.dataDir}/clickhouse could not be opened: ${message}\nchDB allows one process per data directory: if a ` +
          `gateway runs on it, it writes ${c.dataDir}/gateway.url and the CLI asks it instead.`,
      )
    }
    return { via: 'store', store: this.store }
  }

  /** Prints an answer as indented JSON. */
  print(value: unknown): void {
    this.io.out(JSON.stringify(value, null, 2))
  }

  /** Prints why the command failed; its exit code. */
  fail(message: string): number {
    this.io.err(message)
    return 1
  }

  async close(): Promise<void> {
    await this.built?.close()
    if (this.redisClient) await closeRedis(this.redisClient)
    await this.embedded?.stop()
    await this.store?.close()
  }
}
