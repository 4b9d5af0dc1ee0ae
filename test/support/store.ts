// A throwaway ClickHouse store for a suite: the test clickhouse-server (18.16) or chDB in a temp
// directory, in its own database, dropped and removed again by `close`.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { inject } from 'vitest'
import { migrate } from '../../src/infra/clickhouse/migrations.js'
import { openClickHouse } from '../../src/infra/clickhouse/open.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'

export interface TestStore {
  store: ClickHouseStore
  close(): Promise<void>
}

export async function openTestStore(kind: 'server' | 'embedded', database: string, options: { migrate?: boolean } = {}): Promise<TestStore> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-store-'))
  let store: ClickHouseStore | undefined
  const close = async () => {
    if (store !== undefined) {
      await store.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
      await store.close()
    }
    await rm(dataDir, { recursive: true, force: true })
  }
  try {
    store = await openClickHouse({ url: kind === 'server' ? inject('clickhouseUrl') : undefined, dataDir, database })
    if (options.migrate) await migrate(store)
  } catch (err) {
    await close()
    throw err
  }
  return { store, close }
}
