// Which failures mean "a store cannot be reached right now", as opposed to a bug. The HTTP layer
// answers those with 503 SERVICE_UNAVAILABLE and Retry-After instead of 500: the request can be
// retried as it is (with its idempotency key, a retry of a call that did reach Redis before the
// connection failed answers what the first one did).

/** The store that could not be reached. */
export type Unreachable = 'redis' | 'clickhouse'

/** A store failed to answer in time or at all; thrown where a check of our own sees it (readiness, replicas). */
export class UnavailableError extends Error {
  constructor(
    readonly store: Unreachable,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
    this.name = 'UnavailableError'
  }
}

// ioredis: the command timeout (METERING_REDIS_TIMEOUT_MS), a connection lost with commands in
// flight, retries given up, no writable socket. Redis itself: still loading its AOF (LOADING), its
// AOF cannot be written (MISCONF: a full or failing disk), a Cluster without a master for a slot
// (CLUSTERDOWN, TRYAGAIN, MASTERDOWN), a replica set to refuse stale reads.
const REDIS_MESSAGES =
  /^(Command timed out|Connection is closed|Reached the max retries per request limit|Stream isn't writeable|None of startup nodes is available|Failed to refresh slots cache|LOADING |MISCONF |CLUSTERDOWN |TRYAGAIN |MASTERDOWN |BUSY |NOREPLICAS )/
// chDB's child process died or could not be reached (src/infra/clickhouse/embedded.ts).
const CHDB_MESSAGES = /^(cannot reach the chDB process|chDB process ended before answering|chDB process failed to start)/
// A ClickHouse server over HTTP that refuses, resets or does not answer.
const CLICKHOUSE_MESSAGES = /^(Timeout error|socket hang up|connect ECONNREFUSED)/
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])

/** True when an error says a store could not be reached (in time): a 503, not a bug. */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  if (error instanceof UnavailableError || error.name === 'MaxRetriesPerRequestError') return true
  if (REDIS_MESSAGES.test(error.message) || CHDB_MESSAGES.test(error.message) || CLICKHOUSE_MESSAGES.test(error.message)) return true
  const code = (error as NodeJS.ErrnoException).code
  return code !== undefined && NETWORK_CODES.has(code)
}
