/**
 * Domain outcomes. Domains return failures as values and know nothing of HTTP;
 * src/http/errors.ts alone maps a failure's kind to a status and the error envelope.
 */
export type FailureKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'budget_exceeded'
  | 'precondition_failed'
  | 'payload_too_large'
  | 'too_many_requests'
  | 'internal'
  /** A store (Redis, ClickHouse) cannot be reached right now: retry later, as is. */
  | 'unavailable'

export interface Failure {
  ok: false
  kind: FailureKind
  /** A result code that reads as a sentence, e.g. `hold_already_settled`. */
  reason: string
  message: string
  details?: Record<string, unknown>
}

export interface Success<T> {
  ok: true
  value: T
}

export type Result<T> = Success<T> | Failure

export function success<T>(value: T): Success<T> {
  return { ok: true, value }
}

export function failure(kind: FailureKind, reason: string, message: string, details?: Record<string, unknown>): Failure {
  return details === undefined ? { ok: false, kind, reason, message } : { ok: false, kind, reason, message, details }
}

/** One problem in a request or document: a JSON path (`$.limits[0].amount`) and what is wrong. */
export interface Issue {
  path: string
  message: string
}

export function invalid(issues: Issue[], message = 'The request is not valid.'): Failure {
  return failure('invalid', 'invalid_request', message, { issues })
}
