import { Type } from '@sinclair/typebox'
import type { FailureKind } from '../kernel/errors.js'

/** The one place where a domain failure becomes an HTTP status and the spec's error envelope. */
const STATUS: Record<FailureKind | 'method_not_allowed', [status: number, line: string, code: string]> = {
  invalid: [400, '400 Bad Request', 'BAD_REQUEST'],
  unauthenticated: [401, '401 Unauthorized', 'UNAUTHORIZED'],
  budget_exceeded: [402, '402 Payment Required', 'BUDGET_EXCEEDED'],
  forbidden: [403, '403 Forbidden', 'FORBIDDEN'],
  not_found: [404, '404 Not Found', 'NOT_FOUND'],
  method_not_allowed: [405, '405 Method Not Allowed', 'METHOD_NOT_ALLOWED'],
  conflict: [409, '409 Conflict', 'CONFLICT'],
  precondition_failed: [412, '412 Precondition Failed', 'PRECONDITION_FAILED'],
  payload_too_large: [413, '413 Payload Too Large', 'PAYLOAD_TOO_LARGE'],
  too_many_requests: [429, '429 Too Many Requests', 'TOO_MANY_REQUESTS'],
  internal: [500, '500 Internal Server Error', 'INTERNAL_SERVER_ERROR'],
  unavailable: [503, '503 Service Unavailable', 'SERVICE_UNAVAILABLE'],
}

/** Statuses any route of the JSON API may answer: every OpenAPI operation lists them. */
export const COMMON_ERROR_STATUSES = [400, 401, 403, 404, 413, 429, 500, 503] as const

/**
 * Statuses only some routes answer (the kinds budget_exceeded, conflict, precondition_failed):
 * each route declares those it can answer in its `errors` (src/http/route.ts).
 */
export type RouteErrorStatus = 402 | 409 | 412

/** The body of every error answer (errorResponse below writes it). */
export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'Machine-readable code, e.g. BAD_REQUEST, BUDGET_EXCEEDED.' }),
      docs: Type.String({ description: '{docs_url}/api-reference/errors/code/<CODE>' }),
      message: Type.String(),
      requestId: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { $id: 'ErrorEnvelope' },
)

export interface ErrorResponse {
  status: number
  statusLine: string
  body: string
}

/** A domain failure, or the one failure only HTTP knows: a method the path does not take. */
export interface ErrorLike {
  kind: FailureKind | 'method_not_allowed'
  reason: string
  message: string
  details?: Record<string, unknown>
}

export function errorResponse(failure: ErrorLike, requestId: string, docsUrl: string): ErrorResponse {
  const [status, statusLine, code] = STATUS[failure.kind]
  const error: Record<string, unknown> = {
    code,
    docs: `${docsUrl}/api-reference/errors/code/${code}`,
    message: failure.message,
    requestId,
  }
  error.details = { reason: failure.reason, ...failure.details }
  return { status, statusLine, body: JSON.stringify({ error }) }
}

const STATUS_LINES: Record<number, string> = { 200: '200 OK', 201: '201 Created' }
export function statusLine(status: number): string {
  return STATUS_LINES[status] ?? `${status}`
}
