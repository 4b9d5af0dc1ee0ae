// hold(key, amount, work): authorize the most a step may cost, run it, then settle what it
// reports or release the hold when it throws. Each call of the API retries on its own (see
// transport.ts) with the same body, so the same idempotency key: the authorize's key is made
// once per hold() (or given), settle and release name the hold and replay by themselves.
import type { ApiMethods, BudgetsAuthorizeRequest, Consumption, Hold, HoldOutcome } from './generated.js'
import { fromUnits, isAmount, toUnits } from './money.js'
import type { CallOptions } from './transport.js'

export interface HoldOptions {
  /**
   * The authorize's idempotency key. Default: a new random one per hold() call. Give one of
   * your own (a task's step id) so that a process that crashed mid-step and runs the step again
   * gets the same hold back (`replayed: true`) instead of a second one.
   */
  idempotencyKey?: string
  /** The hold's deadline in ms (default: the budget's holds.defaultTtlMs). */
  ttlMs?: number
  /** Aborts the calls to the gateway (the work gets it too, in its context). */
  signal?: AbortSignal
}

/** What the work is given: the open hold, its budget key and the idempotency key it was authorized with. */
export interface HoldContext extends Hold {
  key: string
  idempotencyKey: string
  signal: AbortSignal | undefined
}

/** What the work reports: what the step really cost (a decimal string), and any value to hand back. */
export interface WorkResult<T> {
  cost: string
  value?: T
}

export interface HoldResult<T> {
  /** The work's value. */
  value: T | undefined
  holdId: string
  /** What the work reported. */
  cost: string
  /** The settled hold (state `settled`, settledAmount, balance, crossed). */
  settled: HoldOutcome
  /** When the cost was more than the hold: the rest, recorded with budgets.record (never denied). */
  excess?: Consumption
}

/** The hold's release failed after the work threw: the hold stays open until it expires (and is then settled in full). */
export class HoldReleaseError extends Error {
  constructor(
    readonly holdId: string,
    /** What the work threw (also the `cause`). */
    readonly workError: unknown,
    readonly releaseError: unknown,
  ) {
    super(
      `the work of hold ${holdId} failed, and releasing the hold failed too: ${releaseError instanceof Error ? releaseError.message : String(releaseError)}`,
      {
        cause: workError,
      },
    )
    this.name = 'HoldReleaseError'
  }
}

type BudgetCalls = Pick<ApiMethods['budgets'], 'authorize' | 'settle' | 'release' | 'record'>

const MAX_IDEMPOTENCY_KEY = 256

export async function runHold<T>(
  budgets: BudgetCalls,
  newKey: () => string,
  key: string,
  amount: string,
  work: (hold: HoldContext) => Promise<WorkResult<T>> | WorkResult<T>,
  options: HoldOptions = {},
): Promise<HoldResult<T>> {
  toUnits(amount)
  const idempotencyKey = options.idempotencyKey ?? newKey()
  const call: CallOptions = options.signal ? { signal: options.signal } : {}
  const request: BudgetsAuthorizeRequest = { key, amount, idempotencyKey }
  if (options.ttlMs !== undefined) request.ttlMs = options.ttlMs
  const hold = await budgets.authorize(request, call)
  let reported: WorkResult<T>
  try {
    reported = await work({ ...hold, key, idempotencyKey, signal: options.signal })
    if (!reported || !isAmount(reported.cost)) {
      throw new TypeError(`hold ${hold.holdId}: the work must return { cost } with cost a decimal string, not ${JSON.stringify(reported?.cost)}`)
    }
  } catch (err) {
    try {
      await budgets.release({ key, holdId: hold.holdId }, call)
    } catch (releaseError) {
      throw new HoldReleaseError(hold.holdId, err, releaseError)
    }
    throw err
  }
  const excessKey = `${idempotencyKey}:excess`.length <= MAX_IDEMPOTENCY_KEY ? `${idempotencyKey}:excess` : newKey()
  return settle(budgets, key, hold, reported, excessKey, call)
}

/** Settles the reported cost; a cost above the hold settles it in full and records the rest. */
async function settle<T>(budgets: BudgetCalls, key: string, hold: Hold, reported: WorkResult<T>, excessKey: string, call: CallOptions): Promise<HoldResult<T>> {
  const cost = toUnits(reported.cost)
  const held = toUnits(hold.amount)
  const settled = await budgets.settle({ key, holdId: hold.holdId, amount: cost > held ? hold.amount : reported.cost }, call)
  const result: HoldResult<T> = { value: reported.value, holdId: hold.holdId, cost: reported.cost, settled }
  if (cost > held) result.excess = await budgets.record({ key, amount: fromUnits(cost - held), idempotencyKey: excessKey }, call)
  return result
}
