// Child-process helpers for the benchmarks: start a TypeScript server in its
// own process (so its CPU can be read from /proc without the load generator
// mixed in), wait until it is ready, and read its CPU time.

import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'

export const HOST = '127.0.0.1'

export { freePort } from '../../src/infra/redis/embedded.js'

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export interface Child {
  name: string
  pid: number
  proc: ChildProcess
  /** Last lines of stdout+stderr, for error messages. */
  tail(): string
  /** Resolves (never rejects) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  stop(): Promise<void>
}

const TAIL_CHARS = 4000
const live = new Set<Child>()

/**
 * Spawns `node --import tsx <file>` with the given env. Same Node binary as
 * the bench itself (process.execPath), so every leg runs on the same runtime.
 * `--import tsx` keeps the server in ONE process (tsx's CLI would add a
 * wrapper process, and we want the pid we measure to be the server itself).
 */
export function spawnTs(name: string, file: string, env: Record<string, string>): Child {
  // PROFILE=gateway,worker: those children write V8 CPU profiles (node --cpu-prof) to
  // PROFILE_DIR (default bench/results/profiles) when they exit.
  const profiled = (process.env.PROFILE ?? '')
    .split(',')
    .map((s) => s.trim())
    .includes(name)
  const prof = profiled ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE_DIR ?? 'bench/results/profiles'}/${name}`] : []
  const proc = spawn(process.execPath, [...prof, '--import', 'tsx', file], {
    cwd: process.cwd(),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  // The pipes must be drained for the child's whole life: a server that logs
  // a lot would otherwise block on a full pipe and look slow.
  const collect = (chunk: Buffer): void => {
    out = (out + chunk.toString('utf8')).slice(-TAIL_CHARS)
  }
  proc.stdout?.on('data', collect)
  proc.stderr?.on('data', collect)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('error', () => resolve({ code: -1, signal: null }))
    proc.once('close', (code, signal) => resolve({ code, signal }))
  })
  let stopping: Promise<void> | undefined
  const child: Child = {
    name,
    pid: proc.pid ?? -1,
    proc,
    tail: () => out.trimEnd(),
    exited,
    stop: () =>
      (stopping ??= (async () => {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGTERM')
          const t = setTimeout(() => proc.kill('SIGKILL'), 3000)
          await exited
          clearTimeout(t)
        }
        live.delete(child)
      })()),
  }
  live.add(child)
  return child
}

/** Kills (by pid, via our own handles) every child this module started. */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((c) => c.stop()))
}
// Last resort if the bench dies: 'exit' handlers must be synchronous, so only signal.
process.on('exit', () => {
  for (const c of live) {
    try {
      c.proc.kill('SIGTERM')
    } catch {
      /* already gone */
    }
  }
})

/** Resolves when the child prints `marker` on stdout; rejects if it exits or times out. */
export function waitForLine(child: Child, marker: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString('utf8')
      if (seen.includes(marker)) finish()
    }
    const timer = setTimeout(() => finish(new Error(`${child.name}: no "${marker}" within ${timeoutMs} ms\n${child.tail()}`)), timeoutMs)
    const finish = (err?: Error): void => {
      clearTimeout(timer)
      child.proc.stdout?.off('data', onData)
      if (err) reject(err)
      else resolve()
    }
    child.proc.stdout?.on('data', onData)
    void child.exited.then(({ code, signal }) => finish(new Error(`${child.name} exited (code ${code}, signal ${signal}) before ready\n${child.tail()}`)))
  })
}

/** Polls `GET url` until it answers 200; rejects if the child exits or on timeout. */
export async function waitForHttp200(child: Child, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let gone = false
  void child.exited.then(() => (gone = true))
  let last = ''
  while (Date.now() < deadline) {
    if (gone) throw new Error(`${child.name} exited before ready\n${child.tail()}`)
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
      if (res.status === 200) return
      last = `HTTP ${res.status}`
    } catch (err) {
      last = (err as Error).message
    }
    await delay(100)
  }
  throw new Error(`${child.name}: ${url} not 200 within ${timeoutMs} ms (last: ${last})\n${child.tail()}`)
}

// ---------------------------------------------------------------------------
// CPU accounting

let clkTck: number | undefined
/** Kernel clock ticks per second (USER_HZ), the unit of utime/stime in /proc. */
export function clockTicks(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      clkTck = 100
    }
  }
  return clkTck
}

/**
 * CPU time (user + system) of a whole process, in microseconds.
 *
 * /proc/<pid>/stat's utime/stime already sum ALL threads of the process,
 * including threads that have exited (libuv's pool, V8's GC helpers, Node's
 * loader thread), which the per-task files would miss. The catch is the
 * resolution: one clock tick (10 ms at CLK_TCK=100), so a 10 s leg at ~100%
 * CPU is measured to about ±0.1%, good enough. (/proc/<pid>/schedstat has ns
 * resolution but is per-thread, and is all zeros on kernels without
 * schedstats, as on this machine.)
 */
export function procCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Field 2 (comm) is in parentheses and may contain spaces: split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // rest[0] is field 3 (state); utime is field 14, stime field 15.
  const utime = Number(rest[11])
  const stime = Number(rest[12])
  return ((utime + stime) * 1e6) / clockTicks()
}

/**
 * Busy CPU time of the whole machine (all cores), in microseconds: every
 * /proc/stat column except idle and iowait. Compared with what our own
 * processes used over the same window, it tells how much CPU something else
 * took (on a shared 2-core machine that is the main source of noise).
 */
export function systemBusyUs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? ''
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const v = line.trim().split(/\s+/).slice(1).map(Number)
  // guest time is already included in user (and guest_nice in nice).
  const busy = (v[0] ?? 0) + (v[1] ?? 0) + (v[2] ?? 0) + (v[5] ?? 0) + (v[6] ?? 0) + (v[7] ?? 0)
  return (busy * 1e6) / clockTicks()
}
