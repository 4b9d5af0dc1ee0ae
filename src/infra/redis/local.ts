import { readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { superviseRedisServer, type AppendFsync, type RedisSupervisorEvent, type RestartBackoff, type SupervisedRedisServerHandle } from './embedded.js'

/**
 * The embedded Redis of a data directory. The service writes the URL of the redis-server it
 * started to `<dataDir>/redis/url`, so that the CLI reaches the running one instead of
 * starting a second server on the same files; when none runs, the caller starts one.
 */
export async function runningEmbeddedRedis(dataDir: string): Promise<string | undefined> {
  const url = await readFile(join(dataDir, 'redis', 'url'), 'utf8').catch(() => undefined)
  if (!url) return undefined
  const probe = new Redis(url.trim(), { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try {
    await probe.connect()
    await probe.ping()
    return url.trim()
  } catch {
    return undefined
  } finally {
    probe.disconnect()
  }
}

/** Where startEmbeddedRedis logs the deaths and restarts of its server; a pino Logger is one. */
export interface EmbeddedRedisLog {
  warn(obj: object, msg: string): void
  error(obj: object, msg: string): void
}

export interface EmbeddedRedisOptions {
  logger?: EmbeddedRedisLog
  /** Each supervisor event, after it is logged (tests). */
  onEvent?: (event: RedisSupervisorEvent) => void
  backoff?: RestartBackoff
}

/**
 * Starts the embedded redis-server of a data directory, with AOF; `fsync` is its appendfsync
 * (METERING_REDIS_FSYNC, src/kernel/config.ts): `always` by default, so that nothing
 * acknowledged is lost (src/budgets/README.md, "Durability"). It is supervised: a server that
 * dies (kill -9, a crash, the OOM killer) is restarted on the same port and files, with
 * backoff, each death and restart logged (superviseRedisServer); the clients reconnect by
 * themselves, and the script library is in the AOF too.
 */
export async function startEmbeddedRedis(
  dataDir: string,
  fsync: AppendFsync = 'always',
  options: EmbeddedRedisOptions = {},
): Promise<SupervisedRedisServerHandle> {
  const dir = join(dataDir, 'redis')
  const { logger, onEvent } = options
  const server = await superviseRedisServer({
    dataDir: dir,
    appendOnly: true,
    fsync,
    backoff: options.backoff,
    onEvent: (event) => {
      if (logger) logEvent(logger, event)
      onEvent?.(event)
    },
  })
  try {
    await writeFile(join(dir, 'url'), server.url)
  } catch (err) {
    await server.stop()
    throw err
  }
  return {
    host: server.host,
    port: server.port,
    url: server.url,
    dir: server.dir,
    get pid() {
      return server.pid
    },
    get restarts() {
      return server.restarts
    },
    stop: async () => {
      await rm(join(dir, 'url'), { force: true })
      await server.stop()
    },
  }
}

function logEvent(logger: EmbeddedRedisLog, event: RedisSupervisorEvent): void {
  const { port } = event
  if (event.kind === 'exited') {
    const { pid, code, signal } = event
    const output = event.output.slice(-OUTPUT_LOGGED_CHARS)
    logger.error({ port, pid, code, signal, output }, 'embedded redis-server exited without being asked to; it will be restarted')
  } else if (event.kind === 'restarting') {
    logger.warn({ port, attempt: event.attempt, delayMs: event.delayMs }, `restarting embedded redis-server in ${event.delayMs} ms`)
  } else if (event.kind === 'restart-failed') {
    const why = event.portInUse ? `port ${port} is taken by another process` : event.error.message.split('\n')[0]
    logger.error({ port, attempt: event.attempt, err: event.error }, `embedded redis-server could not restart (${why}); retrying`)
  } else {
    logger.warn({ port, pid: event.pid, attempt: event.attempt, restarts: event.restarts }, 'embedded redis-server restarted')
  }
}

/** Of what a dead server printed (a crash report can be long). */
const OUTPUT_LOGGED_CHARS = 2_000
