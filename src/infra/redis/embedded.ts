// Runs a real redis-server as a child process, for `npm start` and the tests.
//
// We spawn the Debian `redis-server` binary instead of depending on Docker or
// a system service: it starts in well under a second, each caller gets its
// own port and data directory, and nothing outlives the Node process that
// started it. superviseRedisServer also restarts it, on the same port and data
// directory, when it dies without being asked to (kill -9, a crash, the OOM killer).

import { spawn, type ChildProcess } from 'node:child_process'
import { access, constants, mkdir } from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { systemClock, type Clock } from '../../kernel/clock.js'

export interface RedisServerHandle {
  host: string
  port: number
  url: string
  /** The pid of the redis-server (of a supervised one: the current one, or the last one while a restart is pending). */
  readonly pid: number
  dir: string
  stop(): Promise<void>
}

/** The `appendfsync` settings the embedded server runs with (METERING_REDIS_FSYNC). */
export type AppendFsync = 'always' | 'everysec'

export interface StartRedisServerOptions {
  dataDir: string
  /** Fixed port; by default a free one is picked (and re-picked if taken meanwhile). */
  port?: number
  /** AOF persistence; default true. */
  appendOnly?: boolean
  /**
   * The AOF's `appendfsync` (with appendOnly): `always` (the default) fsyncs a write before its
   * reply is sent (Redis group-commits: one fsync per event-loop pass, for every client's writes
   * of that pass), so nothing acknowledged is lost; `everysec` fsyncs once a second, so a power
   * loss or an OS crash can lose about the last second of acknowledged writes.
   */
  fsync?: AppendFsync
  extraArgs?: string[]
  binary?: string
}

const HOST = '127.0.0.1'
const READY_TIMEOUT_MS = 10_000
const STOP_GRACE_MS = 5_000
const OUTPUT_TAIL_CHARS = 4_000
const INSTALL_HINT = 'redis-server must be installed (Debian: apt-get install redis-server redis-tools, or run scripts/install.sh)'

/** Asks the kernel for a currently free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.once('error', reject)
    srv.listen(0, HOST, () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

export async function startRedisServer(opts: StartRedisServerOptions): Promise<RedisServerHandle> {
  const { launched, port, dir } = await startPickingPort(opts)
  const { child, goneP } = launched
  let stopping: Promise<void> | undefined
  return {
    host: HOST,
    port,
    url: urlOf(port),
    pid: child.pid as number,
    dir,
    stop: () => (stopping ??= terminate(child, goneP)),
  }
}

/** A redis-server that answered PING as itself. */
interface Running {
  launched: Launched
  port: number
  dir: string
}

function urlOf(port: number): string {
  return `redis://${HOST}:${port}`
}

/** How a redis-server is spawned, apart from its options. */
interface LaunchOptions {
  /** Learns of the child as soon as it is spawned, before it is ready. */
  onLaunched?: (server: Launched) => void
  /**
   * A process group of its own: a terminal's Ctrl+C (SIGINT to the foreground group) then
   * reaches only the service, which drains its requests with Redis up and stops redis last,
   * instead of killing redis at once (which the supervisor would take for a crash).
   */
  ownProcessGroup?: boolean
}

async function startPickingPort(opts: StartRedisServerOptions, launchOpts: LaunchOptions = {}): Promise<Running> {
  // A port from freePort() can be taken by someone else before redis binds
  // it; when we chose the port ourselves, just choose again.
  const attempts = opts.port === undefined ? 3 : 1
  for (let i = 1; ; i++) {
    const port = opts.port ?? (await freePort())
    try {
      return await startOnce(opts, port, launchOpts)
    } catch (err) {
      if (i >= attempts || !(err instanceof PortInUseError)) throw err
    }
  }
}

class PortInUseError extends Error {}

/** Starts one redis-server on `port`. */
async function startOnce(opts: StartRedisServerOptions, port: number, launchOpts: LaunchOptions = {}): Promise<Running> {
  const dir = path.resolve(opts.dataDir)
  await mkdir(dir, { recursive: true })
  const binary = opts.binary ?? 'redis-server'
  const binPath = await findExecutable(binary)
  if (binPath === undefined) {
    throw new Error(`cannot start redis: binary "${binary}" not found on PATH; ${INSTALL_HINT}`)
  }

  const server = await launch(binPath, redisArgs(opts, port, dir), launchOpts.ownProcessGroup ?? false)
  launchOpts.onLaunched?.(server)
  const ready = await waitUntilReady(server, port)
  if (server.gone !== undefined) throw exitError(server.gone, binary, port, server.output)
  if (!ready) {
    await terminate(server.child, server.goneP)
    throw new Error(`redis-server (port ${port}) did not answer PING within ${READY_TIMEOUT_MS} ms. Output tail:\n${server.output}`)
  }
  return { launched: server, port, dir }
}

/** Restart delays of a supervised server: initialMs, doubling up to maxMs, back to initialMs after resetAfterMs up. */
export interface RestartBackoff {
  /** Wait before the first restart after a death; default 100 ms. */
  initialMs?: number
  /** The doubling stops here; default 5 s. */
  maxMs?: number
  /** A server that stayed up at least this long is restarted after initialMs again; default 30 s. */
  resetAfterMs?: number
}

/** What a supervisor reports; `atMs` is read from its clock. */
export type RedisSupervisorEvent =
  /** The server exited while nobody had asked it to stop; `output` is the tail of what it printed. */
  | { kind: 'exited'; atMs: number; port: number; pid: number; code: number | null; signal: NodeJS.Signals | null; output: string }
  /** Restart number `attempt` since the death is due in `delayMs`. */
  | { kind: 'restarting'; atMs: number; port: number; attempt: number; delayMs: number }
  /** That restart failed (`portInUse`: another process holds the port); another follows, later. */
  | { kind: 'restart-failed'; atMs: number; port: number; attempt: number; portInUse: boolean; error: Error }
  /** A new server answers on the same port; `restarts` counts them since the supervisor started. */
  | { kind: 'restarted'; atMs: number; port: number; pid: number; attempt: number; restarts: number }

export interface SuperviseRedisServerOptions extends StartRedisServerOptions {
  backoff?: RestartBackoff
  /** Called synchronously with each event (for logs, and for tests); what it throws is ignored. */
  onEvent?: (event: RedisSupervisorEvent) => void
  /** Timestamps of the events, and how long a server stayed up; default the system clock. */
  clock?: Clock
}

export interface SupervisedRedisServerHandle extends RedisServerHandle {
  /** How many times the server was restarted after dying. */
  readonly restarts: number
}

/**
 * startRedisServer, kept running: when the redis-server exits without stop() having been
 * called, it is started again on the same port and data directory (so clients that reconnect
 * by themselves, as ioredis does, find it again, with what the AOF holds), after a backoff
 * that doubles while restarts fail or the server keeps dying soon after. A restart that fails
 * (the port taken by another process meanwhile, a damaged AOF, ...) is retried the same way,
 * without end. stop() ends the supervision first, then the server, whatever the supervisor
 * was doing: no server is left running once it resolves. The first start fails as
 * startRedisServer does: nothing is supervised until a server ran.
 */
export async function superviseRedisServer(opts: SuperviseRedisServerOptions): Promise<SupervisedRedisServerHandle> {
  return new SupervisedRedisServer(opts, await startPickingPort(opts, { ownProcessGroup: true }))
}

const BACKOFF_DEFAULTS: Required<RestartBackoff> = { initialMs: 100, maxMs: 5_000, resetAfterMs: 30_000 }
/** Enough doublings to reach any cap; keeps 2 ** attempt finite. */
const MAX_DOUBLINGS = 30

class SupervisedRedisServer implements SupervisedRedisServerHandle {
  readonly host = HOST
  readonly port: number
  readonly url: string
  readonly dir: string
  #restarts = 0
  #current: Running
  /** A server spawned by a restart and not yet ready. */
  #launching: Launched | undefined
  #upSinceMs: number
  /** Doublings of the next restart's delay. */
  #doublings = 0
  #stopRequested = false
  #stopping: Promise<void> | undefined
  /** Ends the current backoff wait early. */
  #wake: (() => void) | undefined
  readonly #loop: Promise<void>
  readonly #opts: SuperviseRedisServerOptions
  readonly #backoff: Required<RestartBackoff>
  readonly #clock: Clock

  constructor(opts: SuperviseRedisServerOptions, first: Running) {
    this.#opts = opts
    this.#backoff = { ...BACKOFF_DEFAULTS, ...opts.backoff }
    this.#clock = opts.clock ?? systemClock
    this.#current = first
    this.port = first.port
    this.url = urlOf(first.port)
    this.dir = first.dir
    this.#upSinceMs = this.#clock()
    this.#loop = this.#supervise()
  }

  get pid(): number {
    return this.#current.launched.child.pid as number
  }

  get restarts(): number {
    return this.#restarts
  }

  /** Supervision first (a pending restart is called off, a starting server stopped), then the server. */
  stop = (): Promise<void> =>
    (this.#stopping ??= (async () => {
      this.#stopRequested = true
      this.#wake?.()
      const launching = this.#launching
      const { child, goneP } = this.#current.launched
      await Promise.all([terminate(child, goneP), launching && terminate(launching.child, launching.goneP)])
      await this.#loop
    })())

  async #supervise(): Promise<void> {
    for (;;) {
      const { launched } = this.#current
      await launched.goneP
      if (this.#stopRequested) return
      const gone = launched.gone
      const how = gone instanceof Error || gone === undefined ? { code: null, signal: null } : gone
      this.#emit({ kind: 'exited', atMs: this.#clock(), port: this.port, pid: launched.child.pid as number, ...how, output: launched.output })
      if (this.#clock() - this.#upSinceMs >= this.#backoff.resetAfterMs) this.#doublings = 0
      if (!(await this.#restart())) return
    }
  }

  /** Starts a server again, with backoff, until one runs (true) or stop() was called (false). */
  async #restart(): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const delayMs = Math.min(this.#backoff.initialMs * 2 ** this.#doublings, this.#backoff.maxMs)
      this.#doublings = Math.min(this.#doublings + 1, MAX_DOUBLINGS)
      this.#emit({ kind: 'restarting', atMs: this.#clock(), port: this.port, attempt, delayMs })
      await this.#sleep(delayMs)
      if (this.#stopRequested) return false
      try {
        const onLaunched = (server: Launched): void => {
          this.#launching = server
        }
        const running = await startOnce(this.#opts, this.port, { onLaunched, ownProcessGroup: true })
        this.#launching = undefined
        if (this.#stopRequested) {
          await terminate(running.launched.child, running.launched.goneP)
          return false
        }
        this.#current = running
        this.#upSinceMs = this.#clock()
        this.#restarts++
        this.#emit({ kind: 'restarted', atMs: this.#upSinceMs, port: this.port, pid: this.pid, attempt, restarts: this.#restarts })
        return true
      } catch (err) {
        this.#launching = undefined
        if (this.#stopRequested) return false
        const error = err instanceof Error ? err : new Error(String(err))
        this.#emit({ kind: 'restart-failed', atMs: this.#clock(), port: this.port, attempt, portInUse: err instanceof PortInUseError, error })
      }
    }
  }

  /** Waits `ms`, or less if stop() is (or was already, from an onEvent) called. */
  #sleep(ms: number): Promise<void> {
    if (this.#stopRequested) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.#wake = undefined
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.#wake = done
    })
  }

  #emit(event: RedisSupervisorEvent): void {
    try {
      this.#opts.onEvent?.(event)
    } catch {
      // a failing logger must not stop the supervision
    }
  }
}

function redisArgs(opts: StartRedisServerOptions, port: number, dir: string): string[] {
  const args = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dir,
    // No RDB snapshots: durability, when wanted, comes from the AOF alone.
    '--save',
    '',
    '--protected-mode',
    'no',
    '--daemonize',
    'no',
  ]
  if (opts.appendOnly ?? true) args.push('--appendonly', 'yes', '--appendfsync', opts.fsync ?? 'always')
  args.push(...(opts.extraArgs ?? []))
  return args
}

type Gone = Error | { code: number | null; signal: NodeJS.Signals | null }

/** A spawned redis-server; `output` and `gone` are updated by the child's events. */
interface Launched {
  child: ChildProcess
  /** The tail of what redis printed, for error messages. */
  output: string
  /** Why the process is gone (a failed spawn, or how it exited); undefined while it runs. */
  gone: Gone | undefined
  /** Settles once the process is gone. */
  goneP: Promise<void>
}

async function launch(binPath: string, args: string[], ownProcessGroup: boolean): Promise<Launched> {
  // On Linux, launch through setpriv --pdeathsig (util-linux): the kernel then
  // SIGTERMs redis when this process dies without running its 'exit' handler
  // (SIGKILL, a crash, a SIGTERM nobody handles). An orphaned redis would keep
  // the port and keep appending to an AOF that a restarted gateway's new redis
  // would open too. setpriv execs redis, so child.pid is redis's pid.
  const setpriv = process.platform === 'linux' ? await findExecutable('setpriv') : undefined
  const child = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'TERM', binPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'], detached: ownProcessGroup })
    : spawn(binPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: ownProcessGroup })
  const state: Omit<Launched, 'goneP'> = { child, output: '', gone: undefined }

  // redis logs to stdout; keep only the tail, for error messages. The pipes
  // must be drained for the server's whole life or it would block on a full pipe.
  const collect = (chunk: Buffer): void => {
    state.output = (state.output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)

  // Settles once the process is gone: 'close' comes after 'exit' and after the
  // pipes are drained (so `output` is complete); 'error' is a failed spawn.
  const goneP = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      state.gone ??= err
      resolve()
    })
    child.once('close', (code, signal) => {
      state.gone ??= { code, signal }
      resolve()
    })
  })
  track(child)
  void goneP.then(() => untrack(child))
  // The same object, so that the child's events keep updating what the caller reads.
  return Object.assign(state, { goneP })
}

/** Polls until redis answers as itself, it is gone, or READY_TIMEOUT_MS pass; true when it answered. */
async function waitUntilReady(server: Launched, port: number): Promise<boolean> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  let ready = false
  while (!ready && server.gone === undefined && Date.now() < deadline) {
    ready = await isReady(port, server.child.pid)
    if (!ready) await Promise.race([server.goneP, delay(50)])
  }
  return ready
}

/**
 * The error for a redis that is gone before it was ready. "Address already in use" is a
 * PortInUseError, so that startRedisServer can pick another port when it chose this one.
 */
function exitError(gone: Gone, binary: string, port: number, output: string): Error {
  if (gone instanceof Error) {
    const code = (gone as NodeJS.ErrnoException).code
    return new Error(
      code === 'ENOENT'
        ? `cannot start redis: binary "${binary}" not found on PATH; ${INSTALL_HINT}`
        : `cannot start redis (${binary}): ${gone.message}; ${INSTALL_HINT}`,
      { cause: gone },
    )
  }
  const how = gone.signal ? `signal ${gone.signal}` : `code ${gone.code}`
  const msg = `redis-server (port ${port}) exited with ${how} before it was ready. ` + `Output tail:\n${output.trimEnd()}\n(${INSTALL_HINT})`
  return output.includes('Address already in use') ? new PortInUseError(msg) : new Error(msg)
}

/**
 * SIGTERM, not SHUTDOWN NOSAVE over a connection: on SIGTERM redis writes and
 * fsyncs the AOF before exiting, which is what durability needs. SIGKILL only
 * if it hangs (after `graceMs`). Also how the tests stop their clickhouse-server.
 */
export async function terminate(child: ChildProcess, goneP: Promise<void>, graceMs = STOP_GRACE_MS): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return goneP
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
  try {
    await goneP
  } finally {
    clearTimeout(timer)
  }
}

/**
 * One raw RESP round trip: PING, then INFO server. A server still loading its
 * AOF answers "-LOADING ...", so only "+PONG" counts; and the process_id check
 * makes sure we are not talking to some other server that already held the
 * port (ours would then be about to exit with "Address already in use").
 */
function isReady(port: number, pid: number | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: HOST, port })
    let buf = ''
    const done = (ok: boolean): void => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(1_000, () => done(false))
    sock.once('error', () => done(false))
    sock.once('close', () => done(false))
    sock.once('connect', () => sock.write('PING\r\nINFO server\r\n'))
    sock.on('data', (d) => {
      buf += d.toString('latin1')
      if (buf.includes('\r\n') && !buf.startsWith('+PONG\r\n')) return done(false)
      const m = /process_id:(\d+)\r\n/.exec(buf)
      if (m) done(Number(m[1]) === pid)
    })
  })
}

/** Absolute path of an executable, looked up on PATH as a shell would. */
async function findExecutable(name: string): Promise<string | undefined> {
  const candidates = name.includes('/')
    ? [path.resolve(name)]
    : (process.env.PATH ?? '')
        .split(path.delimiter)
        .filter(Boolean)
        .map((d) => path.join(d, name))
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// Children still running when this process exits would otherwise be orphaned
// (and keep their ports). The 'exit' handler must be synchronous, so it can
// only send signals; SIGTERM still lets redis flush its AOF on its own. It is
// registered only while at least one child is alive.
const live = new Set<ChildProcess>()

function killLive(): void {
  for (const child of live) {
    try {
      child.kill('SIGTERM')
    } catch {
      // already gone
    }
  }
}

function track(child: ChildProcess): void {
  if (live.size === 0) process.on('exit', killLive)
  live.add(child)
}

function untrack(child: ChildProcess): void {
  if (live.delete(child) && live.size === 0) process.off('exit', killLive)
}
