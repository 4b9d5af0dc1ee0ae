import { failure, type Failure } from '../kernel/errors.js'
import type { ConsumeReason, Run } from './types.js'

/**
 * What each run script answers, in its header's order (lua/*.lua "Returns"), by the storage
 * adapter's function (src/runs/redis.ts): the adapter accepts no other status from that script.
 * expireRuns-7 and purgeRuns-N answer a count, no status.
 */
export const RUN_SCRIPT_STATUSES = {
  startRun: [
    'ok',
    'replayed',
    'idempotency_conflict',
    'parent_not_found',
    'parent_not_running',
    'currency_mismatch',
    'insufficient_funds',
    'insufficient_budget',
    'lease_closed',
  ],
  endRun: ['ok', 'run_not_found', 'replayed', 'run_not_running'],
  consumeRun: ['run_not_found', 'duplicate', 'expired', 'not_running', 'stale', 'entitlement_denied', 'stale_usage', 'insufficient_budget', 'accepted'],
} as const

export type RunScript = keyof typeof RUN_SCRIPT_STATUSES
/** The statuses one adapter function's script answers. */
export type StatusOf<F extends RunScript> = (typeof RUN_SCRIPT_STATUSES)[F][number]
/** Every status a run script answers. */
export type RunScriptStatus = StatusOf<RunScript>
/**
 * The statuses that answer the operation: the callers turn them into values (a consume's reasons
 * are 200 answers). insufficient_budget is not one: it refuses a child's start (402); a consume
 * answers it as its reason before it would reach the table.
 */
export type RunSuccessStatus = 'ok' | 'replayed' | Exclude<ConsumeReason, 'insufficient_budget'>
/** The statuses that refuse an operation: runFailure turns them into the domain's Failure. */
export type RunFailureStatus = Exclude<RunScriptStatus, RunSuccessStatus>

/** What a refusal is told about. A start's fields, or the run a get, end or consume named. */
export interface RunFailureContext {
  /** The run named (get, end, consume). */
  runId?: string
  /** run_not_running: the run as it ended. */
  run?: Run
  /** stale, stale_usage: how many times the run changed under the event before the consume gave up. */
  attempts?: number
  /** A start's customer. */
  customerId?: string
  /** A start's parent run ('' for a root run). */
  parentRunId?: string
  /** The run's currency: a start's, or the consuming run's. */
  currency?: string
  /** A start's budget, in minor units. */
  budgetAmountMinor?: number
  /** The budget a start's lease is on (lease_closed). */
  budgetKey?: string
  /** currency_mismatch of a consume (checked by the gateway, not a script): the feature, and the currency it is priced in. */
  featureSlug?: string
  pricedIn?: string
}

/** The one translation of a refusing status into the domain's Failure (src/http/errors.ts maps its kind to HTTP). */
const FAILURES: Record<RunFailureStatus, (c: RunFailureContext) => Failure> = {
  run_not_found: (c) => failure('not_found', 'run_not_found', `Run ${c.runId} does not exist in this project.`),
  idempotency_conflict: () => failure('conflict', 'idempotency_conflict', 'This idempotencyKey started another run of this customer with a different request.'),
  parent_not_found: (c) => failure('not_found', 'parent_not_found', `Run ${c.parentRunId} is not a run of customer ${c.customerId}.`),
  parent_not_running: (c) => failure('conflict', 'parent_not_running', `Run ${c.parentRunId} is not running: a child run reserves from a running parent.`),
  currency_mismatch: (c) =>
    failure(
      'conflict',
      'currency_mismatch',
      c.featureSlug !== undefined
        ? `Feature ${c.featureSlug} is priced in ${c.pricedIn}; run ${c.runId} is in ${c.currency}.`
        : c.parentRunId
          ? `The parent run is not in ${c.currency}.`
          : `The customer's wallet is not in ${c.currency}.`,
    ),
  insufficient_funds: (c) =>
    failure(
      'budget_exceeded',
      'insufficient_funds',
      `The customer's wallet has less than ${c.budgetAmountMinor} minor units of ${c.currency} available (GET /v1/wallet/balance).`,
    ),
  insufficient_budget: (c) =>
    failure('budget_exceeded', 'insufficient_budget', `Run ${c.parentRunId} has less than ${c.budgetAmountMinor} minor units remaining.`),
  lease_closed: (c) =>
    failure(
      'conflict',
      'lease_closed',
      `The lease this idempotencyKey took on budget ${c.budgetKey} ended before its run started; start the run with a new idempotencyKey.`,
    ),
  run_not_running: (c) => failure('conflict', 'run_not_running', `Run ${c.runId} already ended as ${c.run?.status}.`, { run: c.run }),
  stale: (c) => runBusy(c),
  stale_usage: (c) => runBusy(c),
}

/** The catalog (stale) or the run's quantity of the feature (stale_usage) kept changing under the event: the consume gave up. */
function runBusy(c: RunFailureContext): Failure {
  return failure('conflict', 'run_busy', `Run ${c.runId} changed under this event ${c.attempts} times; send it again.`)
}

/** Every refusing status: the keys of the one table. */
export const RUN_FAILURE_STATUSES = Object.keys(FAILURES) as RunFailureStatus[]

/** The domain's Failure for a status that refused an operation. */
export function runFailure(status: RunFailureStatus, context: RunFailureContext): Failure {
  return FAILURES[status](context)
}
