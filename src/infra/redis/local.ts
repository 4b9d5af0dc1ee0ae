import { readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { startRedisServer, type AppendFsync, type RedisServerHandle } from './embedded.js'

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

/**
 * Starts the embedded redis-server of a data directory, with AOF; `fsync` is its appendfsync
 * (METERING_REDIS_FSYNC, src/kernel/config.ts): `always` by default, so that nothing
 * acknowledged is lost (src/budgets/README.md, "Durability").
 */
export async function startEmbeddedRedis(dataDir: string, fsync: AppendFsync = 'always'): Promise<RedisServerHandle> {
  const dir = join(dataDir, 'redis')
  const server = await startRedisServer({ dataDir: dir, appendOnly: true, fsync })
  await writeFile(join(dir, 'url'), server.url)
  return {
    ...server,
    stop: async () => {
      await rm(join(dir, 'url'), { force: true })
      await server.stop()
    },
  }
}
