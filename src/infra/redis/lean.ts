// A lean RESP2 connection for the hot path: script calls (FCALL) of one standalone Redis, on a
// socket of their own beside the ioredis client (which keeps everything else: other commands,
// BullMQ, the offline queue while Redis is down, Cluster redirections). On a Cluster, leanCluster.ts
// keeps one per master and places each call by its keys' slot.
//
// Why: per authorize, ioredis builds a Command object, a flattened argument array and a timer
// (the command timeout), and its parser a few more objects; Node's stream, corked for the turn,
// keeps one chunk per argument and writes them with writev. Here a call is one string appended
// to the turn's output and one entry in a queue; the turn's calls leave in one write(); replies
// are parsed straight from the socket's buffers; and the timeout is one interval per connection
// that sweeps the calls in flight, not one timer per call.
//
// What it keeps of ioredis' behaviour: replies decode to the same values (bulk strings as
// strings, integers as numbers, nil as null, error replies as errors carrying Redis' message);
// a call not answered within the timeout fails with "Command timed out", and a call in flight
// when the connection drops with "Connection is closed." — both what src/infra/availability.ts
// counts as unavailable (a 503). A timed-out call stays in the queue, so the late reply is
// matched to it and dropped. Used only while ready; Script.run goes through ioredis otherwise.
//
// Several script calls in a turn's batch leave as ONE FCALL of the library's multi function
// (multi.ts), which runs them in order inside one script and answers an array the connection
// splits back: each caller gets what its own FCALL would have given (a sub-call's error fails
// that call only); a multi call that fails as a whole (timed out, connection closed, Function not
// found) fails each of its callers with that error. Off by default (METERING_REDIS_MULTI=1 turns it
// on): on 2 cores it measured slower than separate FCALLs (bench/README.md).

import { connect, type Socket } from 'node:net'
import { answerCalls, failCalls, fcallText, multiText, type TurnCall } from './multi.js'

/** Where a lean connection goes: parsed from a `redis://` URL (TLS and Cluster URLs get none). */
export interface LeanTarget {
  host: string
  port: number
  db: number
  username: string | undefined
  password: string | undefined
  /** CLIENT SETNAME of the connection. */
  name: string
  /** A call not answered within this many ms fails; undefined: never. */
  timeoutMs: number | undefined
  /**
   * A turn's script calls leave as one FCALL of the library's multi function (multi.ts) when
   * there are several; undefined: off. On with METERING_REDIS_MULTI=1 (bench/README.md: slower on 2 cores).
   */
  multi?: boolean
}

/** The target of a `redis://` URL, or undefined for anything else (`rediss://`, Cluster, unix sockets). */
export function leanTarget(url: string, name: string, timeoutMs: number | undefined): LeanTarget | undefined {
  if (!url.startsWith('redis://')) return undefined
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return undefined
  }
  const db = Number(parsed.pathname.slice(1) || 0)
  if (!parsed.hostname || !Number.isInteger(db)) return undefined
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: Number(parsed.port || 6379),
    db,
    username: parsed.username ? decodeURIComponent(parsed.username) : undefined,
    password: parsed.password ? decodeURIComponent(parsed.password) : undefined,
    name: `${name}-fcall`,
    timeoutMs: timeoutMs && timeoutMs > 0 ? timeoutMs : undefined,
    multi: process.env.METERING_REDIS_MULTI === '1',
  }
}

/** An error reply of Redis (the name ioredis gives it too). */
export class ReplyError extends Error {}
// On the prototype, as redis-errors (ioredis) has it: errors compare equal with ioredis' own.
Object.defineProperty(ReplyError.prototype, 'name', { value: 'ReplyError', configurable: true, writable: true })

/** A call in flight, answered in order. */
interface Pending {
  resolve(value: unknown): void
  reject(error: Error): void
  /** The sweep tick it was sent in. */
  tick: number
  /** Answered or given up (timed out): a late reply is dropped. */
  done: boolean
}

/** Calls written in one turn of the event loop before the output leaves at once (as Script.run's batches of ioredis calls). */
export const MAX_BATCH = 16
/** Sweeps per timeout: a call fails between timeoutMs and timeoutMs·(1 + 1/SWEEPS). */
const SWEEPS = 4

const CRLF = '\r\n'

/** One RESP command as text. */
export function encodeCommand(words: readonly (string | number)[]): string {
  let text = '*' + words.length + CRLF
  for (const word of words) {
    const value = typeof word === 'string' ? word : String(word)
    text += '$' + Buffer.byteLength(value) + CRLF + value + CRLF
  }
  return text
}

const isReplyError = (value: unknown): value is ReplyError => value instanceof ReplyError

/** The value of the last reply `parseReply` completed. */
let parsed: unknown
const INCOMPLETE = -1

/** The decimal integer in `buf[from, to)`. */
function readInteger(buf: Buffer, from: number, to: number): number {
  let at = from
  const negative = buf[at] === 45
  if (negative) at++
  let n = 0
  for (; at < to; at++) n = n * 10 + (buf[at]! - 48)
  return negative ? -n : n
}

/**
 * Parses one reply at `at`: the offset after it (the value in `parsed`), or INCOMPLETE when the
 * buffer ends first. Throws on what is not RESP2.
 */
function parseReply(buf: Buffer, at: number): number {
  const eol = buf.indexOf(13, at + 1)
  if (eol < 0 || eol + 1 >= buf.length) return INCOMPLETE
  const next = eol + 2
  switch (buf[at]) {
    case 36: {
      // $: a bulk string, or nil
      const length = readInteger(buf, at + 1, eol)
      if (length < 0) parsed = null
      else {
        if (next + length + 2 > buf.length) return INCOMPLETE
        parsed = buf.toString('utf8', next, next + length)
        return next + length + 2
      }
      return next
    }
    case 42: {
      // *: an array of replies, or nil
      const length = readInteger(buf, at + 1, eol)
      if (length < 0) {
        parsed = null
        return next
      }
      const items = new Array<unknown>(length)
      let offset = next
      for (let i = 0; i < length; i++) {
        offset = parseReply(buf, offset)
        if (offset === INCOMPLETE) return INCOMPLETE
        items[i] = parsed
      }
      parsed = items
      return offset
    }
    case 58: // :
      parsed = readInteger(buf, at + 1, eol)
      return next
    case 43: // +
      parsed = buf.toString('utf8', at + 1, eol)
      return next
    case 45: // -
      parsed = new ReplyError(buf.toString('utf8', at + 1, eol))
      return next
    default:
      throw new Error(`not a RESP2 reply: byte ${buf[at]}`)
  }
}

/**
 * One socket to one Redis server for FCALLs. `connect()` opens it (and again after it closed);
 * `ready` says whether calls may be made now.
 */
export class LeanConnection {
  ready = false
  /** write() calls made for commands (tests count them: a turn's calls leave together). */
  writes = 0
  private socket: Socket | undefined
  private connecting = false
  private queue: Pending[] = []
  private head = 0
  private out = ''
  private outCalls = 0
  /** Script calls of this turn not yet in `out`: they leave as one FCALL, of `turnMulti` when several. */
  private turn: TurnCall[] = []
  private turnMulti = ''
  private turnTick = 0
  private flushQueued = false
  private rest: Buffer | undefined
  private tick = 0
  private sweeper: NodeJS.Timeout | undefined

  constructor(readonly target: LeanTarget) {}

  /** Opens the socket (AUTH, CLIENT SETNAME, SELECT first); does nothing while open or opening. */
  connect(): void {
    if (this.socket !== undefined || this.connecting) return
    this.connecting = true
    const socket = connect({ host: this.target.host, port: this.target.port })
    this.socket = socket
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.onData(socket, chunk))
    socket.on('error', () => this.dropped(socket))
    socket.on('close', () => this.dropped(socket))
    socket.on('connect', () => this.handshake(socket))
    // From the start: a handshake that gets no answer times out too, and the socket is dropped.
    this.startSweeper()
  }

  private handshake(socket: Socket): void {
    const { username, password, name, db } = this.target
    const steps: (string | number)[][] = []
    if (password !== undefined) steps.push(username ? ['AUTH', username, password] : ['AUTH', password])
    steps.push(['CLIENT', 'SETNAME', name])
    if (db !== 0) steps.push(['SELECT', db])
    const replies = steps.map((words) => this.send(encodeCommand(words)))
    this.flush()
    Promise.all(replies).then(
      () => {
        if (this.socket !== socket) return
        this.connecting = false
        this.ready = true
      },
      () => socket.destroy(),
    )
  }

  /**
   * FCALL `fn` with `keys` and `args`: the reply, decoded as ioredis would. With `multi` (the
   * library's multi function, multi.ts), the calls of a turn that name it leave as one FCALL of
   * it when there are several (unless the target has multi off), and each gets its own reply.
   */
  fcall(fn: string, keys: readonly string[], args: readonly (string | number)[], multi?: string): Promise<unknown> {
    if (multi === undefined || this.target.multi === false) return this.send(fcallText(fn, keys, args))
    if (this.socket === undefined) return Promise.reject(new Error('Connection is closed.'))
    if (this.turn.length > 0 && this.turnMulti !== multi) this.encodeTurn()
    return new Promise((resolve, reject) => {
      if (this.turn.length === 0) {
        this.turnMulti = multi
        this.turnTick = this.tick
      }
      this.turn.push({ fn, keys, args, resolve, reject })
      this.queued()
    })
  }

  /** The turn's script calls into the output, in order: one FCALL alone, else one multi FCALL answered to each. */
  private encodeTurn(): void {
    const calls = this.turn
    this.turn = []
    if (calls.length === 1) {
      const call = calls[0]!
      this.out += fcallText(call.fn, call.keys, call.args)
      this.queue.push({ resolve: call.resolve, reject: call.reject, tick: this.turnTick, done: false })
      return
    }
    this.out += multiText(this.turnMulti, calls)
    this.queue.push({
      resolve: (reply) => answerCalls(calls, reply, isReplyError),
      reject: (error) => failCalls(calls, error),
      tick: this.turnTick,
      done: false,
    })
  }

  /** Any command (tests; the handshake). */
  command(words: readonly (string | number)[]): Promise<unknown> {
    return this.send(encodeCommand(words))
  }

  /** Queues a command's text for this turn's write; the MAX_BATCH-th of a batch sends it at once. */
  private send(text: string): Promise<unknown> {
    if (this.socket === undefined) return Promise.reject(new Error('Connection is closed.'))
    if (this.turn.length > 0) this.encodeTurn()
    return new Promise((resolve, reject) => {
      this.queue.push({ resolve, reject, tick: this.tick, done: false })
      this.out += text
      this.queued()
    })
  }

  /** A call joined this turn's batch: the MAX_BATCH-th sends it at once, else the check phase does. */
  private queued(): void {
    if (++this.outCalls >= MAX_BATCH) this.flush()
    else if (!this.flushQueued) {
      this.flushQueued = true
      setImmediate(this.flushLater)
    }
  }

  private readonly flushLater = (): void => {
    this.flushQueued = false
    this.flush()
  }

  private flush(): void {
    if (this.turn.length > 0 && this.socket !== undefined) this.encodeTurn()
    if (this.out === '' || this.socket === undefined) return
    this.writes++
    this.socket.write(this.out)
    this.out = ''
    this.outCalls = 0
  }

  private onData(socket: Socket, chunk: Buffer): void {
    if (this.socket !== socket) return
    const buf = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk])
    let at = 0
    try {
      while (at < buf.length) {
        const next = parseReply(buf, at)
        if (next === INCOMPLETE) break
        at = next
        this.answer(parsed)
      }
    } catch (error) {
      // Out of step with the server: nothing after this can be matched to its call.
      socket.destroy(error as Error)
      return
    }
    this.rest = at < buf.length ? buf.subarray(at) : undefined
  }

  /** The reply of the oldest call in flight. */
  private answer(value: unknown): void {
    const pending = this.queue[this.head]
    if (pending === undefined) return
    this.queue[this.head++] = undefined as unknown as Pending
    if (this.head === this.queue.length) {
      this.queue.length = 0
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
    if (pending.done) return
    pending.done = true
    if (value instanceof ReplyError) pending.reject(value)
    else pending.resolve(value)
  }

  /** The socket closed or failed: every call in flight fails ("Connection is closed.", a 503). */
  private dropped(socket: Socket): void {
    if (this.socket !== socket) return
    this.socket = undefined
    this.connecting = false
    this.ready = false
    this.rest = undefined
    this.out = ''
    this.outCalls = 0
    const turn = this.turn
    this.turn = []
    if (this.sweeper !== undefined) clearInterval(this.sweeper)
    this.sweeper = undefined
    const queue = this.queue
    const head = this.head
    this.queue = []
    this.head = 0
    for (let i = head; i < queue.length; i++) {
      const pending = queue[i]!
      if (pending.done) continue
      pending.done = true
      pending.reject(new Error('Connection is closed.'))
    }
    failCalls(turn, new Error('Connection is closed.'))
    socket.destroy()
  }

  /**
   * One interval for every call: each sweep fails the calls sent SWEEPS+1 or more sweeps ago
   * ("Command timed out"). Calls are answered in order, so the oldest are at the head.
   */
  private startSweeper(): void {
    const timeoutMs = this.target.timeoutMs
    if (timeoutMs === undefined) return
    this.sweeper = setInterval(() => this.sweep(), Math.max(1, Math.floor(timeoutMs / SWEEPS)))
    this.sweeper.unref()
  }

  private sweep(): void {
    const tick = ++this.tick
    for (let i = this.head; i < this.queue.length; i++) {
      const pending = this.queue[i]!
      if (tick - pending.tick <= SWEEPS) break
      if (pending.done) continue
      pending.done = true
      pending.reject(new Error('Command timed out'))
    }
  }

  /** Closes the socket; calls in flight fail. `connect()` may open it again. */
  close(): void {
    if (this.socket !== undefined) this.dropped(this.socket)
  }
}

/** The lean connection of each ioredis client that may have one (connectRedis to a `redis://` URL). */
const leans = new WeakMap<object, { lean: LeanConnection; ready(): boolean; lastAttemptMs: number }>()
/** A closed lean connection is opened again at most this often, and only while its ioredis client is ready. */
const RECONNECT_MS = 1_000

/**
 * Gives `client` a lean connection to `target` for its script calls, opened on first use and
 * closed when the client ends (quit, disconnect). `ready` is the client's own readiness: the
 * lean connection (re)opens only while the client is connected, so it follows the client's
 * reconnects instead of retrying on its own.
 */
export function attachLean(client: { on(event: 'end', listener: () => void): unknown }, target: LeanTarget, ready: () => boolean): void {
  const lean = new LeanConnection(target)
  leans.set(client, { lean, ready, lastAttemptMs: Number.NEGATIVE_INFINITY })
  client.on('end', () => lean.close())
}

/** The lean connection of `client` when it is ready for calls; else undefined (and it is opened when it may be). */
export function leanFor(client: object): LeanConnection | undefined {
  const entry = leans.get(client)
  if (entry === undefined) return undefined
  if (entry.lean.ready) return entry.lean
  const now = Date.now()
  if (now - entry.lastAttemptMs >= RECONNECT_MS && entry.ready()) {
    entry.lastAttemptMs = now
    entry.lean.connect()
  }
  return undefined
}
