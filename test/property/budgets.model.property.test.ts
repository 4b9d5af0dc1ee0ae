// Random operation sequences against an in-memory reference model of one budget (TigerBeetle's
// Auditor idea). The model is written from src/budgets/README.md, not from the Lua: limits with
// never/day/hour windows (unanchored: period start = floor(t / length) · length), hard/soft
// enforcement, holds with deadlines, lazy expiry at the full amount counted in the period that
// contained the deadline, the background sweep with its retention purge, idempotency replays and
// conflicts, closing, and re-configuration. Every operation runs against both; the answers
// (result code, hold id, outcome) and the full balance must agree after every step.
import fc from 'fast-check'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { manualClock } from '../../src/kernel/clock.js'
import { budgetTag } from '../../src/budgets/keys.js'
import { BudgetService, type UpsertInput } from '../../src/budgets/service.js'
import type { Balance, Crossed, Enforce } from '../../src/budgets/types.js'
import type { Result } from '../../src/kernel/errors.js'
import { UNITS_PER_ONE, formatUnits } from '../../src/kernel/money.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

type MWindow = 'never' | 'day' | 'hour'
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
const RETENTION_MS = DAY_MS
const LENGTH: Record<Exclude<MWindow, 'never'>, number> = { hour: HOUR_MS, day: DAY_MS }

// ------------------------------------------------------------------------------------------
// The reference model

interface MLimit {
  id: string
  window: MWindow
  enforce: Enforce
  amount: bigint
  consumed: bigint
  periodStart: number | null
  before: bigint
}
interface MHold {
  state: 'o' | 's' | 'r' | 'x'
  amount: bigint
  expiresAt: number
  settled: bigint
  purgeAt: number
  idemKey: string
}
/** Idempotency records are forgotten by the sweep: an authorize's with its hold's record, others after the retention. */
type MIdem = ({ op: 'a'; amount: bigint; ttlArg: number | undefined; holdId: number; expiresAt: number } | { op: 'c' | 'r'; amount: bigint }) & {
  purgeAt: number | null
}

interface LimitSpec {
  id: string
  window: MWindow
  enforce: Enforce
  amount: bigint
}
interface ConfigSpec {
  limits: LimitSpec[]
  defaultTtlMs: number
  maxTtlMs: number | undefined
  closes: 'open' | 'past' | 'future' | 'now'
}

/** The normalized answer both sides are reduced to. */
type Answer = Record<string, unknown>

function periodOf(window: MWindow, t: number): { start: number | null; resetsAt: number | null } {
  if (window === 'never') return { start: null, resetsAt: null }
  const len = LENGTH[window]
  const start = Math.floor(t / len) * len
  return { start, resetsAt: start + len }
}

class BudgetModel {
  limits: MLimit[] = []
  /** Holds by ordinal (1, 2, …: what the generated operations name). */
  holds = new Map<number, MHold>()
  idem = new Map<string, MIdem>()
  /** The last hold number: numbers are max(last + 1, now ms × 1000) (src/budgets/README.md, "Holds"). */
  seq = 0
  /** Ordinal → the hold's number. */
  numbers = new Map<number, number>()
  held = 0n
  defaultTtlMs = 60_000
  maxTtlMs = DAY_MS
  closesAt: number | null = null

  constructor(public now: number) {}

  /** Apply what time did: new periods reset consumed; open holds past their deadline expire. */
  private touch(): void {
    for (const l of this.limits) {
      const { start } = periodOf(l.window, this.now)
      if (l.periodStart !== start) {
        l.periodStart = start
        l.consumed = 0n
      }
      l.before = l.consumed
    }
    for (const h of this.holds.values()) {
      if (h.state === 'o' && h.expiresAt <= this.now) this.closeHold(h, 'x', h.amount, h.expiresAt)
    }
  }

  /** Usage counts in the period current at `at`, so only in limits whose current period contains it. */
  private consume(amount: bigint, at: number): void {
    for (const l of this.limits) if (periodOf(l.window, at).start === l.periodStart) l.consumed += amount
  }

  private closeHold(h: MHold, state: 'x' | 's' | 'r', usage: bigint | undefined, usedAt: number): void {
    this.held -= h.amount
    if (usage !== undefined) this.consume(usage, usedAt)
    h.state = state
    h.settled = usage ?? 0n
    h.purgeAt = this.now + RETENTION_MS
    const record = this.idem.get(h.idemKey)
    if (record) record.purgeAt = h.purgeAt
  }

  crossed(): Crossed[] {
    return this.limits
      .filter((l) => l.before <= l.amount && l.consumed > l.amount)
      .map((l) => ({ limitId: l.id, enforce: l.enforce, window: l.window, amount: formatUnits(l.amount), consumed: formatUnits(l.consumed) }))
  }

  balance(): Balance {
    const held = formatUnits(this.held)
    let least: bigint | undefined
    const limits = this.limits.map((l) => {
      const remaining = l.amount - l.consumed - this.held
      if (l.enforce === 'hard' && (least === undefined || remaining < least)) least = remaining
      return {
        id: l.id,
        window: l.window,
        enforce: l.enforce,
        amount: formatUnits(l.amount),
        consumed: formatUnits(l.consumed),
        held,
        remaining: formatUnits(remaining),
        resetsAt: periodOf(l.window, this.now).resetsAt,
      }
    })
    return { remaining: least === undefined ? null : formatUnits(least), held, limits, asOf: this.now }
  }

  private closed(): boolean {
    return this.closesAt !== null && this.closesAt <= this.now
  }

  /** README "402: which limit blocked, and the remedy". */
  private denial(amount: bigint): Answer | undefined {
    const failing = this.limits.filter((l) => l.enforce === 'hard' && l.consumed + this.held + amount > l.amount)
    if (failing.length === 0) return undefined
    let blocked: MLimit | undefined
    for (const l of failing) if (l.amount < amount && (blocked === undefined || l.amount < blocked.amount)) blocked = l
    if (!blocked) {
      const resetsAt = (l: MLimit) => periodOf(l.window, this.now).resetsAt ?? Infinity
      for (const l of failing) if (blocked === undefined || resetsAt(l) > resetsAt(blocked)) blocked = l
    }
    const b = blocked!
    const remedy = failing.every((l) => l.consumed + amount <= l.amount)
      ? 'release_holds'
      : failing.every((l) => l.window !== 'never' && this.held + amount <= l.amount)
        ? 'wait_for_reset'
        : 'raise_limit'
    return {
      reason: 'budget_exceeded',
      blocked: {
        limitId: b.id,
        window: b.window,
        remaining: formatUnits(b.amount - b.consumed - this.held),
        held: formatUnits(this.held),
        resetsAt: periodOf(b.window, this.now).resetsAt,
        remedy,
      },
      balance: this.balance(),
    }
  }

  configure(spec: ConfigSpec, closesAt: number | null): void {
    this.touch() // time is applied under the old configuration first
    const old = new Map(this.limits.map((l) => [l.id, l]))
    this.limits = spec.limits.map((s) => {
      const prev = old.get(s.id)
      const kept = prev !== undefined && prev.window === s.window
      // A kept limit's crossings count from where this call found it, expiries included.
      return { ...s, consumed: kept ? prev.consumed : 0n, periodStart: kept ? prev.periodStart : -1, before: kept ? prev.before : 0n }
    })
    this.defaultTtlMs = spec.defaultTtlMs
    this.maxTtlMs = spec.maxTtlMs ?? Math.max(DAY_MS, spec.defaultTtlMs)
    this.closesAt = closesAt
    for (const l of this.limits) {
      const { start } = periodOf(l.window, this.now)
      if (l.periodStart !== start) {
        l.periodStart = start
        l.consumed = 0n
        l.before = 0n
      }
    }
  }

  view(key: string): Answer {
    return {
      key,
      unit: '',
      limits: this.limits.map((l) => ({ id: l.id, window: l.window, enforce: l.enforce, amount: formatUnits(l.amount) })),
      holds: { defaultTtlMs: this.defaultTtlMs, maxTtlMs: this.maxTtlMs },
      closesAt: this.closesAt,
      balance: this.balance(),
    }
  }

  get(key: string): Answer {
    this.touch()
    return this.view(key)
  }

  authorize(amount: bigint, ttlArg: number | undefined, idemKey: string): Answer {
    this.touch()
    const prior = this.idem.get(idemKey)
    if (prior) {
      if (prior.op !== 'a' || prior.amount !== amount || prior.ttlArg !== ttlArg) return { reason: 'idempotency_conflict' }
      return {
        allowed: true,
        holdId: this.holdId(prior.holdId),
        amount: formatUnits(amount),
        expiresAt: prior.expiresAt,
        replayed: true,
        balance: this.balance(),
      }
    }
    if (this.closed()) return { reason: 'budget_closed' }
    const ttl = ttlArg ?? this.defaultTtlMs
    if (ttl > this.maxTtlMs) return { reason: 'invalid_request' }
    const denied = this.denial(amount)
    if (denied) return denied
    const id = this.numbers.size + 1
    this.seq = Math.max(this.seq + 1, this.now * 1000)
    this.numbers.set(id, this.seq)
    const expiresAt = this.now + ttl
    this.holds.set(id, { state: 'o', amount, expiresAt, settled: 0n, purgeAt: 0, idemKey })
    this.held += amount
    this.idem.set(idemKey, { op: 'a', amount, ttlArg, holdId: id, expiresAt, purgeAt: null })
    return { allowed: true, holdId: this.holdId(id), amount: formatUnits(amount), expiresAt, replayed: false, balance: this.balance() }
  }

  /** The id of the hold with that ordinal; `h_<ordinal>` for one never authorized (no real hold has so small a number). */
  holdId(ordinal: number): string {
    return `h_${this.numbers.get(ordinal) ?? ordinal}`
  }

  private outcome(id: number, h: MHold, replayed: boolean): Answer {
    const out: Answer = {
      holdId: this.holdId(id),
      state: h.state === 'r' ? 'released' : 'settled',
      amount: formatUnits(h.amount),
      expiresAt: h.expiresAt,
      replayed,
      balance: this.balance(),
      crossed: this.crossed(),
    }
    if (h.state !== 'r') {
      out.settledBy = h.state === 'x' ? 'expiry' : 'settle'
      out.settledAmount = formatUnits(h.settled)
    }
    return out
  }

  close(id: number, action: 'settle' | 'release', usage: bigint): Answer {
    this.touch()
    const h = this.holds.get(id)
    if (!h) return { reason: 'hold_not_found' }
    if (h.state === 'o') {
      if (action === 'release') this.closeHold(h, 'r', undefined, this.now)
      else if (usage > h.amount) return { reason: 'exceeds_hold_amount' }
      else this.closeHold(h, 's', usage, this.now)
      return this.outcome(id, h, false)
    }
    if (h.state === 'r') return action === 'release' ? this.outcome(id, h, true) : { reason: 'hold_already_released' }
    if (action === 'settle' && usage === h.settled) return this.outcome(id, h, true)
    return { reason: h.state === 'x' ? 'hold_expired' : 'hold_already_settled' }
  }

  consumeOp(mode: 'charge' | 'record', amount: bigint, idemKey: string): Answer {
    this.touch()
    const op = mode === 'charge' ? 'c' : 'r'
    const prior = this.idem.get(idemKey)
    if (prior) {
      if (prior.op === op && prior.amount === amount) return { amount: formatUnits(amount), replayed: true, balance: this.balance(), crossed: this.crossed() }
      return { reason: 'idempotency_conflict' }
    }
    if (mode === 'charge') {
      if (this.closed()) return { reason: 'budget_closed' }
      const denied = this.denial(amount)
      if (denied) return denied
    }
    this.consume(amount, this.now)
    this.idem.set(idemKey, { op, amount, purgeAt: this.now + RETENTION_MS })
    return { amount: formatUnits(amount), replayed: false, balance: this.balance(), crossed: this.crossed() }
  }

  /**
   * The background sweep: expiries as on any touch (counted), then closed holds and idempotency
   * records past their retention are forgotten (each counts as one purged record).
   */
  sweep(): Answer {
    const open = [...this.holds.values()].filter((h) => h.state === 'o')
    this.touch()
    const expired = open.filter((h) => h.state === 'x').length
    let purged = 0
    for (const [id, h] of this.holds) {
      if (h.state !== 'o' && h.purgeAt <= this.now) {
        this.holds.delete(id)
        purged++
      }
    }
    for (const [key, record] of this.idem) {
      if (record.purgeAt !== null && record.purgeAt <= this.now) {
        this.idem.delete(key)
        purged++
      }
    }
    return { expired, purged }
  }

  nextDeadline(): number | undefined {
    let next: number | undefined
    for (const h of this.holds.values()) if (h.state === 'o' && (next === undefined || h.expiresAt < next)) next = h.expiresAt
    return next
  }

  holdAmount(id: number): bigint | undefined {
    return this.holds.get(id)?.amount
  }
}

// ------------------------------------------------------------------------------------------
// Operations

type Tick = { kind: 'ms'; ms: number } | { kind: 'deadline'; delta: -1 | 0 | 1 } | { kind: 'boundary'; window: 'hour' | 'day'; delta: -1 | 0 | 1 }

type Op =
  | { t: 'authorize'; amount: bigint; pad: number; ttlMs: number | undefined; idem: string | null }
  | { t: 'settle'; hold: number; amount: bigint | 'full' | 'fullPlusOne'; pad: number }
  | { t: 'release'; hold: number }
  | { t: 'charge' | 'record'; amount: bigint; pad: number; idem: string | null }
  | { t: 'get' }
  | { t: 'sweep' }
  | { t: 'tick'; tick: Tick }
  | { t: 'upsert'; config: ConfigSpec; closesOffsetMs: number }
  /** Sends the last authorize, settle, release, charge or record again, as a client retry would. */
  | { t: 'retry'; pad: number }

const ONE = UNITS_PER_ONE
const amountArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(0n, 1n, ONE / 2n, ONE, 2n * ONE + ONE / 2n, 3n * ONE, 5n * ONE, 7n * ONE, 10n * ONE, 20n * ONE) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 60n * ONE }) },
)
const padArb = fc.nat({ max: 3 })
const idemArb = fc.option(fc.constantFrom('k1', 'k2', 'k3', 'k4'), { freq: 3, nil: null })
const holdArb = fc.integer({ min: 1, max: 10 })
const ttlArb = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom<number | undefined>(undefined, undefined, 1, 500, 60_000, 1_800_000, HOUR_MS) },
  { weight: 1, arbitrary: fc.constantFrom(2 * HOUR_MS, 5 * HOUR_MS, DAY_MS, DAY_MS + 1) },
)

const limitSpecArb = (id: string) =>
  fc.record({
    id: fc.constant(id),
    window: fc.constantFrom<MWindow>('never', 'day', 'hour'),
    enforce: fc.constantFrom<Enforce>('hard', 'hard', 'soft'),
    amount: fc.constantFrom(0n, 5n * ONE, 10n * ONE, 20n * ONE, 30n * ONE, 50n * ONE, 100n * ONE, 12n * ONE + 34n),
  })
const configArb: fc.Arbitrary<ConfigSpec> = fc
  .record({
    limits: fc.subarray(['a', 'b', 'c', 'd'], { minLength: 1, maxLength: 3 }).chain((ids) => fc.tuple(...ids.map(limitSpecArb))),
    defaultTtlMs: fc.constantFrom(1_000, 60_000, 600_000, HOUR_MS),
    maxTtlMs: fc.constantFrom<number | undefined>(undefined, HOUR_MS, 2 * HOUR_MS, DAY_MS),
    closes: fc.constantFrom<ConfigSpec['closes']>('open', 'open', 'open', 'past', 'future', 'now'),
  })
  .filter((c) => c.maxTtlMs === undefined || c.defaultTtlMs <= c.maxTtlMs)

const tickArb: fc.Arbitrary<Tick> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 * HOUR_MS }).map((ms) => ({ kind: 'ms' as const, ms })) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 5_000 }).map((ms) => ({ kind: 'ms' as const, ms })) },
  { weight: 1, arbitrary: fc.constantFrom(25 * HOUR_MS, DAY_MS).map((ms) => ({ kind: 'ms' as const, ms })) },
  { weight: 3, arbitrary: fc.constantFrom<-1 | 0 | 1>(-1, 0, 1).map((delta) => ({ kind: 'deadline' as const, delta })) },
  {
    weight: 2,
    arbitrary: fc
      .record({ window: fc.constantFrom<'hour' | 'day'>('hour', 'day'), delta: fc.constantFrom<-1 | 0 | 1>(-1, 0, 1) })
      .map((b) => ({ kind: 'boundary' as const, ...b })),
  },
)

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant('authorize' as const), amount: amountArb, pad: padArb, ttlMs: ttlArb, idem: idemArb }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('settle' as const),
      hold: holdArb,
      amount: fc.oneof(amountArb, fc.constantFrom<'full' | 'fullPlusOne'>('full', 'full', 'fullPlusOne')),
      pad: padArb,
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('release' as const), hold: holdArb }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constantFrom('charge' as const, 'record' as const), amount: amountArb, pad: padArb, idem: idemArb }) },
  { weight: 1, arbitrary: fc.constant({ t: 'get' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'sweep' as const }) },
  { weight: 5, arbitrary: tickArb.map((tick) => ({ t: 'tick' as const, tick })) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('upsert' as const), config: configArb, closesOffsetMs: fc.integer({ min: 1, max: 4 * HOUR_MS }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('retry' as const), pad: padArb }) },
)

/** A rendering of `units` with up to `pad` trailing fractional zeros. */
function render(units: bigint, pad: number): string {
  const canonical = formatUnits(units)
  if (pad === 0) return canonical
  const dot = canonical.indexOf('.')
  const digits = dot < 0 ? 0 : canonical.length - dot - 1
  const extra = Math.min(pad, 8 - digits)
  return extra <= 0 ? canonical : (dot < 0 ? canonical + '.' : canonical) + '0'.repeat(extra)
}

function closesAtOf(spec: ConfigSpec, now: number, offset: number): number | null {
  switch (spec.closes) {
    case 'open':
      return null
    case 'past':
      return now - offset
    case 'now':
      return now
    case 'future':
      return now + offset
  }
}

function upsertInput(key: string, spec: ConfigSpec, closesAt: number | null): UpsertInput {
  return {
    key,
    limits: spec.limits.map((l) => ({ id: l.id, window: l.window, enforce: l.enforce, amount: formatUnits(l.amount) })),
    holds: spec.maxTtlMs === undefined ? { defaultTtlMs: spec.defaultTtlMs } : { defaultTtlMs: spec.defaultTtlMs, maxTtlMs: spec.maxTtlMs },
    closesAt,
  }
}

/** Reduces a service answer to what the model predicts. */
function normalize(result: Result<unknown>): Answer {
  if (!result.ok) {
    const out: Answer = { reason: result.reason }
    if (result.reason === 'budget_exceeded') {
      const d = result.details as { blocked: unknown; balance: unknown }
      out.blocked = d.blocked
      out.balance = d.balance
    }
    return out
  }
  return { ...(result.value as Answer) }
}

/**
 * Whether sequences settle and release hold ids the model does not know (never issued, or purged
 * by the sweep). They did not while lua/settleHold raised a script error for them instead of
 * answering hold_not_found (see the examples); switch off only to look past such a regression.
 */
const SETTLE_UNKNOWN_HOLDS = true

// ------------------------------------------------------------------------------------------
// The property

let redis: Redis
const project = uniquePrefix()
let runs = 0
/** Outcome counts over the whole file, printed with DEBUG_MODEL=1 to see what the sequences reach. */
const stats = new Map<string, number>()
function outcomeOf(a: Answer): string {
  if (typeof a.reason === 'string') return a.reason
  if (a.replayed === true) return a.settledBy === 'expiry' ? 'replayed-expiry' : 'replayed'
  if ('expired' in a) return Number(a.expired) > 0 || Number(a.purged) > 0 ? 'expired-or-purged' : 'nothing'
  if (Array.isArray(a.crossed) && a.crossed.length > 0) return 'ok-crossed'
  return 'ok'
}

beforeAll(() => {
  redis = testRedis()
})
afterAll(async () => {
  await redis.quit()
  if (process.env.DEBUG_MODEL)
    console.log(
      [...stats]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join('\n'),
    )
})

async function runSequence(start: number, initial: ConfigSpec, initialOffset: number, ops: Op[]): Promise<void> {
  const key = `m${++runs}`
  const clock = manualClock(start)
  let notified: Crossed[] | undefined
  const service = new BudgetService(redis, clock, {
    onCrossed: (_p, _k, crossed) => {
      notified = crossed
    },
  })
  const model = new BudgetModel(start)
  const log: string[] = []

  const check = (step: number, op: Op | 'create', actual: Answer, expected: Answer) => {
    log.push(`#${step} @${clock()} ${JSON.stringify(op, (_k, v) => (typeof v === 'bigint' ? formatUnits(v) : v))} → ${JSON.stringify(actual)}`)
    const context = `step ${step} of budget ${key}:\n${log.slice(-12).join('\n')}\nexpected ${JSON.stringify(expected)}`
    expect(actual, context).toEqual(expected)
  }

  const closes0 = closesAtOf(initial, start, initialOffset)
  const created = await service.upsert(project, upsertInput(key, initial, closes0))
  model.configure(initial, closes0)
  check(0, 'create', normalize(created), { ...model.view(key), created: true, crossed: [] })

  let fresh = 0
  let last: Op | undefined
  for (const [i, generated] of ops.entries()) {
    const step = i + 1
    notified = undefined
    // A fresh key for null; a retry repeats the last request with the key it actually used.
    let op = generated
    if (op.t === 'retry') {
      if (!last) continue
      op = 'pad' in last ? ({ ...last, pad: op.pad } as Op) : last
    } else if ((op.t === 'authorize' || op.t === 'charge' || op.t === 'record') && op.idem === null) {
      op = { ...op, idem: `fresh${++fresh}` }
    }
    if (op.t === 'authorize' || op.t === 'charge' || op.t === 'record' || op.t === 'settle' || op.t === 'release') last = op
    const idemOf = (idem: string | null) => idem!
    let actual: Answer
    let expected: Answer
    switch (op.t) {
      case 'tick': {
        const now = clock()
        let target = now
        if (op.tick.kind === 'ms') target = now + op.tick.ms
        else if (op.tick.kind === 'deadline') {
          const d = model.nextDeadline()
          target = d === undefined ? now + 1 : Math.max(now, d + op.tick.delta)
        } else {
          const len = LENGTH[op.tick.window]
          target = Math.max(now, (Math.floor(now / len) + 1) * len + op.tick.delta)
        }
        clock.set(target)
        model.now = target
        continue
      }
      case 'authorize': {
        const idem = idemOf(op.idem)
        actual = normalize(await service.authorize(project, { key, amount: render(op.amount, op.pad), ttlMs: op.ttlMs, idempotencyKey: idem }))
        expected = model.authorize(op.amount, op.ttlMs, idem)
        break
      }
      case 'settle': {
        let usage: bigint
        if (typeof op.amount === 'bigint') usage = op.amount
        else usage = (model.holdAmount(op.hold) ?? 0n) + (op.amount === 'fullPlusOne' ? 1n : 0n)
        if (!SETTLE_UNKNOWN_HOLDS && model.holdAmount(op.hold) === undefined) continue
        actual = normalize(await service.settle(project, { key, holdId: model.holdId(op.hold), amount: render(usage, op.pad) }))
        expected = model.close(op.hold, 'settle', usage)
        break
      }
      case 'release': {
        if (!SETTLE_UNKNOWN_HOLDS && model.holdAmount(op.hold) === undefined) continue
        actual = normalize(await service.release(project, { key, holdId: model.holdId(op.hold) }))
        expected = model.close(op.hold, 'release', 0n)
        break
      }
      case 'charge':
      case 'record': {
        const idem = idemOf(op.idem)
        const req = { key, amount: render(op.amount, op.pad), idempotencyKey: idem }
        actual = normalize(op.t === 'charge' ? await service.charge(project, req) : await service.record(project, req))
        expected = model.consumeOp(op.t, op.amount, idem)
        break
      }
      case 'get': {
        actual = normalize(await service.get(project, key))
        expected = model.get(key)
        break
      }
      case 'sweep': {
        actual = { ...(await service.expire(budgetTag(project, key))) }
        expected = model.sweep()
        break
      }
      case 'upsert': {
        const closesAt = closesAtOf(op.config, clock(), op.closesOffsetMs)
        actual = normalize(await service.upsert(project, upsertInput(key, op.config, closesAt)))
        model.configure(op.config, closesAt)
        expected = { ...model.view(key), created: false, crossed: model.crossed() }
        break
      }
      case 'retry':
        throw new Error('a retry is resolved to the request it repeats')
    }
    check(step, op, actual, expected)
    stats.set(`${op.t}:${outcomeOf(expected)}`, (stats.get(`${op.t}:${outcomeOf(expected)}`) ?? 0) + 1)
    // Every call that touched the budget told onCrossed exactly the limits it pushed past.
    const crossed = model.crossed()
    expect(notified, `crossed notification at step ${step}:\n${log.slice(-6).join('\n')}`).toEqual(crossed.length > 0 ? crossed : undefined)
    // Answers without a balance: read it at the same instant (the read changes nothing more).
    if (!('balance' in actual)) check(step, { t: 'get' }, normalize(await service.get(project, key)), model.get(key))
  }
  const end = normalize(await service.get(project, key))
  check(ops.length + 1, { t: 'get' }, end, model.get(key))
}

/** The first configuration is open most of the time, so that sequences get past budget_closed. */
const initialConfigArb = fc.oneof({ weight: 4, arbitrary: configArb.map((c) => ({ ...c, closes: 'open' as const })) }, { weight: 1, arbitrary: configArb })
const startArb = fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2026, 0, 1) })

// Regressions: each of these failed against the scripts as first written (see the report that
// came with these tests); the sequences below found them.
describe('examples', () => {
  test('settle or release of an unknown hold answers hold_not_found (README: settle / release precedence)', async () => {
    const service = new BudgetService(redis, manualClock(Date.UTC(2025, 0, 15, 12)))
    const key = `unknown${++runs}`
    await service.upsert(project, { key, limits: [{ id: 'n', window: 'never', enforce: 'hard', amount: '10' }] })
    const outcomes: string[] = []
    for (const call of [
      () => service.release(project, { key, holdId: 'h_1' }),
      () => service.settle(project, { key, holdId: 'h_1', amount: '1' }),
      () => service.settle(project, { key, holdId: 'h_999', amount: '0' }),
    ]) {
      const r = await call().catch((error: unknown) => ({ ok: false as const, reason: `threw: ${String(error).slice(0, 120)}` }))
      outcomes.push(r.ok ? 'ok' : r.reason)
    }
    expect(outcomes).toEqual(['hold_not_found', 'hold_not_found', 'hold_not_found'])
  })

  test('a settle of an unknown hold does not half-apply a due expiry (bad input never corrupts state)', async () => {
    const clock = manualClock(Date.UTC(2025, 0, 15, 12))
    const service = new BudgetService(redis, clock)
    const key = `halfexpired${++runs}`
    await service.upsert(project, { key, limits: [{ id: 'n', window: 'never', enforce: 'hard', amount: '10' }] })
    const hold = await service.authorize(project, { key, amount: '3', ttlMs: 1_000, idempotencyKey: 'a' })
    if (!hold.ok) throw new Error(hold.message)
    const h1Id = hold.value.holdId
    clock.advance(1_000) // h_1 is due: the next touch settles it at its full amount
    await service.release(project, { key, holdId: 'h_2' }).catch(() => undefined) // a hold that does not exist
    const got = await service.get(project, key)
    if (!got.ok) throw new Error(got.reason)
    // h_1 expired: 3 consumed, nothing held, and its outcome says so.
    expect({ held: got.value.balance.held, consumed: got.value.balance.limits[0]!.consumed }).toEqual({ held: '0', consumed: '3' })
    const h1 = await service.settle(project, { key, holdId: h1Id, amount: '3' })
    expect(h1.ok && h1.value.settledBy).toBe('expiry')
  })

  test('a hold expired on the way by an authorize stays expired (its expiry is applied once)', async () => {
    const clock = manualClock(Date.UTC(2025, 0, 15, 12))
    const service = new BudgetService(redis, clock)
    const key = `authexpiry${++runs}`
    await service.upsert(project, { key, limits: [{ id: 'n', window: 'never', enforce: 'hard', amount: '10' }] })
    const first = await service.authorize(project, { key, amount: '3', ttlMs: 1_000, idempotencyKey: 'a1' })
    if (!first.ok) throw new Error(first.message)
    const h1Id = first.value.holdId
    clock.advance(1_000)
    // This authorize is the first touch after h_1's deadline: it settles h_1 at 3 on the way.
    const h2 = await service.authorize(project, { key, amount: '1', ttlMs: 60_000, idempotencyKey: 'a2' })
    expect(h2.ok && { held: h2.value.balance.held, consumed: h2.value.balance.limits[0]!.consumed }).toEqual({ held: '1', consumed: '3' })
    // Settling h_1 for its full amount replays the expiry; it must not apply it a second time.
    const s1 = await service.settle(project, { key, holdId: h1Id, amount: '3' })
    expect(s1.ok && { replayed: s1.value.replayed, settledBy: s1.value.settledBy }).toEqual({ replayed: true, settledBy: 'expiry' })
    const got = await service.get(project, key)
    expect(got.ok && { held: got.value.balance.held, consumed: got.value.balance.limits[0]!.consumed }).toEqual({ held: '1', consumed: '3' })
    // And a release of h_1 is refused as expired, changing nothing.
    const r1 = await service.release(project, { key, holdId: h1Id })
    expect(r1.ok ? 'ok' : r1.reason).toBe('hold_expired')
    const after = await service.get(project, key)
    expect(after.ok && { held: after.value.balance.held, consumed: after.value.balance.limits[0]!.consumed }).toEqual({ held: '1', consumed: '3' })
  })

  test('an expiry applied by upsert that pushes a limit past its amount is notified (onCrossed: "whatever the operation")', async () => {
    const clock = manualClock(Date.UTC(2025, 0, 15, 12))
    const calls: Crossed[][] = []
    const service = new BudgetService(redis, clock, {
      onCrossed: (_p, _k, crossed) => {
        calls.push(crossed)
      },
    })
    const key = `upsertcross${++runs}`
    const limits: UpsertInput['limits'] = [{ id: 'n', window: 'never', enforce: 'hard', amount: '10' }]
    await service.upsert(project, { key, limits })
    expect((await service.authorize(project, { key, amount: '8', ttlMs: 1_000, idempotencyKey: 'a' })).ok).toBe(true)
    expect((await service.record(project, { key, amount: '5', idempotencyKey: 'r' })).ok).toBe(true) // consumed 5 ≤ 10
    clock.advance(1_000)
    // The first touch after the deadline is a re-configuration: it expires h_1 (consumed 5 → 13).
    await service.upsert(project, { key, limits })
    const got = await service.get(project, key)
    expect(got.ok && got.value.balance.limits[0]!.consumed).toBe('13')
    expect(calls).toEqual([[{ limitId: 'n', enforce: 'hard', window: 'never', amount: '10', consumed: '13' }]])
  })
})

describe('budget service vs reference model', () => {
  test('random operation sequences agree step by step', async () => {
    await fc.assert(
      fc.asyncProperty(
        startArb,
        initialConfigArb,
        fc.integer({ min: 1, max: 4 * HOUR_MS }),
        fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
        runSequence,
      ),
      { numRuns: 400 },
    )
  })

  test('hold-heavy sequences: many holds, deadlines and boundaries', async () => {
    const holdOps = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({ t: fc.constant('authorize' as const), amount: amountArb, pad: fc.constant(0), ttlMs: ttlArb, idem: fc.constant(null) }),
      },
      {
        weight: 3,
        arbitrary: fc.record({
          t: fc.constant('settle' as const),
          hold: fc.integer({ min: 1, max: 25 }),
          amount: fc.oneof(amountArb, fc.constant<'full'>('full')),
          pad: fc.constant(0),
        }),
      },
      { weight: 1, arbitrary: fc.record({ t: fc.constant('release' as const), hold: fc.integer({ min: 1, max: 25 }) }) },
      { weight: 1, arbitrary: fc.constant({ t: 'sweep' as const }) },
      { weight: 4, arbitrary: tickArb.map((tick) => ({ t: 'tick' as const, tick })) },
    ) as fc.Arbitrary<Op>
    const bigLimits = configArb.map((c) => ({ ...c, closes: 'open' as const, limits: c.limits.map((l) => ({ ...l, amount: l.amount * 4n })) }))
    await fc.assert(fc.asyncProperty(startArb, bigLimits, fc.constant(1), fc.array(holdOps, { minLength: 10, maxLength: 80, size: 'max' }), runSequence), {
      numRuns: 150,
    })
  })
})
