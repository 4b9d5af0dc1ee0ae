// A dedicated redis-server per benchmark leg, and the Redis-side figures:
// INFO commandstats (time spent inside commands) and the redis-server
// process's CPU (which also covers parsing, networking and AOF writes).

import { spawn } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { Redis } from 'ioredis'
import { delay, freePort, HOST } from './proc.js'

export interface BenchRedis {
  url: string
  pid: number
  /** Separate admin connection used only for CONFIG RESETSTAT / INFO. */
  admin: Redis
  version: string
  stop(): Promise<void>
}

/**
 * Same settings for our gateway and the peer: AOF on with fsync every second (the
 * setting the peer's users run; the ours-always leg measures fsync before every
 * reply, the gateway's default); no RDB snapshots (a fork in the middle of a leg
 * would be noise).
 */
/** appendfsync of the bench's Redis: `everysec` unless a leg measures fsync before every reply. */
export type Fsync = 'always' | 'everysec'

export async function startBenchRedis(dataDir: string, fsync: Fsync = 'everysec'): Promise<BenchRedis> {
  mkdirSync(dataDir, { recursive: true })
  let handle: { url: string; pid: number; stop(): Promise<void> }
  try {
    // Prefer the project's own launcher (AOF on; appendfsync as the leg asks).
    // Imported lazily so the bench still works if it
    // is missing or broken while src/ is being written.
    const mod = (await import('../../src/infra/redis/embedded.js')) as {
      startRedisServer(o: { dataDir: string; appendOnly?: boolean; extraArgs?: string[] }): Promise<{
        url: string
        pid: number
        stop(): Promise<void>
      }>
    }
    handle = await mod.startRedisServer({
      dataDir,
      appendOnly: true,
      // Stated explicitly so the bench does not depend on the launcher's defaults.
      extraArgs: ['--appendfsync', fsync, '--auto-aof-rewrite-percentage', '0'],
    })
  } catch (err) {
    console.warn(`  (src/infra/redis/embedded.ts unusable: ${(err as Error).message.split('\n')[0]}; spawning redis-server directly)`)
    handle = await spawnRedis(dataDir, fsync)
  }
  const admin = new Redis(handle.url, { lazyConnect: false, maxRetriesPerRequest: 1 })
  const info = await admin.info('server')
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?'
  return {
    ...handle,
    admin,
    version,
    stop: async () => {
      admin.disconnect()
      await handle.stop()
    },
  }
}

/** Fallback: spawn redis-server ourselves with the same flags. */
async function spawnRedis(dataDir: string, fsync: Fsync): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort()
  // auto-aof-rewrite off: a background rewrite (fork) mid-leg would be noise.
  const args = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dataDir,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    fsync,
    '--auto-aof-rewrite-percentage',
    '0',
    '--protected-mode',
    'no',
    '--daemonize',
    'no',
  ]
  const proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  proc.stdout.resume()
  proc.stderr.resume()
  const exited = new Promise<void>((r) => proc.once('close', () => r()))
  const url = `redis://${HOST}:${port}`
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  for (let i = 0; ; i++) {
    try {
      await probe.connect()
      await probe.ping()
      probe.disconnect()
      break
    } catch {
      if (i > 100) throw new Error(`redis-server on ${port} did not start`)
      await delay(50)
    }
  }
  process.on('exit', () => proc.kill('SIGTERM'))
  return {
    url,
    pid: proc.pid ?? -1,
    stop: async () => {
      proc.kill('SIGTERM')
      await exited
    },
  }
}

// ---------------------------------------------------------------------------
// Figures

/** Zero the command statistics; call right before the measured run. */
export async function redisReset(r: BenchRedis): Promise<void> {
  await r.admin.config('RESETSTAT')
}

export interface CommandFigure {
  calls: number
  usec: number
  callsPerReq: number
  usecPerReq: number
  usecPerCall: number
}

export interface RedisFigures {
  /** Per command, from INFO commandstats (the bench's own INFO/CONFIG excluded). */
  commands: Record<string, CommandFigure>
  /**
   * Redis 7 counts a command run from a Lua script (or inside MULTI/EXEC)
   * twice: in the script's own time AND under its own name. So the honest
   * "Redis µs per request" lies between:
   *   low  = time of the top-level containers (eval*, fcall*, exec) plus,
   *          only when no container ran, the plain commands;
   *   high = the plain sum of everything (double-counts nested commands).
   * The target is checked against `low`: a script's time already includes the commands it runs.
   */
  usecPerReqLow: number
  usecPerReqHigh: number
  /**
   * Script time per request (per authorize): FCALL's usec (the gateway's Lua runs as Redis
   * Functions), else EVALSHA's, divided by the requests — not by the calls: one FCALL of the
   * library's multi function carries a turn's authorizes (src/infra/redis/multi.ts), and the peer
   * makes 3 calls per request. (The name is kept: bench/lib/report.ts and the baselines read it.)
   * null if none.
   */
  scriptUsecPerCall: number | null
  /** Script calls (FCALL, else EVALSHA) per request: below 1 when multi calls carry several. */
  scriptCallsPerReq: number | null
  /** CPU of the redis-server process per request (commands + parsing + network + AOF). */
  cpuUsPerReq: number
}

const CONTAINERS = /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro|exec)$/
// Commands the bench itself sends on the admin connection.
const OURS = /^(info|config\|resetstat)$/

/** Reads the figures after the run; `cpuUs` is the redis-server CPU over the run (measured with the server's). */
export async function redisFigures(r: BenchRedis, requests: number, cpuUs: number): Promise<RedisFigures> {
  const text = await r.admin.info('commandstats')
  const commands: Record<string, CommandFigure> = {}
  let containers = 0
  let plain = 0
  for (const line of text.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line)
    if (!m) continue
    const [, name, c, u] = m as unknown as [string, string, string, string]
    if (OURS.test(name)) continue
    const calls = Number(c)
    const usec = Number(u)
    commands[name] = {
      calls,
      usec,
      callsPerReq: calls / requests,
      usecPerReq: usec / requests,
      usecPerCall: calls ? usec / calls : 0,
    }
    if (CONTAINERS.test(name)) containers += usec
    else plain += usec
  }
  const high = (containers + plain) / requests
  const low = containers > 0 ? containers / requests : high
  return {
    commands,
    usecPerReqLow: low,
    usecPerReqHigh: high,
    scriptUsecPerCall: (commands.fcall ?? commands.evalsha)?.usecPerReq ?? null,
    scriptCallsPerReq: (commands.fcall ?? commands.evalsha)?.callsPerReq ?? null,
    cpuUsPerReq: cpuUs / requests,
  }
}
