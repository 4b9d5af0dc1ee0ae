// Every answer that is not 2xx becomes a MeteringError, of the class of its status, carrying the
// spec's error envelope: `{"error":{"code","docs","message","requestId","details"}}`
// (openapi.json ErrorEnvelope). A 402 is a BudgetExceededError with the budget's `blocked` limit,
// its `remedy` and the `balance` when the envelope has them (a budget's hard limit refused), or
// only `reason` (e.g. a run's `insufficient_budget`). A request that got no answer at all
// (connection refused or reset, timeout) is a NetworkError, status 0.
import type { Balance, LimitWindow } from './generated.js'

/** What a refused hold can do about it (spec part 7). */
export type Remedy = 'release_holds' | 'wait_for_reset' | 'raise_limit'

/** The hard limit that refused a hold or a charge: 402 `details.blocked` (spec part 7). */
export interface Blocked {
  limitId: string
  window: LimitWindow
  /** What is left of the limit (decimal; may be negative). */
  remaining: string
  /** What open holds take of it (decimal). */
  held: string
  /** When the limit's window resets (epoch ms); null for `never`. */
  resetsAt: number | null
  remedy: Remedy
}

/** One problem of a 400: the JSON path into the request and what is wrong there. */
export interface Issue {
  path: string
  message: string
}

export interface MeteringErrorInit {
  operationId: string
  status: number
  code: string
  message: string
  requestId?: string | undefined
  docs?: string | undefined
  details?: Record<string, unknown> | undefined
  retryAfterMs?: number | undefined
  attempts: number
  cause?: unknown
}

/** A call the gateway refused, or that got no answer. */
export class MeteringError extends Error {
  /** The HTTP status; 0 when no answer came. */
  readonly status: number
  /** error.code: BAD_REQUEST, BUDGET_EXCEEDED, CONFLICT, SERVICE_UNAVAILABLE, … */
  readonly code: string
  /** error.requestId (or the x-request-id header): quote it in a report. */
  readonly requestId: string | undefined
  /** error.docs: the page of the code. */
  readonly docs: string | undefined
  /** error.details: `reason` and what the code adds. */
  readonly details: Record<string, unknown>
  /** details.reason, the result code as a sentence: `idempotency_conflict`, `hold_not_found`, … */
  readonly reason: string | undefined
  /** The operation that failed, e.g. `budgets.authorize`. */
  readonly operationId: string
  /** Retry-After in ms, when the answer had one (429, 503). */
  readonly retryAfterMs: number | undefined
  /** How many attempts were made before giving up. */
  readonly attempts: number

  constructor(init: MeteringErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = new.target.name
    this.status = init.status
    this.code = init.code
    this.requestId = init.requestId
    this.docs = init.docs
    this.details = init.details ?? {}
    this.reason = typeof this.details.reason === 'string' ? this.details.reason : undefined
    this.operationId = init.operationId
    this.retryAfterMs = init.retryAfterMs
    this.attempts = init.attempts
  }
}

/** 400: malformed JSON, unknown properties, wrong types or out-of-range values. */
export class BadRequestError extends MeteringError {
  /** details.issues: each problem with its JSON path. */
  get issues(): Issue[] {
    return Array.isArray(this.details.issues) ? (this.details.issues as Issue[]) : []
  }
}
/** 401: a missing, unknown, revoked or expired key. */
export class UnauthorizedError extends MeteringError {}
/** 402: not enough budget or funds. */
export class BudgetExceededError extends MeteringError {
  /** details.blocked: the hard limit that refused (absent for a run's insufficient_budget). */
  get blocked(): Blocked | undefined {
    const blocked = this.details.blocked
    return blocked && typeof blocked === 'object' ? (blocked as Blocked) : undefined
  }
  /** What would make the request fit: blocked.remedy. */
  get remedy(): Remedy | undefined {
    return this.blocked?.remedy
  }
  /** details.balance: the budget's balance when it refused. */
  get balance(): Balance | undefined {
    const balance = this.details.balance
    return balance && typeof balance === 'object' ? (balance as Balance) : undefined
  }
}
/** 403: the key lacks the scope, or the customer is disabled. */
export class ForbiddenError extends MeteringError {}
/** 404: no such budget, hold, run, … */
export class NotFoundError extends MeteringError {}
/** 409: a conflict with the current state (`reason`: idempotency_conflict, hold_already_settled, …). */
export class ConflictError extends MeteringError {}
/** 412: e.g. a payment provider that is not configured. */
export class PreconditionFailedError extends MeteringError {}
/** 413: the body is larger than the gateway takes. */
export class PayloadTooLargeError extends MeteringError {}
/** 429: the key's request rate limit (retried by the client first). */
export class RateLimitedError extends MeteringError {}
/** 500: an internal error of the gateway. */
export class InternalServerError extends MeteringError {}
/** 503: a store the gateway needs did not answer (retried by the client first when a replay is safe). */
export class ServiceUnavailableError extends MeteringError {}
/** No answer: the connection failed or the attempt timed out (status 0, code NETWORK_ERROR). */
export class NetworkError extends MeteringError {
  constructor(operationId: string, attempts: number, message: string, cause: unknown) {
    super({ operationId, status: 0, code: 'NETWORK_ERROR', message: `${operationId}: ${message}`, attempts, cause })
  }
}

const BY_STATUS: Record<number, typeof MeteringError> = {
  400: BadRequestError,
  401: UnauthorizedError,
  402: BudgetExceededError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
  500: InternalServerError,
  503: ServiceUnavailableError,
}

/** The error of a non-2xx answer (its body read as `text`). */
export function errorFromAnswer(operationId: string, answer: Response, text: string, attempts: number): MeteringError {
  const envelope = parseEnvelope(text)
  const ErrorClass = BY_STATUS[answer.status] ?? MeteringError
  return new ErrorClass({
    operationId,
    status: answer.status,
    code: envelope?.code ?? `HTTP_${answer.status}`,
    message: envelope?.message ?? `${operationId}: HTTP ${answer.status}${text ? `: ${text.slice(0, 200)}` : ''}`,
    requestId: envelope?.requestId ?? answer.headers.get('x-request-id') ?? undefined,
    docs: envelope?.docs,
    details: envelope?.details,
    retryAfterMs: retryAfterMs(answer.headers.get('retry-after')),
    attempts,
  })
}

interface EnvelopeError {
  code: string
  message: string
  requestId?: string
  docs?: string
  details?: Record<string, unknown>
}

function parseEnvelope(text: string): EnvelopeError | undefined {
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error as Partial<EnvelopeError> | undefined
    if (error && typeof error.code === 'string' && typeof error.message === 'string') return error as EnvelopeError
  } catch {
    // Not JSON (a proxy's page): the status alone says what happened.
  }
  return undefined
}

/** Retry-After as seconds or an HTTP date, in ms from now. */
function retryAfterMs(header: string | null): number | undefined {
  if (header === null || header.trim() === '') return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}
