// Vitest globalSetup: one standalone redis-server, one 3-master cluster and
// one clickhouse-server (Debian's 18.16, see ./clickhouse.ts) for the whole
// run, shared by every project and test file. Tests isolate their keys with
// uniquePrefix() (see ./redis.ts) instead of flushing, and their ClickHouse
// tables with a throwaway database (test_<random>).
//
// It is listed only in the root config of vitest.config.ts: the root project's
// globalSetup always runs once and its provide()d values are inherited by
// every project, whereas a per-project globalSetup would start servers once
// per project.

import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { TestProject } from 'vitest/node'
import { startRedisServer } from '../../src/infra/redis/embedded.js'
import { startClickHouseServer } from './clickhouse.js'
import { startRedisCluster } from './cluster.js'

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now()
  const root = await mkdtemp(path.join(os.tmpdir(), 'metering-test-'))
  const [standalone, cluster, clickhouse] = await Promise.allSettled([
    startRedisServer({ dataDir: path.join(root, 'standalone'), appendOnly: false }),
    startRedisCluster({ dataDir: path.join(root, 'cluster') }),
    // Fails with an install hint when clickhouse-server is missing (CI installs
    // it through scripts/install.sh).
    startClickHouseServer({ dataDir: path.join(root, 'clickhouse') }),
  ])

  const teardown = async (): Promise<void> => {
    await Promise.allSettled([
      standalone.status === 'fulfilled' ? standalone.value.stop() : undefined,
      cluster.status === 'fulfilled' ? cluster.value.stop() : undefined,
      clickhouse.status === 'fulfilled' ? clickhouse.value.stop() : undefined,
    ])
    await rm(root, { recursive: true, force: true })
  }

  for (const started of [standalone, cluster, clickhouse]) {
    if (started.status === 'rejected') {
      await teardown()
      throw started.reason
    }
  }
  if (standalone.status !== 'fulfilled' || cluster.status !== 'fulfilled' || clickhouse.status !== 'fulfilled') {
    throw new Error('unreachable')
  }

  project.provide('redisUrl', standalone.value.url)
  project.provide('clusterNodes', cluster.value.nodes)
  project.provide('clickhouseUrl', clickhouse.value.url)
  if (process.env.DEBUG_TEST_SETUP) {
    console.log(`[globalSetup] redis ${standalone.value.url}, clickhouse ${clickhouse.value.url}, cluster ready in ${Date.now() - t0} ms`)
  }
  return teardown
}
