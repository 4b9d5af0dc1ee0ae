// Vitest globalSetup: one standalone redis-server and one 3-master cluster for
// the whole run, shared by every project and test file. Tests isolate their
// keys with uniquePrefix() (see ./redis.ts) instead of flushing.
//
// It is listed only in the root config of vitest.config.ts: the root project's
// globalSetup always runs once and its provide()d values are inherited by
// every project, whereas a per-project globalSetup would start servers once
// per project.

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startRedisServer } from '../../src/redis/embedded.js';
import { startRedisCluster } from './cluster.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const root = await mkdtemp(path.join(os.tmpdir(), 'metering-test-'));
  const [standalone, cluster] = await Promise.allSettled([
    startRedisServer({ dataDir: path.join(root, 'standalone'), appendOnly: false }),
    startRedisCluster({ dataDir: path.join(root, 'cluster') }),
  ]);

  const teardown = async (): Promise<void> => {
    await Promise.allSettled([
      standalone.status === 'fulfilled' ? standalone.value.stop() : undefined,
      cluster.status === 'fulfilled' ? cluster.value.stop() : undefined,
    ]);
    await rm(root, { recursive: true, force: true });
  };

  if (standalone.status === 'rejected' || cluster.status === 'rejected') {
    await teardown();
    throw standalone.status === 'rejected'
      ? standalone.reason
      : (cluster as PromiseRejectedResult).reason;
  }

  project.provide('redisUrl', standalone.value.url);
  project.provide('clusterNodes', cluster.value.nodes);
  if (process.env.DEBUG_TEST_SETUP) {
    console.log(`[globalSetup] redis ${standalone.value.url}, cluster ready in ${Date.now() - t0} ms`);
  }
  return teardown;
}
