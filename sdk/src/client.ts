// The client: one typed method per operation of the API (generated.ts), and the helpers an agent
// wants on top of them: hold(key, amount, work) and record(events) with flush() and close().
import { ApiMethods, type OperationId, type UsageEvent } from './generated.js'
import { type HoldContext, type HoldOptions, type HoldResult, type WorkResult, runHold } from './hold.js'
import { type BatchOptions, type RecordResult, Recorder } from './recorder.js'
import { type CallOptions, DEFAULT_RETRY, type OperationInput, type RetryOptions, Transport, sleep } from './transport.js'

export const CLIENT_VERSION = '0.1.0'

export interface MeteringClientOptions {
  /** The gateway, e.g. http://localhost:8787. */
  baseUrl: string
  /** A project's API key (`mk_…`), or the root key for projects and keys. */
  apiKey: string
  /** Per attempt (default 10,000 ms). */
  timeoutMs?: number
  /** Retries of 429, and of 503 and network errors where a replay is safe (default 4 attempts, 200 ms doubling to 5 s, with jitter). */
  retry?: RetryOptions
  /** record()'s batches. */
  batch?: BatchOptions
  /** Default: the global fetch (Node ≥ 18). */
  fetch?: typeof fetch
  /** Waits between attempts (default: a timer). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>
  /** The jitter's source, in [0, 1) (default Math.random). */
  random?: () => number
  /** New idempotency keys and event ids (default: crypto.randomUUID). */
  newKey?: () => string
}

export class MeteringClient extends ApiMethods {
  private readonly transport: Transport
  private readonly recorder: Recorder
  private readonly newKey: () => string

  constructor(options: MeteringClientOptions) {
    super()
    if (!options.baseUrl) throw new TypeError('baseUrl is required')
    if (!options.apiKey) throw new TypeError('apiKey is required')
    const fetchImpl = options.fetch ?? globalThis.fetch
    if (typeof fetchImpl !== 'function') throw new TypeError('no fetch: use Node ≥ 18 or pass options.fetch')
    this.newKey = options.newKey ?? randomKey
    this.transport = new Transport({
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      fetch: fetchImpl,
      timeoutMs: options.timeoutMs ?? 10_000,
      retry: { ...DEFAULT_RETRY, ...options.retry },
      sleep: options.sleep ?? sleep,
      random: options.random ?? Math.random,
      userAgent: `metering-client-ts/${CLIENT_VERSION}`,
    })
    this.recorder = new Recorder((events) => this.usage.recordBatch({ events }), this.newKey, options.batch)
  }

  /** Any operation by its operationId, e.g. `request('runs.get', { path: { runId } })`. */
  request<R = unknown>(operationId: OperationId, input: OperationInput = {}, options?: CallOptions): Promise<R> {
    return this.transport.send<R>(operationId, input, options)
  }

  protected call<R>(operationId: OperationId, input: OperationInput, options?: CallOptions): Promise<R> {
    return this.transport.send<R>(operationId, input, options)
  }

  /**
   * Holds `amount` on budget `key`, runs `work`, and settles the cost it reports (`{ cost }`, a
   * decimal string); when `work` throws, releases the hold and rethrows. A cost above the hold
   * settles it in full and records the rest (budgets.record, never denied). A hold that does not
   * fit throws BudgetExceededError (with `blocked` and `remedy`) before `work` runs.
   */
  hold<T>(key: string, amount: string, work: (hold: HoldContext) => Promise<WorkResult<T>> | WorkResult<T>, options?: HoldOptions): Promise<HoldResult<T>> {
    return runHold(this.budgets, this.newKey, key, amount, work, options)
  }

  /** Buffers usage events for /v1/usage/record-batch; resolves with each event's result, in order. */
  record(events: UsageEvent | UsageEvent[]): Promise<RecordResult[]> {
    return this.recorder.record(events)
  }

  /** Sends the buffered events now and waits for every batch sent so far. */
  flush(): Promise<void> {
    return this.recorder.flush()
  }

  /** Flushes, and refuses further record() calls. */
  close(): Promise<void> {
    return this.recorder.close()
  }
}

/** A new client (the same as `new MeteringClient(options)`). */
export function createClient(options: MeteringClientOptions): MeteringClient {
  return new MeteringClient(options)
}

function randomKey(): string {
  const crypto = globalThis.crypto
  if (typeof crypto?.randomUUID !== 'function') throw new Error('no crypto.randomUUID (Node < 19): pass options.newKey')
  return crypto.randomUUID()
}
