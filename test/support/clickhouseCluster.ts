// A ClickHouse cluster for the tests: one ZooKeeper (Debian's `zookeeper` package, run as a
// java child) and three clickhouse-server 18.16 children (./clickhouse.ts) with two clusters
// over them, both with the standard {shard}/{replica} macros:
//
//   metering_shards    2 shards × 1 replica:  a (shard 01), b (shard 02)
//   metering_replicas  1 shard  × 2 replicas: b, c (both shard 02)
//
// Three nodes rather than two because the {shard} macro has one value per server: on two nodes a
// server cannot be shard 02 of one cluster and a replica of shard 01 of the other, and the
// migrations should use the macros every ClickHouse operator configures, not names made up for a
// test. Everything is started in parallel on free ports under one temp dir.

import { spawn } from 'node:child_process'
import { access, constants, mkdir, writeFile } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { delay, freePort, terminate } from '../../src/infra/redis/embedded.js'
import { type ClickHouseServerHandle, startClickHouseServer } from './clickhouse.js'

const HOST = '127.0.0.1'
const READY_TIMEOUT_MS = 60_000
const ZOOKEEPER_JARS = ['/usr/share/java/zookeeper.jar']
const INSTALL_HINT = 'ZooKeeper must be installed (Debian: apt-get install zookeeperd, or run scripts/install.sh) and java on PATH'

export const SHARDS_CLUSTER = 'metering_shards'
export const REPLICAS_CLUSTER = 'metering_replicas'

export interface ClickHouseClusterHandle {
  zookeeper: { port: number }
  /** a: shard 01 of metering_shards; b: shard 02 of metering_shards and a replica of metering_replicas; c: the other replica. */
  nodes: { a: ClickHouseServerHandle; b: ClickHouseServerHandle; c: ClickHouseServerHandle }
  stop(): Promise<void>
}

interface Stoppable {
  stop(): Promise<void>
}

/** ZooKeeper standalone on a free port, data under `dir`; resolves once it answers `ruok`. */
export async function startZooKeeper(dir: string): Promise<{ port: number } & Stoppable> {
  const jar = process.env.ZOOKEEPER_JAR ?? (await firstExisting(ZOOKEEPER_JARS))
  if (jar === undefined) throw new Error(`cannot start ZooKeeper: zookeeper.jar not found; ${INSTALL_HINT}`)
  // Without a binding slf4j prints a warning and logs nothing, which is what a test wants.
  const nop = await firstExisting(['/usr/share/java/slf4j-nop.jar'])
  await mkdir(path.join(dir, 'data'), { recursive: true })
  const port = await freePort()
  const cfg = path.join(dir, 'zoo.cfg')
  await writeFile(
    cfg,
    [
      `tickTime=500`,
      `dataDir=${dir}/data`,
      `clientPort=${port}`,
      `clientPortAddress=${HOST}`,
      'admin.enableServer=false',
      '4lw.commands.whitelist=ruok',
      'forceSync=no',
      'maxClientCnxns=0',
      '',
    ].join('\n'),
  )
  const classpath = [jar, nop].filter(Boolean).join(':')
  const java = ['-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', classpath, 'org.apache.zookeeper.server.ZooKeeperServerMain', cfg]
  const setpriv = process.platform === 'linux' ? await firstExisting(['/usr/bin/setpriv']) : undefined
  const child = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'TERM', 'java', ...java], { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir })
    : spawn('java', java, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir })
  let output = ''
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4_000)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  let gone = false
  const goneP = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      output += `\n${err.message}`
      gone = true
      resolve()
    })
    child.once('close', () => {
      gone = true
      resolve()
    })
  })
  const onExit = (): void => {
    child.kill('SIGTERM')
  }
  process.on('exit', onExit)
  void goneP.then(() => process.off('exit', onExit))
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (!gone && !(await ruok(port))) {
    if (Date.now() > deadline) break
    await Promise.race([goneP, delay(100)])
  }
  if (gone || !(await ruok(port))) {
    await terminate(child, goneP, 5_000)
    throw new Error(`ZooKeeper (port ${port}) not ready in ${READY_TIMEOUT_MS} ms: ${output}\n(${INSTALL_HINT})`)
  }
  let stopping: Promise<void> | undefined
  return { port, stop: () => (stopping ??= terminate(child, goneP, 5_000)) }
}

function ruok(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    let answer = ''
    const socket = net.connect(port, HOST, () => socket.write('ruok'))
    socket.setTimeout(1_000, () => socket.destroy())
    socket.on('data', (chunk) => {
      answer += chunk.toString('utf8')
    })
    socket.on('error', () => resolve(false))
    socket.on('close', () => resolve(answer === 'imok'))
  })
}

function nodeConfig(zookeeperPort: number, interserverPort: number, shard: string, replica: string): string {
  return `<?xml version="1.0"?>
<yandex>
  <zookeeper>
    <node><host>${HOST}</host><port>${zookeeperPort}</port></node>
    <session_timeout_ms>30000</session_timeout_ms>
  </zookeeper>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
  <macros><shard>${shard}</shard><replica>${replica}</replica></macros>
  <interserver_http_host>${HOST}</interserver_http_host>
  <interserver_http_port>${interserverPort}</interserver_http_port>
</yandex>
`
}

function replica(node: ClickHouseServerHandle): string {
  return `<replica><host>${HOST}</host><port>${node.tcpPort}</port></replica>`
}

/** internal_replication: a Distributed table writes one replica per shard, Replicated* tables copy it to the others. */
function remoteServers(nodes: ClickHouseClusterHandle['nodes']): string {
  const shard = (...replicas: ClickHouseServerHandle[]): string =>
    `<shard><internal_replication>true</internal_replication>${replicas.map(replica).join('')}</shard>`
  return `<?xml version="1.0"?>
<yandex>
  <remote_servers>
    <${SHARDS_CLUSTER}>${shard(nodes.a)}${shard(nodes.b)}</${SHARDS_CLUSTER}>
    <${REPLICAS_CLUSTER}>${shard(nodes.b, nodes.c)}</${REPLICAS_CLUSTER}>
  </remote_servers>
</yandex>
`
}

/**
 * Starts ZooKeeper, then the three servers in parallel; the clusters (remote_servers, which name
 * every server's TCP port, known only once each has started) are written into each server's
 * config.d afterwards: ClickHouse reloads them, and this waits until every server lists both.
 */
export async function startClickHouseCluster(opts: { dataDir: string }): Promise<ClickHouseClusterHandle> {
  const started: Stoppable[] = []
  const stopAll = async (): Promise<void> => {
    await Promise.allSettled(started.splice(0).map((s) => s.stop()))
  }
  try {
    const zookeeper = await startZooKeeper(path.join(opts.dataDir, 'zookeeper'))
    started.push(zookeeper)
    const layout = [
      ['a', '01'],
      ['b', '02'],
      ['c', '02'],
    ] as const
    const results = await Promise.allSettled(
      layout.map(async ([name, shard]) =>
        startClickHouseServer({ dataDir: path.join(opts.dataDir, name), configD: nodeConfig(zookeeper.port, await freePort(), shard, name) }),
      ),
    )
    for (const r of results) if (r.status === 'fulfilled') started.push(r.value)
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
    const [a, b, c] = results.map((r) => (r as PromiseFulfilledResult<ClickHouseServerHandle>).value) as [
      ClickHouseServerHandle,
      ClickHouseServerHandle,
      ClickHouseServerHandle,
    ]
    const nodes = { a, b, c }
    await Promise.all(Object.values(nodes).map((n) => writeFile(path.join(n.dir, 'config.d', 'remote_servers.xml'), remoteServers(nodes))))
    await Promise.all(Object.values(nodes).map((n) => waitForClusters(n)))
    return { zookeeper: { port: zookeeper.port }, nodes, stop: stopAll }
  } catch (err) {
    await stopAll()
    throw err
  }
}

async function waitForClusters(node: ClickHouseServerHandle): Promise<void> {
  const sql = `SELECT count() FROM system.clusters WHERE cluster IN ('${SHARDS_CLUSTER}', '${REPLICAS_CLUSTER}')`
  const deadline = Date.now() + READY_TIMEOUT_MS
  let last = ''
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${node.url}/?query=${encodeURIComponent(sql)}`, { signal: AbortSignal.timeout(2_000) })
      last = (await res.text()).trim()
      if (last === '4') return
    } catch (err) {
      last = String(err)
    }
    await delay(200)
  }
  throw new Error(`clickhouse-server ${node.url} did not load the clusters in ${READY_TIMEOUT_MS} ms (last answer: ${last})`)
}

async function firstExisting(candidates: readonly string[]): Promise<string | undefined> {
  for (const c of candidates) {
    try {
      await access(c, constants.R_OK)
      return c
    } catch {
      // not here
    }
  }
  return undefined
}
