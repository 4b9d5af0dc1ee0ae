import { failure, invalid, type Failure } from '../kernel/errors.js'
import { formatUnits } from '../kernel/money.js'
import { balanceOf, explainDenial } from './denial.js'
import type { BudgetState } from './types.js'

/**
 * What each budget script answers, in its header's order (lua/*.lua "Returns"), by the storage
 * adapter's function (src/budgets/redis.ts): the adapter accepts no other status from that script.
 * leaseBudget-4 answers `open` and `report`/`end` with two lists.
 */
export const BUDGET_SCRIPT_STATUSES = {
  upsertBudget: ['created', 'updated'],
  getBudget: ['ok', 'budget_not_found'],
  authorizeHold: ['ok', 'replayed', 'budget_not_found', 'idempotency_conflict', 'budget_closed', 'ttl_exceeds_max', 'budget_exceeded', 'amount_overflow'],
  closeHold: ['ok', 'replayed', 'budget_not_found', 'hold_not_found', 'exceeds_hold_amount', 'hold_already_released', 'hold_expired', 'hold_already_settled'],
  chargeBudget: ['ok', 'replayed', 'budget_not_found', 'idempotency_conflict', 'budget_closed', 'budget_exceeded', 'amount_overflow'],
  expireHolds: ['ok', 'budget_not_found'],
  openLease: [
    'ok',
    'replayed',
    'budget_not_found',
    'idempotency_conflict',
    'unit_mismatch',
    'budget_closed',
    'ttl_exceeds_max',
    'budget_exceeded',
    'amount_overflow',
  ],
  reportLease: ['ok', 'replayed', 'budget_not_found', 'lease_not_found'],
} as const

export type BudgetScript = keyof typeof BUDGET_SCRIPT_STATUSES
/** The statuses one adapter function's script answers. */
export type StatusOf<F extends BudgetScript> = (typeof BUDGET_SCRIPT_STATUSES)[F][number]
/** Every status a budget script answers. */
export type BudgetScriptStatus = StatusOf<BudgetScript>
/** The statuses that answer the operation: the callers turn them into values. */
export type BudgetSuccessStatus = 'ok' | 'replayed' | 'created' | 'updated'
/** The statuses that refuse it: budgetFailure turns them into the domain's Failure. */
export type BudgetFailureStatus = Exclude<BudgetScriptStatus, BudgetSuccessStatus>

/** The service's operations, where a code's message depends on which one refused. */
export type BudgetOperation = 'get' | 'authorize' | 'settle' | 'release' | 'charge' | 'record' | 'lease' | 'report'

/** What a refusal is told about: the call, and the budget as the script left it. */
export interface BudgetFailureContext {
  op: BudgetOperation
  /** The budget's key, as the caller named it. */
  key: string
  /** budget_exceeded explains the denial against it; ttl_exceeds_max reads the budget's maxTtlMs (s[2]). */
  snap: BudgetState
  /** The call's instant (the 402's balance). */
  now: number
  /** What the operation asked to hold, lease or consume, in units of 10^-8 (a 402 is explained against it). */
  amount: bigint
  /** The hold (`h_<n>`) or lease (`l_<n>`) a settle, release or report named. */
  id?: string
  /** The run's currency, for a lease (unit_mismatch). */
  currency?: string
}

/** The one translation of a refusing status into the domain's Failure (src/http/errors.ts maps its kind to HTTP). */
const FAILURES: Record<BudgetFailureStatus, (c: BudgetFailureContext) => Failure> = {
  budget_not_found: (c) => failure('not_found', 'budget_not_found', `Budget ${c.key} does not exist in this project.`),
  idempotency_conflict: (c) =>
    failure(
      'conflict',
      'idempotency_conflict',
      c.op === 'authorize'
        ? 'This idempotencyKey was used with a different request (amount or ttlMs).'
        : c.op === 'lease'
          ? 'This idempotencyKey started another run of this customer with a different request.'
          : 'This idempotencyKey was used with a different request.',
    ),
  unit_mismatch: (c) =>
    failure(
      'conflict',
      'budget_unit_mismatch',
      `Budget ${c.key} does not count in ${c.currency}: a run leases from a budget whose unit is the run's currency (ISO code).`,
    ),
  budget_closed: (c) =>
    failure(
      'conflict',
      'budget_closed',
      `Budget ${c.key} is past its closesAt${c.op === 'authorize' ? ' and takes no new holds' : c.op === 'lease' ? ' and takes no new leases' : ''}.`,
    ),
  ttl_exceeds_max: (c) =>
    invalid([
      {
        path: '$.ttlMs',
        message: `must not exceed ${c.op === 'lease' ? `budget ${c.key}'s` : "the budget's"} holds.maxTtlMs (${c.snap.s[2]})`,
      },
    ]),
  budget_exceeded: (c) => {
    const blocked = explainDenial(c.snap.limits, c.snap.held, c.amount)!
    return failure(
      'budget_exceeded',
      'budget_exceeded',
      `Limit ${blocked.limitId} (${blocked.window}) cannot take ${formatUnits(c.amount)}; remedy: ${blocked.remedy}.`,
      {
        kind: 'budget_exceeded',
        blocked,
        balance: balanceOf(c.snap, c.now),
      },
    )
  },
  amount_overflow: (c) =>
    failure(
      'conflict',
      'amount_overflow',
      `Budget ${c.key} cannot count this amount exactly on top of its totals (about 9·10^21 of its unit): nothing was changed.`,
    ),
  hold_not_found: (c) => failure('not_found', 'hold_not_found', `Hold ${c.id} does not exist on budget ${c.key} (or was forgotten after its retention).`),
  exceeds_hold_amount: (c) =>
    failure('conflict', 'exceeds_hold_amount', `The amount is more than hold ${c.id} reserved; record the excess with /v1/budgets/record.`),
  hold_already_released: (c) => failure('conflict', 'hold_already_released', `Hold ${c.id} was released.`),
  hold_expired: (c) => failure('conflict', 'hold_expired', `Hold ${c.id} expired and was settled at its full amount; only that amount settles it.`),
  hold_already_settled: (c) => failure('conflict', 'hold_already_settled', `Hold ${c.id} is already settled${c.op === 'settle' ? ' for another amount' : ''}.`),
  lease_not_found: (c) => failure('not_found', 'lease_not_found', `Lease ${c.id} does not exist on budget ${c.key} (or was forgotten after its retention).`),
}

/** Every refusing status: the keys of the one table. */
export const BUDGET_FAILURE_STATUSES = Object.keys(FAILURES) as BudgetFailureStatus[]

/** The domain's Failure for a status that refused an operation. */
export function budgetFailure(status: BudgetFailureStatus, context: BudgetFailureContext): Failure {
  return FAILURES[status](context)
}
