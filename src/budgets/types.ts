/** The budget domain's values, as the API shows them (amounts are decimal strings). */

export type Window = 'hour' | 'day' | 'week' | 'month' | 'never'
export type Enforce = 'hard' | 'soft'

export interface LimitConfig {
  id: string
  window: Window
  enforce: Enforce
  amount: string
  /** Epoch ms the periods are laid from; absent = UTC calendar periods. */
  anchor?: number
}

export interface BudgetConfig {
  key: string
  unit: string
  limits: LimitConfig[]
  holds: { defaultTtlMs: number; maxTtlMs: number }
  closesAt: number | null
}

export interface Limit {
  id: string
  window: Window
  enforce: Enforce
  amount: string
  consumed: string
  held: string
  remaining: string
  resetsAt: number | null
}

export interface Balance {
  remaining: string | null
  held: string
  limits: Limit[]
  asOf: number
}

export interface Crossed {
  limitId: string
  enforce: Enforce
  window: Window
  amount: string
  consumed: string
}

export type Remedy = 'release_holds' | 'wait_for_reset' | 'raise_limit'

export interface Blocked {
  limitId: string
  window: Window
  remaining: string
  held: string
  resetsAt: number | null
  remedy: Remedy
}

export interface Hold {
  allowed: true
  holdId: string
  amount: string
  expiresAt: number
  replayed: boolean
  balance: Balance
}

export type HoldState = 'settled' | 'released'

export interface HoldOutcome {
  holdId: string
  state: HoldState
  /** settle: by the caller; expiry: the deadline passed and the full amount was settled. */
  settledBy?: 'settle' | 'expiry'
  amount: string
  settledAmount?: string
  expiresAt: number
  replayed: boolean
  balance: Balance
  crossed: Crossed[]
}

export interface Consumption {
  amount: string
  replayed: boolean
  balance: Balance
  crossed: Crossed[]
}

export interface BudgetView extends BudgetConfig {
  balance: Balance
}

/** A run's lease on a budget (README "Leases"), as the lease script left it. */
export interface Lease {
  /** `l_<n>`. */
  leaseId: string
  /** n. */
  number: string
  amount: bigint
  /** The lease's deadline: its run's deadline plus the grace (LEASE_GRACE_MS). */
  expiresAt: number
  state: 'open' | 'ended' | 'expired'
  /** What the run reported so far (units of 10^-8 of the budget's unit). */
  reported: bigint
  replayed: boolean
  balance: Balance
}

/** One limit as a budget script left it (src/budgets/redis.ts reads it from the reply). */
export interface LimitState {
  id: string
  window: Window
  enforce: Enforce
  /** '' when the limit uses calendar periods. */
  anchor: string
  amount: bigint
  consumed: bigint
  resetsAt: number | null
  crossed: boolean
}

/** A budget as one script left it, without the script's status: the operation's own values and every counter. */
export interface BudgetState {
  s: string[]
  held: bigint
  limits: LimitState[]
}
