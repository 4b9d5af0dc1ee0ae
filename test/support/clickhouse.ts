// Runs a real clickhouse-server (Debian's 18.16 package) as a child process for
// the tests, the way src/infra/redis/embedded.ts runs redis: its own free ports, a
// minimal generated config in a temp dir, and setpriv --pdeathsig so nothing
// outlives the process that started it.

import { spawn, type ChildProcess } from 'node:child_process'
import { access, constants, mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { delay, freePort, terminate } from '../../src/infra/redis/embedded.js'

export interface ClickHouseServerHandle {
  /** http://127.0.0.1:PORT, for @clickhouse/client (CLICKHOUSE_URL). */
  url: string
  httpPort: number
  tcpPort: number
  pid: number
  dir: string
  stop(): Promise<void>
}

const HOST = '127.0.0.1'
const READY_TIMEOUT_MS = 30_000
const STOP_GRACE_MS = 10_000
const INSTALL_HINT = 'clickhouse-server must be installed (Debian: apt-get install clickhouse-server, or run scripts/install.sh)'
const CANDIDATES = ['/usr/sbin/clickhouse-server', '/usr/bin/clickhouse-server', '/usr/bin/clickhouse']

/** The clickhouse-server binary: $CLICKHOUSE_SERVER_BIN, PATH, or the Debian locations. */
export async function findClickHouseServer(): Promise<string | undefined> {
  const fromPath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .map((d) => path.join(d, 'clickhouse-server'))
  const all = [process.env.CLICKHOUSE_SERVER_BIN, ...fromPath, ...CANDIDATES].filter((c): c is string => Boolean(c))
  for (const candidate of all) {
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

function configXml(dir: string, httpPort: number, tcpPort: number): string {
  // Only what 18.16 needs to start; everything else keeps its default. UTC so
  // that toStartOfHour()/toDate() agree with chDB and with the epoch-ms math in JS.
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>${dir}/log/server.log</log>
    <errorlog>${dir}/log/error.log</errorlog>
    <console>0</console>
  </logger>
  <listen_host>${HOST}</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`
}

const USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>::/0</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`

/** `configD`: XML written to the server's config.d/ before it starts (ZooKeeper, macros: test/support/clickhouseCluster.ts). */
export async function startClickHouseServer(opts: { dataDir: string; configD?: string }): Promise<ClickHouseServerHandle> {
  const binary = await findClickHouseServer()
  if (binary === undefined) throw new Error(`cannot start clickhouse-server: binary not found; ${INSTALL_HINT}`)
  let lastErr: unknown
  // A free port can be taken before the server binds it: pick again.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(binary, path.resolve(opts.dataDir, `try${attempt}`), opts.configD)
    } catch (err) {
      lastErr = err
      if (!(err instanceof Error) || !/Address already in use|bind/i.test(err.message)) throw err
    }
  }
  throw lastErr
}

async function startOnce(binary: string, dir: string, configD: string | undefined): Promise<ClickHouseServerHandle> {
  for (const sub of ['data', 'tmp', 'user_files', 'format_schemas', 'log', 'config.d']) await mkdir(path.join(dir, sub), { recursive: true })
  if (configD !== undefined) await writeFile(path.join(dir, 'config.d', 'extra.xml'), configD)
  const httpPort = await freePort()
  let tcpPort = await freePort()
  while (tcpPort === httpPort) tcpPort = await freePort()
  const configPath = path.join(dir, 'config.xml')
  await writeFile(configPath, configXml(dir, httpPort, tcpPort))
  await writeFile(path.join(dir, 'users.xml'), USERS_XML)

  let output = ''
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4_000)
  }
  // setpriv execs the server, so child.pid is the server's pid; the kernel
  // SIGTERMs it if this process dies without cleaning up.
  const setpriv = process.platform === 'linux' ? await exists('/usr/bin/setpriv') : undefined
  const args = [`--config-file=${configPath}`]
  const child: ChildProcess = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'TERM', binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir })
    : spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir })
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  let gone: Error | { code: number | null; signal: NodeJS.Signals | null } | undefined
  const goneP = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      gone ??= err
      resolve()
    })
    child.once('close', (code, signal) => {
      gone ??= { code, signal }
      resolve()
    })
  })
  const onExit = (): void => {
    child.kill('SIGTERM')
  }
  process.on('exit', onExit)
  void goneP.then(() => process.off('exit', onExit))

  const url = `http://${HOST}:${httpPort}`
  const deadline = Date.now() + READY_TIMEOUT_MS
  let ready = false
  while (!ready && gone === undefined && Date.now() < deadline) {
    ready = await answers(url)
    if (!ready) await Promise.race([goneP, delay(100)])
  }
  if (!ready) {
    const log = await readFile(path.join(dir, 'log', 'error.log'), 'utf8').catch(() => '')
    if (gone === undefined) await terminate(child, goneP, STOP_GRACE_MS)
    const how = gone instanceof Error ? gone.message : gone ? `exit ${gone.code ?? gone.signal}` : `no answer in ${READY_TIMEOUT_MS} ms`
    throw new Error(`clickhouse-server (http ${httpPort}, tcp ${tcpPort}) not ready: ${how}\n${output}\n${log.slice(-4_000)}\n(${INSTALL_HINT})`)
  }
  let stopping: Promise<void> | undefined
  return { url, httpPort, tcpPort, pid: child.pid as number, dir, stop: () => (stopping ??= terminate(child, goneP, STOP_GRACE_MS)) }
}

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/?query=SELECT%201`, { signal: AbortSignal.timeout(1_000) })
    return res.ok && (await res.text()).trim() === '1'
  } catch {
    return false
  }
}

async function exists(p: string): Promise<string | undefined> {
  try {
    await access(p, constants.X_OK)
    return p
  } catch {
    return undefined
  }
}
