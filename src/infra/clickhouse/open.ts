// Opening the store the configuration names: a ClickHouse server when CLICKHOUSE_URL is set,
// chDB in a child process otherwise (store.ts is the interface both keep).

import path from 'node:path'
import { applyTtl, migrate, migrations } from './migrations.js'
import type { ClickHouseStore } from './store.js'

export interface OpenClickHouseOptions {
  /** CLICKHOUSE_URL: set → a server over HTTP; unset → chDB under dataDir. */
  url?: string | undefined
  /** METERING_DATA_DIR; chDB keeps its files in <dataDir>/clickhouse. */
  dataDir: string
  /** Created if missing and used for unqualified names; default "default". */
  database?: string
  /** A server's calls fail after this many milliseconds unanswered (default: the client's, 30 s). */
  timeoutMs?: number
  /** CLICKHOUSE_CLUSTER: the server's cluster the tables are spread over (cluster.ts); needs `url`. */
  cluster?: string | undefined
}

export async function openClickHouse(options: OpenClickHouseOptions): Promise<ClickHouseStore> {
  const database = options.database ?? 'default'
  if (options.cluster !== undefined && !options.url) {
    throw new Error(`CLICKHOUSE_CLUSTER=${options.cluster} needs CLICKHOUSE_URL (a server of that cluster): the embedded chDB is one process, not a cluster`)
  }
  if (options.url) {
    const { openServerStore } = await import('./server.js')
    return openServerStore({
      url: options.url,
      database,
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.cluster === undefined ? {} : { cluster: options.cluster }),
    })
  }
  const { openEmbeddedStore } = await import('./embedded.js')
  return openEmbeddedStore({ path: path.join(options.dataDir, 'clickhouse'), database })
}

/**
 * Opens the store, applies its migrations and the TTL settings (closed again if they fail). A TTL
 * the server cannot apply (18.16) is told to `onNotice` (default: a warning line on stderr).
 */
export async function openHistory(options: {
  clickhouseUrl?: string | undefined
  dataDir: string
  clickhouseDatabase?: string | undefined
  clickhouseTimeoutMs?: number
  clickhouseTtlDays?: Readonly<Record<string, number>>
  /** CLICKHOUSE_CLUSTER: migrations ON CLUSTER (cluster.ts); refused without clickhouseUrl. */
  clickhouseCluster?: string | undefined
  onNotice?: (message: string) => void
}): Promise<ClickHouseStore> {
  const cluster = options.clickhouseCluster
  const store = await openClickHouse({
    url: options.clickhouseUrl,
    dataDir: options.dataDir,
    cluster,
    ...(options.clickhouseTimeoutMs ? { timeoutMs: options.clickhouseTimeoutMs } : {}),
    ...(options.clickhouseDatabase === undefined ? {} : { database: options.clickhouseDatabase }),
  })
  try {
    await migrate(store, migrations, { cluster })
    const ttl = await applyTtl(store, options.clickhouseTtlDays ?? {}, { cluster })
    if (ttl.skipped !== undefined) {
      const notice = options.onNotice ?? ((msg: string) => process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), msg })}\n`))
      notice(ttl.skipped)
    }
  } catch (err) {
    await store.close().catch(() => {})
    throw err
  }
  return store
}
