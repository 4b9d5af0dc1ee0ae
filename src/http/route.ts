import type { Static, TSchema } from '@sinclair/typebox'
import type { Result } from '../kernel/errors.js'
import type { Principal } from '../keys/types.js'
import type { RouteErrorStatus } from './errors.js'
import type { Services } from './services.js'

export type { Principal }

/** Who is calling: the operator's root key, a project's API key with its scopes, or nobody (public routes). */
/**
 * Who may call a route: `public` (no key), `root` (only METERING_ROOT_KEY), `project` (a
 * project key holding `scope`), or `any` (root, or a project key holding `scope`; the handler
 * then checks which project the request names).
 */
export type Access = { kind: 'public' } | { kind: 'root' } | { kind: 'project'; scope: string } | { kind: 'any'; scope: string }

export interface HandlerInput<Body, Query> {
  body: Body
  query: Query
  params: Record<string, string>
  principal: Principal
  /** The principal's project (empty for root). */
  projectId: string
  services: Services
  requestId: string
}

export interface Route<B extends TSchema = TSchema, Q extends TSchema = TSchema, R extends TSchema = TSchema> {
  method: 'GET' | 'POST'
  /** uWS pattern: `/v1/runs/get/:runId`. */
  path: string
  operationId: string
  summary: string
  description?: string
  tags: string[]
  access: Access
  body?: B
  query?: Q
  response: R
  /**
   * The error statuses the route can answer beyond the common ones (COMMON_ERROR_STATUSES in
   * src/http/errors.ts): 402 (budget_exceeded), 409 (conflict), 412 (precondition_failed), as the
   * failures its handler and services return. OpenAPI lists exactly these with the common ones.
   */
  errors?: readonly RouteErrorStatus[]
  handler(input: HandlerInput<Static<B>, Static<Q>>): Promise<Result<Static<R>>> | Result<Static<R>>
  /**
   * The 200 answer's text, when the route has a faster way to write it than JSON.stringify (a
   * hot route): it must give exactly JSON.stringify's bytes for every value (a test checks it).
   */
  serialize?: (value: Static<R>) => string
}

/** Declares a route; the generic parameters carry the schemas' static types into the handler. */
export function defineRoute<B extends TSchema, Q extends TSchema, R extends TSchema>(route: Route<B, Q, R>): Route<B, Q, R> {
  return route
}

export type AnyRoute = Route<TSchema, TSchema, TSchema>

/**
 * A route outside the JSON API: an HTML page and its form (the sandbox payment setup page).
 * Public (the handler checks whatever secret the path carries), not in the OpenAPI document;
 * the body arrives as text (size-limited like every body) and the handler answers the status,
 * headers (content type included) and body itself. Errors of its own are still the envelope.
 */
export interface RawRoute {
  method: 'GET' | 'POST'
  path: string
  handler(input: RawInput): Promise<RawResult> | RawResult
}

export interface RawInput {
  params: Record<string, string>
  /** The query string, without `?`. */
  query: string
  /** '' for GET. */
  body: string
  contentType: string
  services: Services
  requestId: string
}

export interface RawResult {
  status: number
  headers: Record<string, string>
  body: string
}
