import { createHash } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Cluster, Redis } from 'ioredis'
import type { RedisClient } from './connection.js'
import { leanFor, MAX_BATCH } from './lean.js'
import { leanClusterFcall } from './leanCluster.js'
import { MULTI_LUA, multiFunction } from './multi.js'
import { replicaGate } from './replicas.js'
import { masters } from './scan.js'

export type { RedisClient }

const LUA_DIR = fileURLToPath(new URL('../../../lua/', import.meta.url))
const INCLUDE = /^--@include (\w+)\s*$/gm

/**
 * Every script in lua/ as one Redis Function library (Redis 7 FUNCTION LOAD / FCALL).
 *
 * A script file is written as an EVAL script (`KEYS`, `ARGV`, a top-level `return`, `--@include`
 * lines); the library wraps each in a function and defines each include once, at load (an
 * include's own `--@include` lines put what it uses before it). That
 * matters on the hot path: an EVAL script re-creates every helper function on every call
 * (~2 µs of a ~22 µs authorize), a library function finds them already defined.
 * The library and function names carry a hash of the library's text, so two releases sharing
 * one Redis never call each other's code. One more function, `metering_multi_<version>`
 * (multi.ts), runs several of the others in one call: the lean connection's batch of a turn.
 * Every function is registered without flags (so each may write); the multi one too.
 */
function buildLibrary(): { text: string; version: string; names: Map<string, string>; multi: string } {
  const files = readdirSync(LUA_DIR)
    .filter((f) => f.endsWith('.lua'))
    .sort()
  // Includes in dependency order: an include may itself `--@include` others, defined before it.
  const includes: string[] = []
  const addInclude = (include: string, from: string[]) => {
    if (includes.includes(include)) return
    if (from.includes(include)) throw new Error(`lua include cycle: ${[...from, include].join(' → ')}`)
    const source = readFileSync(`${LUA_DIR}includes/${include}.lua`, 'utf8')
    for (const [, dep] of source.matchAll(INCLUDE)) addInclude(dep!, [...from, include])
    includes.push(include)
  }
  const bodies = files.map((file) => {
    const source = readFileSync(`${LUA_DIR}${file}`, 'utf8')
    for (const [, include] of source.matchAll(INCLUDE)) addInclude(include!, [])
    return { name: file.slice(0, -4), body: source.replace(INCLUDE, '') }
  })
  const shared = includes.map((include) => readFileSync(`${LUA_DIR}includes/${include}.lua`, 'utf8').replace(INCLUDE, '')).join('\n')
  const functions = bodies.map(({ body }, i) => `local function script${i}(KEYS, ARGV)\n${body}\nend\n`).join('\n')
  const version = createHash('sha1')
    .update(shared + functions + MULTI_LUA)
    .digest('hex')
    .slice(0, 12)
  const names = new Map(bodies.map(({ name }) => [name, `${name.replace(/-/g, '_')}_${version}`]))
  const multi = multiFunction(
    version,
    bodies.map(({ name }, i) => ({ name: names.get(name)!, local: `script${i}` })),
  )
  const registrations = bodies
    .map(({ name }, i) => `redis.register_function('${names.get(name)}', script${i})`)
    .concat(`redis.register_function('${multi.name}', multi)`)
    .join('\n')
  return {
    text: `#!lua name=metering_${version}\n${shared}\n${functions}\n${multi.lua}\n${registrations}\n`,
    version,
    names,
    multi: multi.name,
  }
}

const library = buildLibrary()

/** The library's multi function (multi.ts): a turn's calls in one FCALL. */
export const MULTI_FUNCTION = library.multi

/** Loads the library into Redis (every master of a Cluster). Loading it again is harmless. */
export async function loadLibrary(redis: RedisClient): Promise<void> {
  await knowsMasters(redis)
  const nodes = masters(redis)
  await Promise.all(nodes.map((node) => node.call('FUNCTION', 'LOAD', 'REPLACE', library.text)))
}

/**
 * A Cluster client knows its masters only once ready (its first slots refresh): before that
 * `masters()` is empty, and a load at start-up would load nowhere. Rejects if the client ends first.
 */
async function knowsMasters(redis: RedisClient): Promise<void> {
  const cluster = redis as Cluster
  if (!cluster.isCluster || cluster.status === 'ready') return
  await new Promise<void>((resolve, reject) => {
    const onReady = (): void => {
      cluster.off('end', onEnd)
      resolve()
    }
    const onEnd = (): void => {
      cluster.off('ready', onReady)
      reject(new Error('Connection is closed.'))
    }
    cluster.once('ready', onReady)
    cluster.once('end', onEnd)
  })
}

/** Whether every master answers and has this build's library (readiness: /readyz). */
export async function libraryLoaded(redis: RedisClient): Promise<boolean> {
  const name = `metering_${library.version}`
  const found = await Promise.all(masters(redis).map((node) => node.call('FUNCTION', 'LIST', 'LIBRARYNAME', name) as Promise<unknown[]>))
  return found.length > 0 && found.every((libraries) => libraries.length > 0)
}

/**
 * Script calls made in one turn of the event loop go to Redis together, up to MAX_BATCH per
 * write. uWS hands the gateway every request that arrived in one poll of the loop, one callback
 * each, and each used to write its FCALL at once: a syscall per request (and a read on the Redis
 * side). The first call of a batch corks the connection's socket; the MAX_BATCH-th call, or
 * `setImmediate` (the check phase, right after that poll) uncorks it, and Node writes what piled
 * up with one writev. The cap lets Redis start on a batch while the gateway is still reading
 * the next requests, and keeps the first replies of a batch from waiting for a long one.
 * Commands keep their order, so replies still match. A Cluster client routes per node: left as it is.
 */
interface Batch {
  calls: number
}
const batches = new WeakMap<object, Batch>()
type Corkable = { cork(): void; uncork(): void }

/** Adds a call to its connection's batch; returns the socket when this call fills the batch. */
function joinBatch(redis: RedisClient): Corkable | undefined {
  const stream = (redis as { stream?: Corkable }).stream
  // Only a connected client writes to its socket (ioredis queues the rest itself).
  if (stream === undefined || (redis as Redis).status !== 'ready') return undefined
  let batch = batches.get(stream)
  if (batch === undefined) {
    const opened: Batch = { calls: 0 }
    batch = opened
    batches.set(stream, batch)
    stream.cork()
    setImmediate(() => endBatch(stream, opened))
  }
  return ++batch.calls >= MAX_BATCH ? stream : undefined
}

function endBatch(stream: Corkable, batch: Batch | undefined): void {
  if (batch === undefined || batches.get(stream) !== batch) return
  batches.delete(stream)
  stream.uncork()
}

/** One load at a time per client, however many calls find the library missing at once. */
const loading = new WeakMap<RedisClient, Promise<void>>()

/**
 * A script of lua/, named `verbNoun-<number of KEYS>` (or `verbNoun-N` for a script that takes
 * as many keys as it is given), called with FCALL: one round trip.
 * A node that does not have the library yet (a new or flushed node) gets it, and the call is
 * made once more.
 */
/** Every Script made so far, one per lua/ file a loaded module calls: what /metrics reports on. */
const made: Script[] = []

/** The scripts the loaded modules call (each domain makes its own at load). */
export function scriptsInUse(): readonly Script[] {
  return made
}

/** Told of every script call once it ends (answered or failed), with its round trip in milliseconds. */
export type ScriptObserver = (script: Script, ms: number) => void

/**
 * The observers of script calls: a gateway's metrics (src/http/metrics.ts) add one and remove it
 * when they close. Scripts are shared by everything in the process, so each observer sees every
 * call. Without one, a call costs what it did before observers existed: one length check.
 */
const observers: ScriptObserver[] = []

/** Adds an observer of every script call; the answer removes it again. */
export function observeScripts(observer: ScriptObserver): () => void {
  observers.push(observer)
  return () => {
    const at = observers.indexOf(observer)
    if (at >= 0) observers.splice(at, 1)
  }
}

export class Script {
  /** undefined: any number (a `-N` script). */
  readonly numberOfKeys: number | undefined
  /** The library function it calls (FCALL). */
  readonly functionName: string
  /** Milliseconds per call, summed, for /metrics. */
  calls = 0
  totalMs = 0

  constructor(readonly name: string) {
    const keys = /-(\d+|N)$/.exec(name)
    const functionName = library.names.get(name)
    if (!keys || !functionName) throw new Error(`no script lua/${name}.lua (named verbNoun-<number of KEYS>)`)
    this.numberOfKeys = keys[1] === 'N' ? undefined : Number(keys[1])
    this.functionName = functionName
    made.push(this)
  }

  async run(redis: RedisClient, keys: string[], args: (string | number)[]): Promise<unknown[]> {
    if (this.numberOfKeys !== undefined && keys.length !== this.numberOfKeys)
      throw new Error(`${this.name} takes ${this.numberOfKeys} keys, got ${keys.length}`)
    const started = performance.now()
    try {
      return await this.call(redis, keys, args)
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('Function not found')) throw error
      let load = loading.get(redis)
      if (!load) {
        load = loadLibrary(redis).finally(() => loading.delete(redis))
        loading.set(redis, load)
      }
      await load
      return await this.call(redis, keys, args)
    } finally {
      const ms = performance.now() - started
      this.calls++
      this.totalMs += ms
      if (observers.length > 0) for (const observe of observers) observe(this, ms)
    }
  }

  /**
   * One FCALL: on the client's lean connection (src/infra/redis/lean.ts) when it has a ready one
   * (where a turn's calls leave as one FCALL of the multi function, multi.ts), else through
   * ioredis, batched per turn (and with `viaIoredis`, always: a lean call redirected on a Cluster). A replica gate's WAIT covers the writes of its own
   * connection, ioredis', so gated calls always go there.
   */
  private call(redis: RedisClient, keys: string[], args: (string | number)[], viaIoredis = false): Promise<unknown[]> {
    // Set by METERING_REDIS_WAIT_REPLICAS: the reply waits for a WAIT that covers it (replicas.ts).
    const gate = replicaGate(redis)
    if (gate === undefined && !viaIoredis) {
      const lean = leanFor(redis)
      if (lean !== undefined) return lean.fcall(this.functionName, keys, args, library.multi) as Promise<unknown[]>
      // On a Cluster: the lean connection of the master of the keys' slot (leanCluster.ts); a
      // redirection is sent again through ioredis.
      const placed = leanClusterFcall(redis, this.functionName, keys, args, () => this.call(redis, keys, args, true))
      if (placed !== undefined) return placed as Promise<unknown[]>
    }
    const full = joinBatch(redis)
    const seq = gate?.sending()
    // ioredis writes a command to a ready connection at once, so a full batch leaves with it.
    const reply = redis.call('FCALL', this.functionName, keys.length, ...keys, ...args) as Promise<unknown[]>
    if (full) endBatch(full, batches.get(full))
    return seq === undefined ? reply : reply.then((value) => gate!.replicated(seq, value))
  }
}
