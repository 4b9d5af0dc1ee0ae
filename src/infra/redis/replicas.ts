// Durable on replicas before acknowledged (METERING_REDIS_WAIT_REPLICAS, src/budgets/README.md
// "Durability"): a script call's reply is handed to its caller only once a WAIT sent after the
// call, on the same connection, reports that enough replicas have it.
//
// WAIT counts the replicas that acknowledged the connection's last write (Redis keeps that
// offset per client), so one WAIT covers every call the connection sent before it: a group
// commit. One WAIT is in flight per connection; the calls sent while it is in flight wait for
// the next one, sent as soon as it returns. Under load that is one WAIT per replication round
// trip, however many calls it covers (test/integration/redis.replicas.test.ts counts them).

import type { Redis } from 'ioredis'
import { UnavailableError } from '../availability.js'
import type { RedisClient } from './connection.js'

/**
 * Fewer replicas than required acknowledged a write within the timeout (or the WAIT itself
 * failed: the connection dropped, the command timed out). The write was made on the master and
 * may still reach the replicas; it was not acknowledged, and a retry with the same idempotency
 * key answers what the first call did. An UnavailableError: the HTTP layer answers 503.
 */
export class ReplicasUnavailableError extends UnavailableError {
  constructor(
    readonly required: number,
    /** Replicas that acknowledged; undefined when the WAIT got no answer. */
    readonly acknowledged: number | undefined,
    readonly timeoutMs: number,
    options?: ErrorOptions,
  ) {
    // NOREPLICAS: the prefix Redis itself uses for "not enough good replicas".
    const got = acknowledged === undefined ? `the WAIT failed (${(options?.cause as Error | undefined)?.message ?? 'no answer'})` : `${acknowledged} did`
    super('redis', `NOREPLICAS the write was not acknowledged by ${required} replica(s) within ${timeoutMs} ms: ${got}`, options)
    this.name = 'ReplicasUnavailableError'
  }
}

/** A reply that has arrived and waits for a WAIT to cover it. */
interface Waiter {
  /** The call's place in the connection's order of sending. */
  seq: number
  /** The socket the reply came on: a WAIT on another (a reconnection) does not cover it. */
  stream: unknown
  value: unknown
  resolve(value: unknown): void
  reject(error: Error): void
}

/** The WAIT in flight: it covers the calls sent before it (seq ≤ covers). */
interface InFlight {
  covers: number
  waiters: Waiter[]
}

/** The replica requirement of one connection, and its group commit. */
export class ReplicaGate {
  /** Script calls sent on the connection so far. */
  private sent = 0
  /** Replies not covered by the WAIT in flight: they wait for the next one. */
  private pending: Waiter[] = []
  private inFlight: InFlight | undefined
  /** WAIT commands sent (for tests and metrics). */
  waits = 0

  constructor(
    private readonly redis: Redis,
    readonly replicas: number,
    readonly timeoutMs: number,
  ) {}

  /** Called right before a script call is written: its place in the order of sending. */
  sending(): number {
    return ++this.sent
  }

  /** The reply of call `seq` arrived: answers `value` once a WAIT sent after the call reports enough replicas. */
  replicated<T>(seq: number, value: T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter = { seq, stream: this.stream(), value, resolve: resolve as (v: unknown) => void, reject }
      if (this.inFlight !== undefined && seq <= this.inFlight.covers) this.inFlight.waiters.push(waiter)
      else {
        this.pending.push(waiter)
        if (this.inFlight === undefined) this.sendWait()
      }
    })
  }

  private stream(): unknown {
    return (this.redis as { stream?: unknown }).stream
  }

  private sendWait(): void {
    const flight: InFlight = { covers: this.sent, waiters: this.pending }
    this.pending = []
    this.inFlight = flight
    this.waits++
    ;(this.redis.call('WAIT', this.replicas, this.timeoutMs) as Promise<number>).then(
      (acknowledged) => this.done(flight, Number(acknowledged), undefined),
      (error: Error) => this.done(flight, undefined, error),
    )
  }

  private done(flight: InFlight, acknowledged: number | undefined, error: Error | undefined): void {
    const stream = this.stream()
    for (const waiter of flight.waiters) {
      if (acknowledged !== undefined && acknowledged >= this.replicas && waiter.stream === stream) waiter.resolve(waiter.value)
      else if (acknowledged !== undefined && waiter.stream !== stream) {
        // The reply came on a connection that is gone: this WAIT says nothing of its write.
        waiter.reject(new ReplicasUnavailableError(this.replicas, undefined, this.timeoutMs, { cause: new Error('the connection was replaced') }))
      } else waiter.reject(new ReplicasUnavailableError(this.replicas, acknowledged, this.timeoutMs, error ? { cause: error } : undefined))
    }
    this.inFlight = undefined
    if (this.pending.length > 0) this.sendWait()
  }
}

const gates = new WeakMap<RedisClient, ReplicaGate>()

/**
 * From now on, every script call on `redis` (src/infra/redis/scripts.ts) answers only once
 * `replicas` replicas have its write, or fails with ReplicasUnavailableError after `timeoutMs`
 * (WAIT's own timeout; the connection's command timeout, when shorter, cuts it first).
 * `replicas` 0 (or less) turns it off. A single server only: on a Cluster a call's node is
 * chosen per key, and a WAIT would have to follow it there.
 */
export function requireReplicas(redis: RedisClient, replicas: number, timeoutMs: number): void {
  if (!(replicas > 0)) {
    gates.delete(redis)
    return
  }
  if ((redis as { isCluster?: boolean }).isCluster) {
    throw new Error('METERING_REDIS_WAIT_REPLICAS needs a single Redis server (REDIS_URL=redis://…), not a Redis Cluster')
  }
  if (!(timeoutMs >= 1)) throw new Error(`the WAIT timeout must be at least 1 ms (0 would wait forever), got ${timeoutMs}`)
  gates.set(redis, new ReplicaGate(redis as Redis, replicas, Math.floor(timeoutMs)))
}

/** The replica requirement of `redis`, if one was set: what Script.run waits on. */
export function replicaGate(redis: RedisClient): ReplicaGate | undefined {
  return gates.get(redis)
}
