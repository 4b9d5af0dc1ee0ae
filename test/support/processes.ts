// Real child processes of the service for the fault tests: `node --import tsx <script>` with an
// environment of the test's own, SIGKILLed and restarted at will. Readiness and every other wait
// poll a condition with a deadline (waitFor); nothing sleeps to let time pass.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const OUTPUT_TAIL_CHARS = 8_000
const SETPRIV = process.platform === 'linux' && existsSync('/usr/bin/setpriv') ? '/usr/bin/setpriv' : undefined

export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface NodeProcess {
  name: string
  pid: number
  /** Resolves when the process has exited (never rejects). */
  exited: Promise<Exit>
  /** Undefined while it runs. */
  exit(): Exit | undefined
  /** The last few KiB of stdout and stderr. */
  output(): string
  /** Sends the signal (default SIGKILL) and resolves once the process is gone. */
  kill(signal?: NodeJS.Signals): Promise<Exit>
}

/** Starts `node --import tsx <script> ...argv` (script relative to the repository) with env added to the test's. */
export function spawnNode(name: string, script: string, env: Record<string, string>, argv: readonly string[] = []): NodeProcess {
  const args = ['--import', 'tsx', path.join(REPO_ROOT, script), ...argv]
  const options = { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] }
  // setpriv execs node (same pid) and has the kernel kill it if this test process dies first.
  const child: ChildProcess = SETPRIV ? spawn(SETPRIV, ['--pdeathsig', 'KILL', process.execPath, ...args], options) : spawn(process.execPath, args, options)
  let tail = ''
  const collect = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  let exit: Exit | undefined
  const exited = new Promise<Exit>((resolve) => {
    child.once('error', (err) => {
      collect(Buffer.from(`\n[spawn error] ${err.message}\n`))
      exit ??= { code: null, signal: null }
      resolve(exit)
    })
    child.once('exit', (code, signal) => {
      exit ??= { code, signal }
      resolve(exit)
    })
  })
  const onExit = (): void => {
    child.kill('SIGKILL')
  }
  process.on('exit', onExit)
  void exited.then(() => process.off('exit', onExit))
  return {
    name,
    pid: child.pid ?? -1,
    exited,
    exit: () => exit,
    output: () => tail,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (exit === undefined) child.kill(signal)
      return exited
    },
  }
}

/**
 * Polls `check` until it returns a value other than undefined/false, or throws at the deadline
 * with `what` (and `detail()` when given). `check` may throw: the error is kept for the message.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  options: { intervalMs?: number; detail?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  const interval = options.intervalMs ?? 25
  let lastError: unknown
  for (;;) {
    try {
      const value = await check()
      if (value !== undefined && value !== false) return value as T
    } catch (err) {
      lastError = err
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : ''
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}${options.detail ? `\n${options.detail()}` : ''}`)
    }
    await new Promise((resolve) => setTimeout(resolve, interval))
  }
}

/** Waits until the process prints `line` (e.g. a pino msg), failing early if it exits. */
export async function waitForOutput(proc: NodeProcess, line: string | RegExp, timeoutMs: number): Promise<void> {
  const found = () => (typeof line === 'string' ? proc.output().includes(line) : line.test(proc.output()))
  await waitFor(
    `${proc.name} (pid ${proc.pid}) to print ${String(line)}`,
    () => {
      if (found()) return true
      const exit = proc.exit()
      if (exit) throw new Error(`${proc.name} exited (${exit.code ?? exit.signal}) before printing ${String(line)}:\n${proc.output()}`)
      return false
    },
    timeoutMs,
    { detail: () => proc.output() },
  )
}

/** Waits until GET url answers 200, failing early if the process exits. */
export async function waitForHttp(proc: NodeProcess, url: string, timeoutMs: number): Promise<void> {
  let exitedEarly: Error | undefined
  await waitFor(
    `${proc.name} (pid ${proc.pid}) to answer ${url}`,
    async () => {
      const exit = proc.exit()
      if (exit) {
        exitedEarly = new Error(`${proc.name} exited (${exit.code ?? exit.signal}) before answering ${url}:\n${proc.output()}`)
        return true
      }
      const res = await fetch(url, { signal: AbortSignal.timeout(1_000) })
      await res.text()
      return res.status === 200
    },
    timeoutMs,
    { detail: () => proc.output() },
  )
  if (exitedEarly) throw exitedEarly
}

/**
 * SIGSTOP, then wait until every thread of the process is stopped (state T in
 * /proc/<pid>/task/<tid>/stat): kill() only queues the signal, and a fault test must not send
 * its next request while a thread of the target can still answer it.
 */
export async function stopProcess(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP')
  await waitFor(
    `every thread of ${pid} stopped`,
    () => {
      const tids = readdirSync(`/proc/${pid}/task`)
      return tids.every((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T'
      })
    },
    10_000,
    { intervalMs: 5 },
  )
}
