import type { Clock } from '../kernel/clock.js'
import { invalid, success, type Issue, type Result } from '../kernel/errors.js'
import { formatUnits, fromPair, parseAmount } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { balanceOf, explainDenial } from './denial.js'
import { budgetFailure } from './errors.js'
import { budgetTag } from './keys.js'
import * as store from './redis.js'
import type { Snapshot } from './redis.js'
import type { Blocked, BudgetState, BudgetView, Consumption, Crossed, Hold, HoldOutcome, Lease, LimitConfig, LimitState, Window, Enforce } from './types.js'

export interface BudgetServiceOptions {
  /** How long closed holds and idempotency records are kept (at least 24 h by DESIGN.md). */
  retentionMs?: number
  /** Told about every limit whose consumed passed its amount, whatever the operation. */
  onCrossed?: (projectId: string, budgetKey: string, crossed: Crossed[]) => void
  /** Told about every operation a hard limit denied (402 budget_exceeded), with the denial's `blocked` and that limit. */
  onExceeded?: (denial: BudgetDenial) => void
}

/** An authorize, charge or lease a hard limit denied (what onExceeded is told). */
export interface BudgetDenial {
  projectId: string
  budgetKey: string
  operation: 'authorize' | 'charge' | 'lease'
  /** What the operation asked for, decimal text. */
  amount: string
  blocked: Blocked
  limit: LimitState
  at: number
}

export interface UpsertInput {
  key: string
  unit?: string
  limits: { id: string; window: Window; enforce: Enforce; amount: string; anchor?: number }[]
  holds?: { defaultTtlMs?: number; maxTtlMs?: number }
  closesAt?: number | null
}

export const DEFAULT_TTL_MS = 60_000
export const DEFAULT_MAX_TTL_MS = 86_400_000
const DAY_MS = 86_400_000
/** Hold states as lua/includes/budget.lua stores them. */
const HOLD_RELEASED = '3'
const HOLD_EXPIRED = '4'
const LEASE_STATES: Record<string, Lease['state']> = { 1: 'open', 2: 'ended', 4: 'expired' }

/** A budget's hold deadlines with their defaults filled in, as an upsert stores them. */
export function resolveHolds(holds: UpsertInput['holds']): { defaultTtlMs: number; maxTtlMs: number } {
  const defaultTtlMs = holds?.defaultTtlMs ?? DEFAULT_TTL_MS
  return { defaultTtlMs, maxTtlMs: holds?.maxTtlMs ?? Math.max(DEFAULT_MAX_TTL_MS, defaultTtlMs) }
}

/**
 * The rules an upsert checks beyond its schema, with JSON paths under `at` (the catalog checks
 * a document's budgets with them before it writes anything). `duplicate` marks a limit id used twice.
 */
export function budgetRuleIssues(input: UpsertInput, at = '$'): (Issue & { duplicate?: true })[] {
  const issues: (Issue & { duplicate?: true })[] = []
  const { defaultTtlMs, maxTtlMs } = resolveHolds(input.holds)
  if (defaultTtlMs > maxTtlMs) issues.push({ path: `${at}.holds.defaultTtlMs`, message: 'must not exceed holds.maxTtlMs' })
  const seen = new Set<string>()
  input.limits.forEach((l, i) => {
    if (seen.has(l.id)) issues.push({ path: `${at}.limits[${i}].id`, message: `limit id ${l.id} is used twice`, duplicate: true })
    seen.add(l.id)
    if (l.anchor !== undefined && l.window === 'never') issues.push({ path: `${at}.limits[${i}].anchor`, message: 'a never window has no periods to anchor' })
  })
  return issues
}

/**
 * Budgets with holds (src/budgets/README.md). Each method is one script, so one round trip,
 * with `now` read once from the injected clock: every decision of a call sees one instant.
 */
export class BudgetService {
  private readonly retentionMs: number

  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly options: BudgetServiceOptions = {},
  ) {
    this.retentionMs = Math.max(options.retentionMs ?? DAY_MS, DAY_MS)
  }

  async upsert(projectId: string, input: UpsertInput): Promise<Result<BudgetView & { created: boolean; crossed: Crossed[] }>> {
    const issues = budgetRuleIssues(input)
    if (issues.length > 0) return invalid(issues)
    const { defaultTtlMs, maxTtlMs } = resolveHolds(input.holds)
    const limits: store.LimitInput[] = input.limits.map((l) => ({
      id: l.id,
      window: l.window,
      enforce: l.enforce,
      anchor: l.anchor,
      amount: parseAmount(l.amount)!,
    }))

    const now = this.clock()
    const snap = await store.upsertBudget(this.redis, budgetTag(projectId, input.key), now, this.retentionMs, {
      unit: input.unit ?? '',
      defaultTtlMs,
      maxTtlMs,
      closesAt: input.closesAt ?? null,
      limits,
    })
    this.notify(projectId, input.key, snap)
    return success({ ...this.view(input.key, snap, now), created: snap.status === 'created', crossed: crossedOf(snap) })
  }

  async get(projectId: string, key: string): Promise<Result<BudgetView>> {
    const now = this.clock()
    const snap = await store.getBudget(this.redis, budgetTag(projectId, key), now, this.retentionMs)
    if (snap.status !== 'ok') return budgetFailure(snap.status, { op: 'get', key, snap, now, amount: 0n })
    this.notify(projectId, key, snap)
    return success(this.view(key, snap, now))
  }

  async authorize(projectId: string, req: { key: string; amount: string; ttlMs?: number; idempotencyKey: string }): Promise<Result<Hold>> {
    const amount = parseAmount(req.amount)!
    const now = this.clock()
    const snap = await store.authorizeHold(this.redis, budgetTag(projectId, req.key), now, this.retentionMs, amount, req.ttlMs, req.idempotencyKey)
    this.notify(projectId, req.key, snap)
    this.notifyExceeded(projectId, req.key, 'authorize', snap, now, amount)
    if (snap.status !== 'ok' && snap.status !== 'replayed') return budgetFailure(snap.status, { op: 'authorize', key: req.key, snap, now, amount })
    return success({
      allowed: true,
      holdId: `h_${snap.s[0]}`,
      amount: formatUnits(amount),
      expiresAt: Number(snap.s[1]),
      replayed: snap.status === 'replayed',
      balance: balanceOf(snap, now),
    })
  }

  async settle(projectId: string, req: { key: string; holdId: string; amount: string }): Promise<Result<HoldOutcome>> {
    return this.closeHold(projectId, req.key, req.holdId, 'settle', parseAmount(req.amount)!)
  }

  async release(projectId: string, req: { key: string; holdId: string }): Promise<Result<HoldOutcome>> {
    return this.closeHold(projectId, req.key, req.holdId, 'release', 0n)
  }

  async charge(projectId: string, req: { key: string; amount: string; idempotencyKey: string }): Promise<Result<Consumption>> {
    return this.consume(projectId, req, 'charge')
  }

  async record(projectId: string, req: { key: string; amount: string; idempotencyKey: string }): Promise<Result<Consumption>> {
    return this.consume(projectId, req, 'record')
  }

  /**
   * Opens a lease for a run starting with budgetKey (README "Leases"): like an authorize of
   * `amount`, checked against every hard limit (402 with the budget's blocked details), the
   * budget's closesAt and holds.maxTtlMs (against the run's ttlMs), and only when the budget's
   * unit is the run's currency. Once per `requestKey` (`<customerId>|<idempotency key>` of the
   * run's start): the same `fingerprint` replays the lease, another is 409.
   */
  async openLease(
    projectId: string,
    key: string,
    req: { amount: bigint; ttlMs: number; expiresAt: number; currency: string; requestKey: string; fingerprint: string },
  ): Promise<Result<Lease>> {
    const now = this.clock()
    const snap = await store.openLease(this.redis, budgetTag(projectId, key), now, this.retentionMs, req)
    this.notify(projectId, key, snap)
    this.notifyExceeded(projectId, key, 'lease', snap, now, req.amount)
    if (snap.status !== 'ok' && snap.status !== 'replayed') {
      return budgetFailure(snap.status, { op: 'lease', key, snap, now, amount: req.amount, currency: req.currency })
    }
    return success(leaseOf(snap, now))
  }

  /**
   * Reports what a lease's run consumed so far, `total` (units of 10^-8 of the budget's unit):
   * the lease's reported total becomes max(reported, total), the difference moves from held to
   * consumed. `end` also closes the lease, releasing its unreported rest. Idempotent and
   * order-independent; 404 lease_not_found once the lease was forgotten.
   */
  async reportLease(projectId: string, key: string, leaseNumber: string, total: bigint, action: 'report' | 'end'): Promise<Result<Lease>> {
    const now = this.clock()
    const snap = await store.reportLease(this.redis, budgetTag(projectId, key), now, this.retentionMs, leaseNumber, action, total)
    this.notify(projectId, key, snap)
    if (snap.status !== 'ok' && snap.status !== 'replayed') {
      return budgetFailure(snap.status, { op: 'report', key, snap, now, amount: total, id: `l_${leaseNumber}` })
    }
    return success(leaseOf(snap, now))
  }

  /**
   * reportLease('report') for a caller that needs no answer (each consume of a leased run): the
   * same script and crossed notifications, without building the Lease and its Balance.
   */
  async reportLeaseProgress(projectId: string, key: string, leaseNumber: string, total: bigint): Promise<void> {
    const snap = await store.reportLease(this.redis, budgetTag(projectId, key), this.clock(), this.retentionMs, leaseNumber, 'report', total)
    this.notify(projectId, key, snap)
  }

  /** One sweep step for one budget (see src/workers/holdExpiry.ts). Returns how many holds expired. */
  async expire(tag: string, max = 1000): Promise<{ expired: number; purged: number }> {
    const snap = await store.expireHolds(this.redis, tag, this.clock(), this.retentionMs, max)
    if (snap.status === 'budget_not_found') return { expired: 0, purged: 0 }
    const [projectId, key] = splitTag(tag)
    this.notify(projectId, key, snap)
    return { expired: Number(snap.s[0]), purged: Number(snap.s[1]) }
  }

  private async closeHold(projectId: string, key: string, holdId: string, action: 'settle' | 'release', usage: bigint): Promise<Result<HoldOutcome>> {
    const now = this.clock()
    const snap = await store.closeHold(this.redis, budgetTag(projectId, key), now, this.retentionMs, holdId.slice(2), action, usage)
    this.notify(projectId, key, snap)
    if (snap.status !== 'ok' && snap.status !== 'replayed') return budgetFailure(snap.status, { op: action, key, snap, now, amount: usage, id: holdId })
    const [hi, lo, expiresAt, state, shi, slo] = snap.s as [string, string, string, string, string, string]
    const outcome: HoldOutcome = {
      holdId,
      state: state === HOLD_RELEASED ? 'released' : 'settled',
      amount: formatUnits(fromPair(hi, lo)),
      expiresAt: Number(expiresAt),
      replayed: snap.status === 'replayed',
      balance: balanceOf(snap, now),
      crossed: crossedOf(snap),
    }
    if (state !== HOLD_RELEASED) {
      outcome.settledBy = state === HOLD_EXPIRED ? 'expiry' : 'settle'
      outcome.settledAmount = formatUnits(fromPair(shi, slo))
    }
    return success(outcome)
  }

  private async consume(
    projectId: string,
    req: { key: string; amount: string; idempotencyKey: string },
    mode: 'charge' | 'record',
  ): Promise<Result<Consumption>> {
    const amount = parseAmount(req.amount)!
    const now = this.clock()
    const snap = await store.chargeBudget(this.redis, budgetTag(projectId, req.key), now, this.retentionMs, amount, mode, req.idempotencyKey)
    this.notify(projectId, req.key, snap)
    if (mode === 'charge') this.notifyExceeded(projectId, req.key, 'charge', snap, now, amount)
    if (snap.status !== 'ok' && snap.status !== 'replayed') return budgetFailure(snap.status, { op: mode, key: req.key, snap, now, amount })
    return success({ amount: formatUnits(amount), replayed: snap.status === 'replayed', balance: balanceOf(snap, now), crossed: crossedOf(snap) })
  }

  private view(key: string, snap: Snapshot, now: number): BudgetView {
    const [unit, dttl, mttl, closes] = snap.s
    const limits: LimitConfig[] = snap.limits.map((l) => {
      const limit: LimitConfig = { id: l.id, window: l.window, enforce: l.enforce, amount: formatUnits(l.amount) }
      if (l.anchor !== '') limit.anchor = Number(l.anchor)
      return limit
    })
    return {
      key,
      unit: unit ?? '',
      limits,
      holds: { defaultTtlMs: Number(dttl), maxTtlMs: Number(mttl) },
      closesAt: Number(closes) >= 0 ? Number(closes) : null,
      balance: balanceOf(snap, now),
    }
  }

  private notify(projectId: string, key: string, snap: Snapshot): void {
    if (!this.options.onCrossed || !snap.limits.some((l) => l.crossed)) return
    this.options.onCrossed(projectId, key, crossedOf(snap))
  }

  /** A 402: onExceeded is told of the denial, explained as the answer's `blocked` explains it. */
  private notifyExceeded(projectId: string, key: string, operation: BudgetDenial['operation'], snap: Snapshot, now: number, amount: bigint): void {
    if (!this.options.onExceeded || snap.status !== 'budget_exceeded') return
    const blocked = explainDenial(snap.limits, snap.held, amount)
    const limit = blocked && snap.limits.find((l) => l.id === blocked.limitId)
    if (blocked && limit) this.options.onExceeded({ projectId, budgetKey: key, operation, amount: formatUnits(amount), blocked, limit, at: now })
  }
}

export { balanceOf }

function leaseOf(snap: Snapshot, now: number): Lease {
  const [number, hi, lo, expiresAt, state, rhi, rlo] = snap.s as [string, string, string, string, string, string, string]
  return {
    leaseId: `l_${number}`,
    number,
    amount: fromPair(hi, lo),
    expiresAt: Number(expiresAt),
    state: LEASE_STATES[state] ?? 'open',
    reported: fromPair(rhi, rlo),
    replayed: snap.status === 'replayed',
    balance: balanceOf(snap, now),
  }
}

function crossedOf(snap: BudgetState): Crossed[] {
  return snap.limits
    .filter((l) => l.crossed)
    .map((l) => ({
      limitId: l.id,
      enforce: l.enforce,
      window: l.window,
      amount: formatUnits(l.amount),
      consumed: formatUnits(l.consumed),
    }))
}

function splitTag(tag: string): [string, string] {
  const inner = tag.slice(1, -1)
  const slash = inner.indexOf('/')
  return [inner.slice(0, slash), inner.slice(slash + 1)]
}
