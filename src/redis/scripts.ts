import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Cluster, Redis } from 'ioredis'

export type RedisClient = Redis | Cluster

const LUA_DIR = fileURLToPath(new URL('../../lua/', import.meta.url))
const INCLUDE = /^--@include (\w+)\s*$/gm
/** Part of every script's text, so two releases sharing one Redis never run each other's scripts. */
const RELEASE = '-- metering-gateway scripts v1\n'

/**
 * A Lua script from lua/, named `verbNoun-<number of KEYS>`, with its includes merged in.
 * Runs with EVALSHA (one round trip) and falls back to EVAL once when the server has not
 * cached it yet (after a restart or on a new Cluster node).
 */
export class Script {
  readonly lua: string
  readonly sha: string
  readonly numberOfKeys: number
  /** Milliseconds per call, summed, for /metrics. */
  calls = 0
  totalMs = 0

  constructor(readonly name: string) {
    const keys = /-(\d+)$/.exec(name)
    if (!keys) throw new Error(`script name ${name} must end with -<number of KEYS>`)
    this.numberOfKeys = Number(keys[1])
    const source = readFileSync(`${LUA_DIR}${name}.lua`, 'utf8')
    this.lua = RELEASE + source.replace(INCLUDE, (_, include: string) => readFileSync(`${LUA_DIR}includes/${include}.lua`, 'utf8'))
    this.sha = createHash('sha1').update(this.lua).digest('hex')
  }

  async run(redis: RedisClient, keys: string[], args: (string | number)[]): Promise<unknown[]> {
    if (keys.length !== this.numberOfKeys) throw new Error(`${this.name} takes ${this.numberOfKeys} keys, got ${keys.length}`)
    const started = performance.now()
    try {
      return (await redis.evalsha(this.sha, this.numberOfKeys, ...keys, ...args)) as unknown[]
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error
      return (await redis.eval(this.lua, this.numberOfKeys, ...keys, ...args)) as unknown[]
    } finally {
      this.calls++
      this.totalMs += performance.now() - started
    }
  }
}
