// One operation over fetch: the URL from the operation's path, the bearer key, the JSON body, a
// timeout per attempt, and the retries. What is retried, and how:
//  - 429 (the per-key rate limit refused it before doing anything): always;
//  - 503 (a store the gateway needs did not answer), a network error or a timeout: when a replay
//    of the same request is safe (replaySafe below), since the first attempt may have been applied;
//  - nothing else: 4xx answers are the request's fault and 500 is not a transient condition.
// Each retry sends the very same body (so the same idempotency key), after the server's
// Retry-After when it gave one, else an exponential backoff; both with jitter, so that clients
// refused together do not come back together.
import { MeteringError, NetworkError, errorFromAnswer } from './errors.js'
import { OPERATIONS, type OperationId } from './generated.js'

export interface RetryOptions {
  /** Attempts in all, the first included (default 4); 1 disables retries. */
  attempts?: number
  /** The first backoff (default 200 ms), doubled each retry up to maxDelayMs. */
  baseDelayMs?: number
  /** The longest backoff (default 5,000 ms). A longer Retry-After is waited for as given. */
  maxDelayMs?: number
}

export interface CallOptions {
  /** Aborts the call, between attempts too. */
  signal?: AbortSignal
  /** Per attempt (default: the client's, 10,000 ms). */
  timeoutMs?: number
  /** This call's retries (false: one attempt). */
  retry?: RetryOptions | false
  /** Extra request headers. */
  headers?: Record<string, string>
}

/** What one operation is sent with: path parameters, query parameters, body. */
export interface OperationInput {
  path?: Record<string, string>
  query?: object
  body?: unknown
}

export interface TransportOptions {
  baseUrl: string
  apiKey: string
  fetch: typeof fetch
  timeoutMs: number
  retry: Required<RetryOptions>
  /** Waits between attempts (tests inject one that does not wait). */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>
  /** In [0, 1): the jitter. */
  random: () => number
  userAgent: string
}

export const DEFAULT_RETRY: Required<RetryOptions> = { attempts: 4, baseDelayMs: 200, maxDelayMs: 5_000 }

/**
 * Operations whose replay after an attempt that may have been applied could do it twice: they
 * create something new each time and take no idempotency key. Every other operation either
 * takes an idempotency key (required, or optional and then given), names what it changes (a
 * hold, a key, a document applied as a whole), or only reads.
 */
export function replaySafe(operationId: OperationId, body: unknown): boolean {
  const b = (body ?? {}) as Record<string, unknown>
  switch (operationId) {
    case 'projects.create':
    case 'keys.create':
      return false
    case 'webhooks.upsert':
      return typeof b.id === 'string'
    case 'usage.record':
      return hasEventId(b)
    case 'usage.recordBatch':
      return Array.isArray(b.events) && b.events.every((e) => hasEventId((e ?? {}) as Record<string, unknown>))
    default:
      return true
  }
}

/** An event that names itself (id or idempotencyKey) is deduplicated by the gateway, so its replay is not counted twice. */
function hasEventId(event: Record<string, unknown>): boolean {
  return typeof event.id === 'string' || typeof event.idempotencyKey === 'string'
}

export class Transport {
  constructor(readonly options: TransportOptions) {}

  /** Sends one operation, retrying as the header says; answers its JSON, or throws a MeteringError. */
  async send<R>(operationId: OperationId, input: OperationInput, call: CallOptions = {}): Promise<R> {
    const retry = call.retry === false ? { ...this.options.retry, attempts: 1 } : { ...this.options.retry, ...call.retry }
    const safe = replaySafe(operationId, input.body)
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.attempt(operationId, input, call, attempt)
      if (!(outcome instanceof MeteringError)) return outcome as R
      const error = outcome
      const again = error.status === 429 || ((error.status === 503 || error instanceof NetworkError) && safe)
      if (!again || attempt >= retry.attempts) throw error
      if (!call.signal?.aborted) await this.options.sleep(this.delayMs(attempt, retry, error.retryAfterMs), call.signal)
      if (call.signal?.aborted) throw call.signal.reason ?? error
    }
  }

  /** The wait before retry number `attempt` (1 for the first retry). */
  delayMs(attempt: number, retry: Required<RetryOptions>, retryAfterMs: number | undefined): number {
    const backoff = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1))
    // "Equal jitter": at least half the backoff, so a retry never comes back at once.
    const jittered = backoff / 2 + this.options.random() * (backoff / 2)
    if (retryAfterMs === undefined) return Math.round(jittered)
    // Not before the server said, and spread over the next half backoff after it.
    return Math.round(retryAfterMs + this.options.random() * (backoff / 2))
  }

  /** One attempt: the parsed answer of a 2xx, or the error it makes. */
  private async attempt(operationId: OperationId, input: OperationInput, call: CallOptions, attempt: number): Promise<unknown> {
    const spec = OPERATIONS[operationId]
    const url = this.url(spec.path, input)
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.options.apiKey}`,
      'user-agent': this.options.userAgent,
      ...call.headers,
    }
    const init: RequestInit = { method: spec.method, headers }
    if (input.body !== undefined) {
      headers['content-type'] = 'application/json'
      init.body = JSON.stringify(input.body)
    }
    const timeout = withTimeout(call.timeoutMs ?? this.options.timeoutMs, call.signal)
    init.signal = timeout.signal
    let answer: Response
    let text: string
    try {
      answer = await this.options.fetch(url, init)
      text = await answer.text()
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason ?? err
      return new NetworkError(operationId, attempt, timeout.timedOut() ? `timed out after ${call.timeoutMs ?? this.options.timeoutMs} ms` : describe(err), err)
    } finally {
      timeout.clear()
    }
    return answer.ok ? parseSuccess(operationId, answer, text, attempt) : errorFromAnswer(operationId, answer, text, attempt)
  }

  private url(template: string, input: OperationInput): string {
    const path = template.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = input.path?.[name]
      if (value === undefined) throw new TypeError(`path parameter ${name} is missing`)
      return encodeURIComponent(value)
    })
    const query = new URLSearchParams()
    for (const [name, value] of Object.entries(input.query ?? {})) if (value !== undefined && value !== null) query.set(name, String(value))
    const search = query.toString()
    return `${this.options.baseUrl.replace(/\/+$/, '')}${path}${search ? `?${search}` : ''}`
  }
}

function parseSuccess(operationId: OperationId, answer: Response, text: string, attempt: number): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return new MeteringError({
      operationId,
      status: answer.status,
      code: 'INVALID_RESPONSE',
      message: `${operationId}: a ${answer.status} answer that is not JSON`,
      requestId: answer.headers.get('x-request-id') ?? undefined,
      attempts: attempt,
    })
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  const cause = (err as { cause?: unknown }).cause
  return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message
}

/** An AbortSignal that fires after `ms` or when `outer` does (AbortSignal.any is Node ≥ 20.3). */
function withTimeout(ms: number, outer: AbortSignal | undefined): { signal: AbortSignal; timedOut(): boolean; clear(): void } {
  const controller = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    controller.abort(new Error(`timed out after ${ms} ms`))
  }, ms)
  const onAbort = (): void => controller.abort(outer?.reason)
  if (outer?.aborted) onAbort()
  else outer?.addEventListener('abort', onAbort, { once: true })
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    clear: () => {
      clearTimeout(timer)
      outer?.removeEventListener('abort', onAbort)
    },
  }
}

/** The default sleep: a timer, cut short by the signal. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = (): void => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}
