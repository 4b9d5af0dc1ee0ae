// startRedisServer against the real redis-server binary: no mocks.

import { spawn } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Redis } from 'ioredis'
import { freePort, startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'

let tmp: string
const started: RedisServerHandle[] = []
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'embedded-test-'))
})
afterAll(async () => {
  await Promise.allSettled(started.map((s) => s.stop()))
  await rm(tmp, { recursive: true, force: true })
})

async function start(opts: Parameters<typeof startRedisServer>[0]): Promise<RedisServerHandle> {
  const s = await startRedisServer(opts)
  started.push(s)
  return s
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

async function waitUntilDead(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false
    await new Promise((r) => setTimeout(r, 50))
  }
  return true
}

const embeddedModule = fileURLToPath(new URL('../../src/infra/redis/embedded.ts', import.meta.url))

/**
 * Runs a separate Node process that starts a redis-server, reports its pid,
 * then ends as `ending` says. Returns the redis pid and the parent's exit.
 */
async function redisInDyingParent(dataDir: string, ending: 'process.exit' | 'SIGKILL'): Promise<{ redisPid: number }> {
  const script = `
    const { startRedisServer } = await import(${JSON.stringify(embeddedModule)});
    const h = await startRedisServer({ dataDir: ${JSON.stringify(dataDir)}, appendOnly: false });
    console.log('PID ' + h.pid);
    ${ending === 'process.exit' ? 'process.exit(0);' : 'setInterval(() => {}, 1000);'}
  `
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const redisPid = await new Promise<number>((resolve, reject) => {
    let out = ''
    parent.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /PID (\d+)/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    parent.once('exit', (code) => reject(new Error(`parent exited (${code}) before reporting; output: ${out}`)))
  })
  if (ending === 'SIGKILL') parent.kill('SIGKILL')
  await new Promise((r) => (parent.exitCode !== null || parent.signalCode !== null ? r(null) : parent.once('exit', r)))
  return { redisPid }
}

describe('freePort', () => {
  it('returns a usable TCP port', async () => {
    const port = await freePort()
    expect(port).toBeGreaterThan(0)
    expect(port).toBeLessThan(65536)
  })
})

describe('startRedisServer', () => {
  it('keeps data in the AOF across stop() and a restart on the same dataDir', async () => {
    const dataDir = path.join(tmp, 'aof')
    const first = await start({ dataDir })
    expect(first.url).toBe(`redis://127.0.0.1:${first.port}`)
    expect(first.dir).toBe(dataDir)

    const c1 = new Redis(first.url)
    expect(await c1.config('GET', 'appendonly')).toEqual(['appendonly', 'yes'])
    // A reply only after the fsync of its write, unless told everysec (src/budgets/README.md, "Durability").
    expect(await c1.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always'])
    expect(await c1.config('GET', 'save')).toEqual(['save', ''])
    await c1.set('budget:acme', '12345')
    await c1.hset('hold:h1', { amount: '10', state: 'open' })
    await c1.quit()

    await first.stop()
    expect(isAlive(first.pid)).toBe(false)
    await first.stop() // idempotent

    // Redis 7 keeps a multi-part AOF in appendonlydir/ with a manifest.
    const aofDir = path.join(dataDir, 'appendonlydir')
    expect(existsSync(aofDir)).toBe(true)
    const files = readdirSync(aofDir)
    expect(files.some((f) => f.endsWith('.manifest'))).toBe(true)
    expect(files.some((f) => f.endsWith('.incr.aof'))).toBe(true)
    // No RDB snapshot was written: durability came from the AOF alone.
    expect(existsSync(path.join(dataDir, 'dump.rdb'))).toBe(false)

    const second = await start({ dataDir })
    const c2 = new Redis(second.url)
    expect(await c2.get('budget:acme')).toBe('12345')
    expect(await c2.hgetall('hold:h1')).toEqual({ amount: '10', state: 'open' })
    await c2.quit()
    await second.stop()
  })

  it('fsyncs every second when told everysec', async () => {
    const s = await start({ dataDir: path.join(tmp, 'everysec'), fsync: 'everysec' })
    const c = new Redis(s.url)
    expect(await c.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec'])
    await c.quit()
    await s.stop()
  })

  it('with appendOnly false writes no AOF', async () => {
    const dataDir = path.join(tmp, 'noaof')
    const s = await start({ dataDir, appendOnly: false })
    const c = new Redis(s.url)
    await c.set('k', 'v')
    await c.quit()
    await s.stop()
    expect(existsSync(path.join(dataDir, 'appendonlydir'))).toBe(false)
  })

  it('uses a requested port', async () => {
    const port = await freePort()
    const s = await start({ dataDir: path.join(tmp, 'fixed'), port, appendOnly: false })
    expect(s.port).toBe(port)
    await s.stop()
  })

  it('rejects with the output tail when redis-server exits before it is ready', async () => {
    await expect(startRedisServer({ dataDir: path.join(tmp, 'bad'), extraArgs: ['--no-such-directive', 'x'] })).rejects.toThrow(
      /exited with code 1 before it was ready[\s\S]*no-such-directive[\s\S]*apt-get install redis-server/,
    )
  })

  it('rejects when the requested port is taken, without mistaking the other server for its own', async () => {
    const other = await start({ dataDir: path.join(tmp, 'other'), appendOnly: false })
    await expect(startRedisServer({ dataDir: path.join(tmp, 'clash'), port: other.port, appendOnly: false })).rejects.toThrow(/Address already in use/)
    await other.stop()
  })

  it('stops redis when the parent process exits normally', async () => {
    const { redisPid } = await redisInDyingParent(path.join(tmp, 'parent-exit'), 'process.exit')
    expect(await waitUntilDead(redisPid)).toBe(true)
  })

  it.runIf(process.platform === 'linux')('stops redis when the parent process is SIGKILLed', async () => {
    const { redisPid } = await redisInDyingParent(path.join(tmp, 'parent-kill'), 'SIGKILL')
    expect(await waitUntilDead(redisPid)).toBe(true)
  })

  it('rejects clearly when the binary is missing', async () => {
    await expect(startRedisServer({ dataDir: path.join(tmp, 'missing'), binary: 'redis-server-that-does-not-exist' })).rejects.toThrow(
      /not found on PATH.*apt-get install redis-server/,
    )
  })
})
