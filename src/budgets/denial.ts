import { formatUnits } from '../kernel/money.js'
import type { Balance, Blocked, BudgetState, LimitState, Remedy } from './types.js'

/**
 * Explains a denied authorize or charge (spec part 7, `blocked`). The failing limits are the
 * hard ones where consumed + held + amount passes the limit. `blocked` names a failing limit
 * smaller than the request itself (the smallest), else the one that resets last (`never`
 * resets last of all). `remedy` considers every failing limit:
 *  - release_holds when releasing all holds would let the request fit every failing limit;
 *  - wait_for_reset when every failing limit resets and the request fits each one's fresh
 *    period next to today's holds;
 *  - raise_limit otherwise.
 */
export function explainDenial(limits: LimitState[], held: bigint, amount: bigint): Blocked | undefined {
  const failing = limits.filter((l) => l.enforce === 'hard' && l.consumed + held + amount > l.amount)
  if (failing.length === 0) return undefined

  const tooSmall = failing.filter((l) => l.amount < amount).sort((a, b) => (a.amount < b.amount ? -1 : a.amount > b.amount ? 1 : 0))
  const resetsLast = [...failing].sort((a, b) => (b.resetsAt ?? Infinity) - (a.resetsAt ?? Infinity))
  const blocked = tooSmall[0] ?? resetsLast[0]!

  const releaseFits = failing.every((l) => l.consumed + amount <= l.amount)
  const resetFits = failing.every((l) => l.resetsAt !== null && held + amount <= l.amount)
  const remedy: Remedy = releaseFits ? 'release_holds' : resetFits ? 'wait_for_reset' : 'raise_limit'

  return {
    limitId: blocked.id,
    window: blocked.window,
    remaining: formatUnits(blocked.amount - blocked.consumed - held),
    held: formatUnits(held),
    resetsAt: blocked.resetsAt,
    remedy,
  }
}

/**
 * A budget's balance as every answer shows it, a denial's `details.balance` included: `remaining`
 * is the least of the hard limits' (null without hard limits).
 */
export function balanceOf(snap: BudgetState, now: number): Balance {
  const held = formatUnits(snap.held)
  let least: bigint | undefined
  const limits = snap.limits.map((l) => {
    const remaining = l.amount - l.consumed - snap.held
    if (l.enforce === 'hard' && (least === undefined || remaining < least)) least = remaining
    return {
      id: l.id,
      window: l.window,
      enforce: l.enforce,
      amount: formatUnits(l.amount),
      consumed: formatUnits(l.consumed),
      held,
      remaining: formatUnits(remaining),
      resetsAt: l.resetsAt,
    }
  })
  return { remaining: least === undefined ? null : formatUnits(least), held, limits, asOf: now }
}
