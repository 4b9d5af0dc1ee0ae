// The embedded redis-server is supervised (src/infra/redis/embedded.ts, superviseRedisServer):
// killed, it comes back on the same port and files, after a backoff that grows while it keeps
// dying, and stop() leaves nothing running whatever the supervisor was doing. Real redis-server
// processes, killed with SIGKILL; every wait polls a condition with a deadline.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  superviseRedisServer,
  type RedisSupervisorEvent,
  type SupervisedRedisServerHandle,
  type SuperviseRedisServerOptions,
} from '../../src/infra/redis/embedded.js'
import { startEmbeddedRedis } from '../../src/infra/redis/local.js'
import { manualClock } from '../../src/kernel/clock.js'
import { waitFor } from '../support/processes.js'

let tmp: string
const started: SupervisedRedisServerHandle[] = []
const clients: Redis[] = []
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'redis-supervisor-test-'))
})
afterAll(async () => {
  for (const c of clients) c.disconnect()
  await Promise.allSettled(started.map((s) => s.stop()))
  await rm(tmp, { recursive: true, force: true })
})

/** A supervised server in its own directory of tmp, its events in `events`. */
async function supervise(name: string, opts: Partial<SuperviseRedisServerOptions> = {}) {
  const events: RedisSupervisorEvent[] = []
  const server = await superviseRedisServer({ dataDir: path.join(tmp, name), onEvent: (e) => events.push(e), ...opts })
  started.push(server)
  return { server, events }
}

/** An ioredis client with the default retry strategy: it reconnects by itself. */
function client(url: string): Redis {
  const c = new Redis(url)
  c.on('error', () => {}) // connection errors while redis is down are expected
  clients.push(c)
  return c
}

/** Running = exists and is not a zombie waiting to be reaped. */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

/** A field of /proc/<pid>/stat: the parent's pid, or the process group. */
function statField(pid: number, field: 'ppid' | 'pgrp'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[field === 'ppid' ? 1 : 2])
}

/** True when nothing listens on the port (ECONNREFUSED). */
function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port })
    sock.once('connect', () => {
      sock.destroy()
      resolve(false)
    })
    sock.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'))
  })
}

/** SIGKILLs the server's current redis-server and waits until it is gone. */
async function killRedis(server: SupervisedRedisServerHandle): Promise<number> {
  const pid = server.pid
  process.kill(pid, 'SIGKILL')
  await waitFor(`redis-server ${pid} to die`, () => !isAlive(pid), 10_000)
  return pid
}

/** Kill, then wait for the restart that follows (restarts counts up by one). */
async function killAndAwaitRestart(server: SupervisedRedisServerHandle): Promise<number> {
  const restarts = server.restarts
  const pid = await killRedis(server)
  await waitFor(`restart number ${restarts + 1}`, () => server.restarts === restarts + 1, 20_000)
  return pid
}

function ofKind<K extends RedisSupervisorEvent['kind']>(events: RedisSupervisorEvent[], kind: K): Extract<RedisSupervisorEvent, { kind: K }>[] {
  return events.filter((e): e is Extract<RedisSupervisorEvent, { kind: K }> => e.kind === kind)
}

/** Polls until `untilMs` (wall clock) that the port keeps refusing connections. */
async function staysDown(port: number, untilMs: number): Promise<void> {
  while (Date.now() < untilMs) {
    expect(await refuses(port)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('startEmbeddedRedis: supervised', () => {
  it('restarts a SIGKILLed redis-server on the same port and AOF; the same client gets its keys and functions back; each step is logged', async () => {
    const lines: { level: number; msg: string; [k: string]: unknown }[] = []
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line))
        done()
      },
    })
    const dataDir = path.join(tmp, 'embedded')
    const server = await startEmbeddedRedis(dataDir, 'always', { logger: pino({ level: 'info' }, sink), backoff: { initialMs: 50 } })
    started.push(server)
    const urlFile = path.join(dataDir, 'redis', 'url')
    expect(await readFile(urlFile, 'utf8')).toBe(server.url)

    const c = client(server.url)
    expect(await c.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always'])
    await c.set('budget:acme', '12345')
    await c.hset('hold:h1', { amount: '10', state: 'open' })
    await c.function('LOAD', "#!lua name=supervisortest\nredis.register_function('hello', function() return 'hi' end)")

    const { port, url } = server
    const killed = await killAndAwaitRestart(server)
    expect(server.restarts).toBe(1)
    expect(server.pid).not.toBe(killed)
    expect(isAlive(server.pid)).toBe(true)
    expect([server.port, server.url]).toEqual([port, url])
    expect(await readFile(urlFile, 'utf8')).toBe(url)

    // The same client, never told anything: it reconnects to the same port by itself.
    expect(await waitFor('the key back through the same client', async () => (await c.get('budget:acme')) ?? undefined, 20_000)).toBe('12345')
    expect(await c.hgetall('hold:h1')).toEqual({ amount: '10', state: 'open' })
    expect(await c.fcall('hello', 0)).toBe('hi') // Functions are in the AOF too
    expect(Number(/process_id:(\d+)/.exec(await c.info('server'))![1])).toBe(server.pid)

    await waitFor('the restart to be logged', () => lines.some((l) => l.msg === 'embedded redis-server restarted'), 10_000)
    const exited = lines.find((l) => l.msg.startsWith('embedded redis-server exited'))
    expect(exited).toMatchObject({ level: 50, port, pid: killed, signal: 'SIGKILL' })
    expect(lines.find((l) => l.msg.startsWith('restarting embedded redis-server'))).toMatchObject({ level: 40, port, delayMs: 50, attempt: 1 })
    expect(lines.find((l) => l.msg === 'embedded redis-server restarted')).toMatchObject({ level: 40, port, pid: server.pid, restarts: 1 })

    await server.stop()
    expect(existsSync(urlFile)).toBe(false)
    expect(isAlive(server.pid)).toBe(false)
    expect(await refuses(port)).toBe(true)
  })
})

describe('superviseRedisServer', () => {
  it('waits longer after each death in a row: 100, 200, 400, 800 ms, then the cap', async () => {
    const { server, events } = await supervise('backoff', { appendOnly: false, backoff: { initialMs: 100, maxMs: 800, resetAfterMs: 600_000 } })
    const pids = [server.pid]
    for (let i = 0; i < 5; i++) {
      await killAndAwaitRestart(server)
      pids.push(server.pid)
    }
    expect(new Set(pids).size).toBe(6)
    expect(server.restarts).toBe(5)

    const delays = ofKind(events, 'restarting').map((e) => e.delayMs)
    expect(delays).toEqual([100, 200, 400, 800, 800])
    // From the death to the restart took at least the delay, by the events' own timestamps.
    const exits = ofKind(events, 'exited')
    const restarts = ofKind(events, 'restarted')
    const took = restarts.map((r, i) => r.atMs - exits[i]!.atMs)
    for (const [i, ms] of took.entries()) expect(ms).toBeGreaterThanOrEqual(delays[i]!)
    expect(took[3]!).toBeGreaterThan(took[0]!)
    expect(exits.map((e) => e.pid)).toEqual(pids.slice(0, 5))
    expect(restarts.map((e) => e.pid)).toEqual(pids.slice(1))
    expect(exits.every((e) => e.signal === 'SIGKILL')).toBe(true)
  })

  it('goes back to the initial delay once a server stayed up resetAfterMs (by the injected clock)', async () => {
    const clock = manualClock(Date.UTC(2025, 0, 1))
    const { server, events } = await supervise('reset', { appendOnly: false, clock, backoff: { initialMs: 50, maxMs: 5_000, resetAfterMs: 10_000 } })
    await killAndAwaitRestart(server)
    await killAndAwaitRestart(server)
    clock.advance(9_999)
    await killAndAwaitRestart(server)
    clock.advance(10_000)
    await killAndAwaitRestart(server)
    expect(ofKind(events, 'restarting').map((e) => e.delayMs)).toEqual([50, 100, 200, 50])
  })

  it('keeps retrying, with backoff, while another process holds the port, and comes back on it once it is free', async () => {
    const { server, events } = await supervise('port-taken', { backoff: { initialMs: 400, maxMs: 1_600 } })
    const c = client(server.url)
    await c.set('k', 'kept')
    const { port } = server
    await killRedis(server)
    // Its 'close' (all of its threads gone, the port free) is when the supervisor learns of the
    // death; the first restart is 400 ms later: take the port meanwhile (a listener that hangs up at once).
    await waitFor('the supervisor to see the death', () => ofKind(events, 'exited').length === 1, 10_000)
    const squatter = net.createServer((sock) => sock.destroy())
    await new Promise<void>((resolve, reject) => {
      squatter.once('error', reject)
      squatter.listen(port, '127.0.0.1', resolve)
    })
    try {
      await waitFor('two restarts refused for the port', () => ofKind(events, 'restart-failed').filter((e) => e.portInUse).length >= 2, 20_000)
    } finally {
      await new Promise((resolve) => squatter.close(resolve))
    }
    await waitFor('the restart once the port is free', () => server.restarts === 1, 20_000)
    expect(server.port).toBe(port)
    const failed = ofKind(events, 'restart-failed')
    expect(failed[0]).toMatchObject({ port, attempt: 1, portInUse: true })
    expect(failed[0]!.error.message).toMatch(/Address already in use/)
    const delays = ofKind(events, 'restarting').map((e) => e.delayMs)
    expect(delays.slice(0, 3)).toEqual([400, 800, 1_600])
    expect(ofKind(events, 'restarted')[0]!.attempt).toBe(delays.length)
    expect(await waitFor('the key back through the same client', async () => (await c.get('k')) ?? undefined, 20_000)).toBe('kept')
  })

  it('stop() during the backoff wait calls the restart off: no redis-server runs, then or when it was due', async () => {
    const { server, events } = await supervise('stop-in-backoff', { appendOnly: false, backoff: { initialMs: 3_000 } })
    const { port } = server
    const killed = await killRedis(server)
    const pending = await waitFor('the restart to be scheduled', () => ofKind(events, 'restarting')[0], 10_000)
    await server.stop()
    const due = pending.atMs + pending.delayMs
    expect(Date.now()).toBeLessThan(due) // stop() did not sit out the backoff
    expect(isAlive(killed)).toBe(false)
    expect(await refuses(port)).toBe(true)
    await staysDown(port, due + 1_000)
    expect(events.map((e) => e.kind)).toEqual(['exited', 'restarting'])
    expect(server.restarts).toBe(0)
  })

  it('stop() while a restart is starting the server leaves no redis-server running', async () => {
    // A server that takes a while to be ready (about 0.5 s here): it loads an AOF of 400k keys.
    const { server, events } = await supervise('stop-in-restart', { backoff: { initialMs: 10 } })
    const c = client(server.url)
    for (let i = 0; i < 40; i++) await c.eval(`for i = 1, 10000 do redis.call('SET', 'k:' .. ARGV[1] .. ':' .. i, i) end`, 0, String(i))
    c.disconnect()
    const { port } = server
    const known = new Set(started.map((s) => s.pid))
    await killRedis(server)
    await waitFor('a restart to begin', () => ofKind(events, 'restarting').length === 1, 10_000)
    // The child is spawned once the 10 ms wait is over; stop as soon as it is there.
    const launching = await waitFor(
      'the restart to spawn redis-server',
      () => {
        const pids = redisChildren().filter((pid) => !known.has(pid))
        return pids.length > 0 ? pids : undefined
      },
      10_000,
      { intervalMs: 1 },
    )
    await server.stop()
    for (const pid of launching) expect(isAlive(pid)).toBe(false)
    expect(await refuses(port)).toBe(true)
    expect(ofKind(events, 'restarted')).toEqual([])
  })

  it('stop() of a healthy server is not followed by a restart', async () => {
    const { server, events } = await supervise('healthy', { appendOnly: false, backoff: { initialMs: 100 } })
    const { pid, port } = server
    await server.stop()
    expect(isAlive(pid)).toBe(false)
    expect(await refuses(port)).toBe(true)
    expect(events).toEqual([])
    // Past the time a restart would have come (100 ms after the exit), still nothing.
    await staysDown(port, Date.now() + 1_000)
    expect(events).toEqual([])
    expect(server.restarts).toBe(0)
    await server.stop() // idempotent
  })

  it.runIf(process.platform === 'linux' && existsSync('/usr/bin/setpriv'))(
    'a restarted redis-server is still SIGTERMed by the kernel when the supervising process is SIGKILLed (setpriv --pdeathsig)',
    async () => {
      const { parent, output } = supervisingParent(path.join(tmp, 'pdeathsig'))
      try {
        const first = Number(await waitFor('the parent to report its redis pid', () => /PID (\d+)/.exec(output())?.[1], 20_000))
        process.kill(first, 'SIGKILL')
        const restarted = Number(await waitFor('the parent to restart redis', () => /EVENT restarted (\d+)/.exec(output())?.[1], 20_000))
        expect(restarted).not.toBe(first)
        expect(isAlive(restarted)).toBe(true)
        expect(statField(restarted, 'ppid')).toBe(parent.pid) // setpriv exec'd redis-server: the supervisor's own child
        parent.kill('SIGKILL')
        await waitFor(`the restarted redis-server ${restarted} to die with its parent`, () => !isAlive(restarted), 10_000)
      } finally {
        parent.kill('SIGKILL')
      }
    },
  )

  it("a terminal's Ctrl+C (SIGINT to the service's process group) does not reach the supervised redis-server", async () => {
    const { parent, output } = supervisingParent(path.join(tmp, 'sigint'))
    try {
      const pid = Number(await waitFor('the parent to report its redis pid', () => /PID (\d+)/.exec(output())?.[1], 20_000))
      expect(statField(pid, 'pgrp')).toBe(pid) // a process group of its own
      process.kill(-parent.pid!, 'SIGINT') // what the terminal does: the whole foreground group
      await waitFor('the parent to get the SIGINT', () => output().includes('SIGINT'), 10_000)
      // A redis-server in the group would have shut down at once, and been restarted: neither happens.
      const until = Date.now() + 1_000
      while (Date.now() < until) {
        expect(isAlive(pid)).toBe(true)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(output()).not.toMatch(/EVENT/)
    } finally {
      parent.kill('SIGKILL')
    }
  })
})

const embeddedModule = fileURLToPath(new URL('../../src/infra/redis/embedded.ts', import.meta.url))

/**
 * A Node process, in a process group of its own, that supervises a redis-server and prints its
 * pid, then each supervisor event and each SIGINT it gets (and survives).
 */
function supervisingParent(dataDir: string) {
  const script = `
    const { superviseRedisServer } = await import(${JSON.stringify(embeddedModule)});
    const onEvent = (e) => console.log('EVENT ' + e.kind + ' ' + (e.pid ?? ''));
    const h = await superviseRedisServer({ dataDir: ${JSON.stringify(dataDir)}, appendOnly: false, backoff: { initialMs: 10 }, onEvent });
    process.on('SIGINT', () => console.log('SIGINT'));
    console.log('PID ' + h.pid);
    setInterval(() => {}, 1000);
  `
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'], detached: true })
  let out = ''
  parent.stdout.on('data', (d: Buffer) => {
    out += d.toString()
  })
  return { parent, output: () => out }
}

/** The pids of this process's redis-server children (those spawned through setpriv too: it execs). */
function redisChildren(): number[] {
  const children = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('redis-server') || readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis-server')
    } catch {
      return false
    }
  })
}
