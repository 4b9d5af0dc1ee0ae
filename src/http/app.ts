import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import uWS, { type HttpRequest, type HttpResponse, type TemplatedApp } from 'uWebSockets.js'
import { failure, invalid, type Failure, type Result } from '../kernel/errors.js'
import { hasScope } from '../keys/service.js'
import type { RateLimiter } from '../ratelimit/limiter.js'
import { isUnavailable } from '../infra/availability.js'
import type { Services } from './services.js'
import { readBody, refuseBody } from './body.js'
import { errorResponse, type ErrorLike } from './errors.js'
import type { Metrics } from './metrics.js'
import type { AnyRoute, Principal, RawResult, RawRoute } from './route.js'
import { MAX_JSON_DEPTH, checksDepthInHandler, compile, depthIssue, type Validator } from '../kernel/validation.js'

export interface HttpOptions {
  routes: readonly AnyRoute[]
  /** Non-JSON routes (HTML pages and forms), see RawRoute. */
  rawRoutes?: readonly RawRoute[]
  services: Services
  logger: Logger
  metrics: Metrics
  openapi: Record<string, unknown>
  docsUrl: string
  maxBodyBytes: number
  rateLimiter?: RateLimiter
  /** Whether the gateway can serve: /readyz and /healthz answer 200 only when it can (src/bin/gateway.ts). */
  readiness: () => Promise<Readiness>
  /** The requests being answered, and whether the gateway is draining them to stop. */
  traffic: Traffic
}

/** What /readyz reports: ready, and the state of each thing it checked (`ok` or what is wrong). */
export interface Readiness {
  ready: boolean
  checks: Record<string, string>
}

/**
 * Requests begun and not yet answered (or abandoned by their client). While `draining`, every
 * answer closes its connection, so keep-alive clients reconnect (to another gateway) instead of
 * sending more here; `idle()` settles once nothing is left to answer.
 */
export class Traffic {
  open = 0
  draining = false
  private waiting: (() => void)[] = []

  enter(): void {
    this.open++
  }

  leave(): void {
    if (--this.open === 0) for (const resolve of this.waiting.splice(0)) resolve()
  }

  idle(): Promise<void> {
    return this.open === 0 ? Promise.resolve() : new Promise((resolve) => this.waiting.push(resolve))
  }
}

export interface HttpServer {
  app: TemplatedApp
  port: number
  /** Stops accepting connections; open ones go on. */
  close(): void
  /** Closes every connection, open keep-alive ones included (after the traffic is idle). */
  closeAll(): void
}

interface Exchange {
  res: HttpResponse
  requestId: string
  /** Answered, or the client went away: either way nothing more may be written. */
  done: boolean
  started: number
  route: string
  method: string
  /** The calling key's project once its key is verified (the access log's projectId). */
  projectId: string | undefined
}

const RAW_STATUS_LINES: Record<number, string> = {
  200: '200 OK',
  303: '303 See Other',
  400: '400 Bad Request',
  404: '404 Not Found',
  410: '410 Gone',
  415: '415 Unsupported Media Type',
}
const JSON_TYPE = /^application\/json\s*(;|$)/i
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const ID_PREFIX = 'req_' + randomBytes(4).toString('hex')
let requestSeq = 0

/**
 * The uWS front end: for each request, body and key verification run side by side, then
 * 413 → 401 → 403 → 400 (content type, JSON, nesting depth, schema) → 429 → the route's
 * handler, whose domain result becomes 200 or the error envelope. Every answer carries
 * `x-request-id`. A body past the limit is read to its end and dropped before its 413 (up to
 * a cap, past which the 413 closes the connection: src/http/body.ts).
 */
export function createHttpApp(options: HttpOptions): TemplatedApp {
  const app = uWS.App()
  for (const route of options.routes) serveRoute(app, options, route)
  // Raw routes: public, body read as text under the same size limit, the handler's answer as is.
  for (const route of options.rawRoutes ?? []) serveRawRoute(app, options, route)
  serveBuiltins(app, options)
  serveUnmatched(app, options)
  return app
}

// The helpers below take the app's options instead of closing over them, so that an app builds
// no per-request state beyond the Exchange and the closures a request's callbacks need.

/** Writes a JSON answer once (a second answer, or one after the client went away, is dropped) and records its latency. */
function send(options: HttpOptions, ex: Exchange, status: number, line: string, body: string, headers?: Record<string, string>, close = false): void {
  if (ex.done) return
  finish(options, ex)
  ex.res.cork(() => {
    ex.res.writeStatus(line).writeHeader('content-type', 'application/json').writeHeader('x-request-id', ex.requestId)
    if (headers) for (const name in headers) ex.res.writeHeader(name, headers[name]!)
    ex.res.end(body, close || options.traffic.draining)
  })
  options.metrics.answered(ex, status)
}

/** Marks an exchange answered (or abandoned): nothing more is written, and it no longer counts as open. */
function finish(options: HttpOptions, ex: Exchange): void {
  ex.done = true
  options.traffic.leave()
}

function fail(options: HttpOptions, ex: Exchange, f: ErrorLike, headers?: Record<string, string>, close = false): void {
  const r = errorResponse(f, ex.requestId, options.docsUrl)
  send(options, ex, r.status, r.statusLine, r.body, headers, close)
}

/** The exchange of one request: the caller's request id when it is a sane one, else a fresh one. */
function begin(options: HttpOptions, res: HttpResponse, req: HttpRequest, route: string, method = 'GET'): Exchange {
  const given = req.getHeader('x-request-id')
  const ex: Exchange = {
    res,
    requestId: REQUEST_ID.test(given) ? given : ID_PREFIX + (++requestSeq).toString(36),
    done: false,
    started: performance.now(),
    route,
    method,
    projectId: undefined,
  }
  options.traffic.enter()
  res.onAborted(() => {
    if (!ex.done) finish(options, ex)
  })
  return ex
}

/**
 * A thrown error: a store that did not answer is a 503 (logged as a warning); anything else is a
 * bug, logged with the request id and answered with only that id so nothing internal leaks.
 */
function internalFailure(options: HttpOptions, ex: Exchange, route: string, error: unknown): void {
  if (isUnavailable(error)) {
    options.logger.warn({ err: error, requestId: ex.requestId, route }, 'store unavailable')
    fail(options, ex, UNAVAILABLE, RETRY_AFTER)
  } else {
    options.logger.error({ err: error, requestId: ex.requestId, route }, 'request failed')
    fail(options, ex, failure('internal', 'internal_error', 'Internal error; quote the requestId when reporting it.'))
  }
}

/** A store did not answer (in time): 503, and the request may be sent again as it is. */
const UNAVAILABLE = failure(
  'unavailable',
  'store_unavailable',
  'A store the service needs is not answering; retry the same request (same idempotency key) after Retry-After seconds.',
)
const RETRY_AFTER = { 'retry-after': '1' }

function register(app: TemplatedApp, method: string, path: string, handler: (res: HttpResponse, req: HttpRequest) => void): void {
  if (method === 'POST') app.post(path, handler)
  else app.get(path, handler)
}

/** What parseInput checks of a route's body, decided once per route. */
interface BodyChecks {
  validator: Validator | undefined
  /** False when the handler checks the nesting depth itself (checksDepthInHandler). */
  depth: boolean
}

/** A JSON route as served: the route and what was compiled for it once, at registration. */
interface Served {
  route: AnyRoute
  options: HttpOptions
  bodyChecks: BodyChecks
  queryValidator: Validator | undefined
  paramNames: string[]
  /** The 200 answer's text: the route's own serializer (same bytes, fewer steps), else JSON.stringify. */
  serialize: (value: unknown) => string
}

/** A JSON route: its validators are compiled once here, not per request. */
function serveRoute(app: TemplatedApp, options: HttpOptions, route: AnyRoute): void {
  const served: Served = {
    route,
    options,
    bodyChecks: { validator: route.body ? compile(route.body) : undefined, depth: !(route.body && checksDepthInHandler(route.body)) },
    queryValidator: route.query ? compile(route.query) : undefined,
    paramNames: [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1]!),
    serialize: (route.serialize as ((value: unknown) => string) | undefined) ?? JSON.stringify,
  }
  register(app, route.method, route.path, (res: HttpResponse, req: HttpRequest) => onRequest(served, res, req))
}

/** No path parameters: one shared (frozen) object instead of one per request. */
const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>

/**
 * One request of a JSON route. The body and the key are awaited side by side; a cached key (the
 * usual case) is known at once, so the request goes on from the body callback without any promise.
 */
function onRequest(served: Served, res: HttpResponse, req: HttpRequest): void {
  const { route, options } = served
  const ex = begin(options, res, req, route.path, route.method)
  // uWS's request object is only valid until this callback returns: read all of it now.
  const post = route.method === 'POST'
  const authorization = route.access.kind === 'public' ? '' : req.getHeader('authorization')
  const contentType = post ? req.getHeader('content-type') : ''
  const params = served.paramNames.length === 0 ? NO_PARAMS : readParams(req, served.paramNames)
  const queryText = served.queryValidator ? (req.getQuery() ?? '') : ''
  const declaredLength = post ? Number(req.getHeader('content-length') || 0) : 0
  if (declaredLength > options.maxBodyBytes) refuseBody(res, options.maxBodyBytes, declaredLength, (close) => tooLarge(options, ex, close))
  else if (params === undefined) fail(options, ex, invalid([{ path: '$', message: 'a path parameter is not valid percent-encoding' }]))
  else admitRequest(new Call(served, ex, contentType, queryText, params), res, authorization)
}

/** Waits for the key (when it is not cached) and the body side by side; the call proceeds once it has both. */
function admitRequest(call: Call, res: HttpResponse, authorization: string): void {
  const { route, options } = call.served
  // Methods, not per-request closures: under tsx (esbuild keepNames) each named closure costs a
  // defineProperty of its name, every request.
  call.who = route.access.kind === 'public' ? PUBLIC : identify(options.services, authorization)
  if (call.who === undefined) {
    options.services.keys.verify(bearerKey(authorization)!).then(
      (verified) => call.verified(verified),
      (error: unknown) => call.internal(error),
    )
  }
  if (route.method === 'POST')
    readBody(
      res,
      options.maxBodyBytes,
      (body) => call.bodyRead(body),
      // The 413 goes first, whoever is calling: it does not wait for the key.
      (close) => tooLarge(options, call.ex, close),
    )
  else call.bodyRead('')
}

/** What a request of a JSON route has gathered so far, and its steps once it has the key and the body. */
class Call {
  who: Principal | Failure | undefined = undefined
  text: string | undefined = undefined
  body: unknown = undefined
  query: unknown = undefined

  constructor(
    readonly served: Served,
    readonly ex: Exchange,
    readonly contentType: string,
    readonly queryText: string,
    readonly params: Record<string, string>,
  ) {}

  verified(who: Principal | Failure): void {
    this.who = who
    this.proceed()
  }

  bodyRead(text: string): void {
    this.text = text
    this.proceed()
  }

  /** Once both the key and the body are known: 401/403, then 400, then the route. */
  proceed(): void {
    const { who, text, ex, served } = this
    if (who === undefined || text === undefined || ex.done) return
    try {
      const allowed = 'ok' in who ? who : checkAccess(served.route, who)
      const problem = 'ok' in allowed ? allowed : parseInput(this, text)
      if (problem) fail(served.options, ex, problem)
      else this.admit(allowed as Principal)
    } catch (error) {
      this.internal(error)
    }
  }

  /** The rate limit (429), then the handler. */
  admit(who: Principal): void {
    const { options } = this.served
    if (who.kind === 'project') this.ex.projectId = who.projectId
    if (options.rateLimiter && who.kind === 'project') {
      options.rateLimiter
        .hit(who.keyId)
        .then((verdict) => (verdict.allowed ? this.handle(who) : this.limited(verdict.retryAfterMs)))
        .catch((error: unknown) => this.internal(error))
      return
    }
    this.handle(who)
  }

  limited(retryAfterMs: number): void {
    const { options } = this.served
    fail(options, this.ex, failure('too_many_requests', 'rate_limited', `More than ${options.rateLimiter!.perSecond} requests per second for this key.`), {
      'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
    })
  }

  /** Runs the handler; its domain result becomes 200 or the error envelope. A throw here reaches the caller's catch. */
  handle(who: Principal): void {
    const { route, options } = this.served
    const out = route.handler({
      body: this.body,
      query: this.query,
      params: this.params,
      principal: who,
      projectId: who.kind === 'project' ? who.projectId : '',
      services: options.services,
      requestId: this.ex.requestId,
    })
    const pending = out as Partial<PromiseLike<Result<unknown>>>
    if (typeof pending.then === 'function') {
      pending.then(
        (result) => this.answer(result),
        (error: unknown) => this.internal(error),
      )
    } else this.answer(out as Result<unknown>)
  }

  answer(result: Result<unknown>): void {
    const { options, serialize } = this.served
    try {
      if (result.ok) send(options, this.ex, 200, '200 OK', serialize(result.value))
      else fail(options, this.ex, result)
    } catch (error) {
      this.internal(error)
    }
  }

  internal(error: unknown): void {
    internalFailure(this.served.options, this.ex, this.served.route.path, error)
  }
}

/** A raw route (HTML pages and forms): no key, no JSON; the handler's status, headers and body are written as they are. */
function serveRawRoute(app: TemplatedApp, options: HttpOptions, route: RawRoute): void {
  const { services } = options
  const paramNames = [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1]!)
  register(app, route.method, route.path, (res: HttpResponse, req: HttpRequest) => {
    const ex = begin(options, res, req, route.path, route.method)
    const params = readParams(req, paramNames)
    const contentType = req.getHeader('content-type')
    const query = req.getQuery() ?? ''
    const declaredLength = Number(req.getHeader('content-length') || 0)
    const refuse = (close: boolean) => tooLarge(options, ex, close)
    if (route.method === 'POST' && declaredLength > options.maxBodyBytes) return refuseBody(res, options.maxBodyBytes, declaredLength, refuse)
    if (params === undefined) return fail(options, ex, invalid([{ path: '$', message: 'a path parameter is not valid percent-encoding' }]))
    const internal = (error: unknown) => internalFailure(options, ex, route.path, error)
    const run = (body: string) => {
      Promise.resolve()
        .then(() => route.handler({ params, query, body, contentType, services, requestId: ex.requestId }))
        .then((result) => sendRaw(options, ex, result))
        .catch(internal)
    }
    if (route.method === 'POST') readBody(res, options.maxBodyBytes, run, refuse)
    else run('')
  })
}

/** Writes a raw route's answer once, as `send` does for JSON. */
function sendRaw(options: HttpOptions, ex: Exchange, result: RawResult): void {
  if (ex.done) return
  finish(options, ex)
  ex.res.cork(() => {
    ex.res.writeStatus(RAW_STATUS_LINES[result.status] ?? String(result.status)).writeHeader('x-request-id', ex.requestId)
    for (const name in result.headers) ex.res.writeHeader(name, result.headers[name]!)
    ex.res.end(result.body, options.traffic.draining)
  })
  options.metrics.answered(ex, result.status)
}

/** Built-ins: health, metrics, the OpenAPI document (serialized once, it does not change). */
function serveBuiltins(app: TemplatedApp, options: HttpOptions): void {
  const { metrics } = options
  app.get('/livez', (res, req) => send(options, begin(options, res, req, '/livez'), 200, '200 OK', '{"status":"ok"}'))
  // /healthz is readiness too: what load balancers and older probes already call.
  for (const path of ['/readyz', '/healthz']) {
    app.get(path, (res, req) => {
      const ex = begin(options, res, req, path)
      options.readiness().then(
        ({ ready, checks }) => {
          const body = JSON.stringify({ status: ready ? 'ok' : 'unavailable', checks })
          if (ready) send(options, ex, 200, '200 OK', body)
          else send(options, ex, 503, '503 Service Unavailable', body, RETRY_AFTER)
        },
        (error: unknown) => internalFailure(options, ex, path, error),
      )
    })
  }
  app.get('/metrics', (res, req) => {
    const ex = begin(options, res, req, '/metrics')
    // Scrape-time figures are read from Redis (src/http/metrics.ts): the answer waits for them.
    metrics.render().then(
      (body) => sendRaw(options, ex, { status: 200, headers: { 'content-type': metrics.contentType }, body }),
      (error: unknown) => internalFailure(options, ex, '/metrics', error),
    )
  })
  const openapiText = JSON.stringify(options.openapi)
  app.get('/v1/openapi.json', (res, req) => send(options, begin(options, res, req, '/v1/openapi.json'), 200, '200 OK', openapiText))
}

/** A known path with another method is 405 (with Allow); anything else is 404. */
function serveUnmatched(app: TemplatedApp, options: HttpOptions): void {
  const allowed = new Map<string, string[]>()
  for (const route of [...options.routes, ...(options.rawRoutes ?? [])])
    (allowed.get(route.path) ?? allowed.set(route.path, []).get(route.path)!).push(route.method)
  allowed.set('/livez', ['GET']).set('/readyz', ['GET']).set('/healthz', ['GET']).set('/metrics', ['GET']).set('/v1/openapi.json', ['GET'])
  for (const [path, methods] of allowed) {
    app.any(path, (res, req) => {
      const ex = begin(options, res, req, path, req.getMethod().toUpperCase())
      fail(
        options,
        ex,
        {
          kind: 'method_not_allowed',
          reason: 'method_not_allowed',
          message: `${req.getMethod().toUpperCase()} is not allowed here; use ${methods.join(', ')}.`,
        },
        { allow: methods.join(', ') },
      )
    })
  }
  app.any('/*', (res, req) => {
    const ex = begin(options, res, req, 'unmatched', req.getMethod().toUpperCase())
    fail(options, ex, failure('not_found', 'route_not_found', `No route ${req.getMethod().toUpperCase()} ${req.getUrl()}.`))
  })
}

/** Path parameters, percent-decoded; undefined when one is not valid percent-encoding. */
function readParams(req: HttpRequest, names: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {}
  try {
    names.forEach((name, i) => {
      params[name] = decodeURIComponent(req.getParameter(i) ?? '')
    })
  } catch {
    return undefined
  }
  return params
}

/** 413; `close` when the rest of the body is still coming (it passed the drain cap, src/http/body.ts). */
function tooLarge(options: HttpOptions, ex: Exchange, close: boolean): void {
  fail(options, ex, failure('payload_too_large', 'payload_too_large', `The body is larger than ${options.maxBodyBytes} bytes.`), undefined, close)
}

const PUBLIC: Principal = { kind: 'anonymous' }

function bearerKey(authorization: string): string | undefined {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization)
  return match?.[1]
}

/** The caller from the cache, a failure, or undefined when the key must be looked up in Redis. */
function identify(services: Services, authorization: string): Principal | Failure | undefined {
  const key = bearerKey(authorization)
  if (key === undefined) {
    return failure(
      'unauthenticated',
      'unauthenticated',
      authorization ? 'The Authorization header must be `Bearer <API key>`.' : 'The Authorization header is missing.',
    )
  }
  return services.keys.verifyCached(key)
}

/** 403 unless the route admits this principal. */
function checkAccess(route: AnyRoute, who: Principal): Principal | Failure {
  const access = route.access
  if (access.kind === 'root' && who.kind !== 'root') return forbidden('Only the root key may call this route.')
  if (access.kind === 'project' && !hasScope(who, access.scope)) {
    return forbidden(who.kind === 'root' ? 'The root key manages projects and keys; use a project key here.' : `The key lacks the ${access.scope} scope.`)
  }
  if (access.kind === 'any' && who.kind === 'project' && !hasScope(who, access.scope)) return forbidden(`The key lacks the ${access.scope} scope.`)
  return who
}

function forbidden(message: string): Failure {
  return failure('forbidden', 'forbidden', message)
}

/** Parses and checks a request's body and query into `call` (body, query); the 400 when they are not valid. */
function parseInput(call: Call, text: string): Failure | undefined {
  const { route, bodyChecks, queryValidator } = call.served
  if (route.method === 'POST') {
    if (!JSON_TYPE.test(call.contentType))
      return invalid([{ path: '$', message: 'Content-Type must be application/json' }], 'The body must be JSON (Content-Type: application/json).')
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch (error) {
      return invalid([{ path: '$', message: (error as Error).message }], 'The body is not valid JSON.')
    }
    // Nesting past the limit takes at least two brackets a level: a shorter text (most bodies,
    // authorize's among them) cannot have it, and is not walked.
    if (bodyChecks.depth && text.length > 2 * MAX_JSON_DEPTH) {
      const deep = depthIssue(body)
      if (deep) return invalid([deep], `The body nests deeper than ${MAX_JSON_DEPTH} levels.`)
    }
    const validator = bodyChecks.validator
    if (validator && !validator.check(body)) return invalid(validator.issues(body))
    call.body = body
  }
  call.query = {}
  if (queryValidator) {
    const query = Object.fromEntries(new URLSearchParams(call.queryText))
    if (!queryValidator.check(query)) return invalid(queryValidator.issues(query))
    call.query = query
  }
  return undefined
}

/** Starts listening; port 0 picks a free port. */
export function listen(app: TemplatedApp, host: string, port: number): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (token) => {
      if (!token) return reject(new Error(`cannot listen on ${host}:${port}`))
      resolve({
        app,
        port: uWS.us_socket_local_port(token),
        close: () => uWS.us_listen_socket_close(token),
        // In the runtime since uWS v20.4, missing from its typings.
        closeAll: () => (app as TemplatedApp & { close(): void }).close(),
      })
    })
  })
}
