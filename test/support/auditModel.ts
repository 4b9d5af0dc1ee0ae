// The auditor's reference model (test/integration/auditor.test.ts): what the gateway should
// decide and show for a workload, written from the rules of the domain READMEs (src/entitlements,
// src/events "Accepted and refused usage", src/runs, src/wallet, src/invoices,
// src/notifications), never from the system's code. Amounts are BigInt units of 10^-8 (ledger
// scale 8 for money, quantity units for usage); no float ever holds an amount.
//
// What the model covers, and so what the generator may produce:
// - sum meters only, one feature per event slug, unit prices (no tiers, packages or fees: the
//   model would have to copy the rating engine), limits from the subscription grant alone (no
//   document grants), overage `none` or `always`, one open-ended phase per subscription, in UTC,
//   billing cycles and reset periods laid from its start as whole numbers of minutes;
// - runs whose clock never moves while they are open (no expiry, no credit expiring under a run);
// - invoices closed only after the ingest queue is idle and the journal drained, so every
//   accepted row of a cycle is in ClickHouse when it closes (late usage is then exactly the rows
//   of events recorded after the close).

export const UNIT = 100_000_000n
export const MINUTE_MS = 60_000
export const HOUR_MS = 3_600_000
export const DAY_MS = 86_400_000
/** Minor units of USD to ledger scale 8: one cent is 10^6. */
const MINOR = 1_000_000n
/** The late-usage window and the most earlier cycles re-read per close (src/invoices/README.md, "Late usage"). */
const LATE_WINDOW_MS = 35 * DAY_MS
const MAX_LATE_CYCLES = 12

export type Strategy = 'none' | 'always'

export interface FeatureDef {
  slug: string
  eventSlug: string
  /** The meter's aggregationField (sum). */
  field: string
}

export interface PlanFeatureDef {
  featureSlug: string
  /** Unit price, a decimal string in USD. */
  price: string
  /** Whole units per reset period; null: no limit. */
  limit: number | null
  overage: Strategy
  /** Reset period length; the billing cycle's when equal to it. */
  resetMinutes: number
}

export interface PlanDef {
  slug: string
  /** The billing cycle, laid from the subscription's start. */
  cycleMinutes: number
  features: PlanFeatureDef[]
}

export interface World {
  t0: number
  features: FeatureDef[]
  plans: PlanDef[]
  /**
   * plan null: a customer of the catalog without a subscription (no entitlements). startAt: when
   * its subscription starts (default t0).
   */
  customers: { id: string; plan: string | null; startAt?: number }[]
}

// ---- decimals -------------------------------------------------------------------------------

/** A decimal string ("12.5", "-3", "0.00000001", "12.50000000") as units of 10^-8. */
export function units(text: string | number): bigint {
  const m = /^(-?)([0-9]+)(?:\.([0-9]{1,8}))?$/.exec(String(text))
  if (!m) throw new RangeError(`not a decimal with at most 8 fractional digits: ${JSON.stringify(text)}`)
  const value = BigInt(m[2]!) * UNIT + BigInt((m[3] ?? '').padEnd(8, '0'))
  return m[1] === '-' ? -value : value
}

/** Units of 10^-8 as the shortest decimal string ("12.5", "-3"). */
export function decimal(value: bigint): string {
  const negative = value < 0n
  const abs = negative ? -value : value
  const fraction = (abs % UNIT).toString().padStart(8, '0').replace(/0+$/, '')
  return `${negative ? '-' : ''}${abs / UNIT}${fraction === '' ? '' : `.${fraction}`}`
}

/** n / d rounded half to even (d > 0). */
function divHalfEven(n: bigint, d: bigint): bigint {
  const negative = n < 0n
  const a = negative ? -n : n
  let q = a / d
  const r2 = (a % d) * 2n
  if (r2 > d || (r2 === d && q % 2n === 1n)) q += 1n
  return negative ? -q : q
}

/** quantity × unit price at ledger scale 8, exact, rounded once half to even (src/billing/README.md, rule 1). */
export function priceOf(quantity: bigint, price: string): bigint {
  const [whole, fraction = ''] = price.split('.')
  const scale = BigInt(fraction.length)
  const priceUnits = BigInt(whole! + fraction)
  // quantity · 10^-8 × priceUnits · 10^-scale, at scale 8: quantity × priceUnits / 10^scale.
  return divHalfEven(quantity * priceUnits, 10n ** scale)
}

/** The smaller of two bigints (Math.min takes numbers only). */
function smaller(a: bigint, b: bigint): bigint {
  return a < b ? a : b
}

function ceilDiv(n: bigint, d: bigint): bigint {
  return n <= 0n ? 0n : (n + d - 1n) / d
}

// ---- the catalog as a config document --------------------------------------------------------

function cadence(minutes: number, kind: 'billing' | 'reset'): Record<string, unknown> {
  const interval = minutes === 10080 ? { i: 'week', n: 1 } : minutes === 1440 ? { i: 'day', n: 1 } : { i: 'minute', n: minutes }
  return kind === 'billing'
    ? { billingInterval: interval.i, ...(interval.n === 1 ? {} : { billingIntervalCount: interval.n }) }
    : { resetInterval: interval.i, ...(interval.n === 1 ? {} : { resetIntervalCount: interval.n }) }
}

/** The world's catalog as a `POST /v1/config/apply` document. */
export function catalogDocument(world: World): Record<string, unknown> {
  return {
    features: world.features.map((f) => ({
      slug: f.slug,
      title: f.slug,
      unitOfMeasure: 'units',
      meterConfig: { eventSlug: f.eventSlug, aggregationMethod: 'sum', aggregationField: f.field },
    })),
    plans: world.plans.map((p) => ({ slug: p.slug, title: p.slug })),
    planVersions: world.plans.map((p) => ({
      plan: p.slug,
      version: 1,
      status: 'published',
      title: p.slug,
      currency: 'USD',
      whenToBill: 'pay_in_arrear',
      billingConfig: cadence(p.cycleMinutes, 'billing'),
      features: p.features.map((f) => ({
        featureSlug: f.featureSlug,
        featureType: 'usage',
        config: { usageMode: 'unit', price: f.price },
        ...(f.limit === null ? {} : { limit: f.limit }),
        ...(f.resetMinutes === p.cycleMinutes ? {} : { resetConfig: cadence(f.resetMinutes, 'reset') }),
        metadata: { overageStrategy: f.overage },
      })),
    })),
    customers: world.customers.map((c) => ({ id: c.id })),
    subscriptions: world.customers
      .filter((c) => c.plan !== null)
      .map((c) => ({ id: subscriptionIdOf(c.id), customerId: c.id, phases: [{ plan: c.plan, version: 1, startAt: c.startAt ?? world.t0 }] })),
  }
}

export function subscriptionIdOf(customerId: string): string {
  return `sub-${customerId}`
}

// ---- state -----------------------------------------------------------------------------------

interface Counter {
  periodStart: number
  periodEnd: number
  usage: bigint
  refused: bigint
  reached: boolean
}

export interface ReachedDecision {
  customerId: string
  featureSlug: string
  used: bigint
  limit: bigint
  periodStartAt: number
  resetsAt: number
  denied: boolean
  overageStrategy: Strategy
  source: 'ingest' | 'run'
  runId?: string
  createdAt: number
}

export interface UsageRow {
  customerId: string
  /** The row's feature: the feature whose meter took the event, else the event slug. */
  featureSlug: string
  value: bigint
  tsMs: number
  status: 'accepted' | 'refused'
}

export interface RawEvent {
  customerId: string
  eventSlug: string
  id?: string
  idempotencyKey?: string
  timestamp?: number
  properties: Record<string, string>
}

export type CreditSource = 'promo' | 'manual' | 'refund' | 'goodwill' | 'trial'

interface Credit {
  id: string
  seq: bigint
  source: CreditSource
  priority: number
  createdAt: number
  /** 0: never. */
  expiresAt: number
  available: bigint
  held: bigint
}

export type JournalKind = 'top_up' | 'credit_grant' | 'credit_expiry' | 'credit_use' | 'cash_use' | 'hold' | 'capture' | 'release'
export const JOURNAL_KINDS: readonly JournalKind[] = ['top_up', 'credit_grant', 'credit_expiry', 'credit_use', 'cash_use', 'hold', 'capture', 'release']

interface Wallet {
  cash: bigint
  cashHeld: bigint
  credits: Credit[]
  /** The sum of the journal's movements per kind (ledger scale 8). */
  journal: Record<JournalKind, bigint>
  topUps: Set<string>
}

interface Allocation {
  creditId: string | null
  amount: bigint
}

export interface ModelRun {
  id: string
  customerId: string
  parent: ModelRun | undefined
  kids: ModelRun[]
  budgetMinor: bigint
  consumedMinor: bigint
  kidsHeldMinor: bigint
  status: 'running' | 'completed' | 'canceled' | 'failed'
  /** A root's reservation at the wallet, in order. */
  allocations: Allocation[]
  /** Per feature, the cost so far at ledger scale 8. */
  cost: Map<string, bigint>
  consumes: Map<string, bigint>
}

export interface InvoiceExpectation {
  id: string
  customerId: string
  cycleStart: number
  cycleEnd: number
  /** Per plan feature: the cycle's accepted usage and its amount. */
  usage: Map<string, { quantity: bigint; amount: bigint }>
  /** Per earlier cycle and feature: late usage billed here. */
  adjustments: { featureSlug: string; cycleStart: number; quantity: bigint; amount: bigint }[]
  gross: bigint
  paid: bigint
  due: bigint
}

interface Subscription {
  customerId: string
  plan: PlanDef
  startAt: number
  /** The start of the next cycle to close. */
  cursor: number
  /** What each closed cycle billed, per feature. */
  billed: Map<number, Map<string, bigint>>
}

export type ConsumeReason = 'accepted' | 'duplicate' | 'not_running' | 'entitlement_denied' | 'insufficient_budget'

// ---- the model ---------------------------------------------------------------------------------

export class AuditModel {
  readonly counters = new Map<string, Counter>()
  readonly reached: ReachedDecision[] = []
  readonly rows: UsageRow[] = []
  readonly wallets = new Map<string, Wallet>()
  readonly runs = new Map<string, ModelRun>()
  readonly invoices: InvoiceExpectation[] = []
  private readonly seen = new Set<string>()
  private readonly subscriptions: Subscription[]
  private readonly subscriptionOf = new Map<string, Subscription>()

  constructor(
    readonly world: World,
    private readonly invoiceIdOf: (customerId: string, subscriptionId: string, cycleStart: number) => string,
  ) {
    this.subscriptions = world.customers.flatMap((c) => {
      const plan = world.plans.find((p) => p.slug === c.plan)
      const startAt = c.startAt ?? world.t0
      return plan ? [{ customerId: c.id, plan, startAt, cursor: startAt, billed: new Map() }] : []
    })
    for (const sub of this.subscriptions) this.subscriptionOf.set(sub.customerId, sub)
  }

  /** The customer's entitlement to a feature (its plan feature) at any time, or (with `at`) in effect at `at`. */
  entitlement(customerId: string, featureSlug: string, at?: number): PlanFeatureDef | undefined {
    const sub = this.subscriptionOf.get(customerId)
    if (!sub || (at !== undefined && at < sub.startAt)) return undefined
    return sub.plan.features.find((f) => f.featureSlug === featureSlug)
  }

  /** The plan features a customer is entitled to at `at` (what the entitlement routes list). */
  entitlementsAt(customerId: string, at: number): PlanFeatureDef[] {
    const sub = this.subscriptionOf.get(customerId)
    return sub && at >= sub.startAt ? sub.plan.features : []
  }

  /** The start of the customer's billing cycle holding `at` (t0 for a customer without a subscription). */
  cycleStartAt(customerId: string, at: number): number {
    const sub = this.subscriptionOf.get(customerId)
    if (!sub) return this.world.t0
    const len = sub.plan.cycleMinutes * MINUTE_MS
    return sub.startAt + Math.floor((at - sub.startAt) / len) * len
  }

  /** The earliest end of a billing cycle of any subscription after `now`. */
  nextCycleEnd(now: number): number {
    return Math.min(
      ...this.subscriptions.map((sub) => {
        const len = sub.plan.cycleMinutes * MINUTE_MS
        return now < sub.startAt ? sub.startAt + len : sub.startAt + (Math.floor((now - sub.startAt) / len) + 1) * len
      }),
    )
  }

  limitUnits(pf: PlanFeatureDef): bigint {
    // No limit: the catalog counts against UNLIMITED (Number.MAX_SAFE_INTEGER units), which no usage reaches.
    return BigInt(pf.limit ?? Number.MAX_SAFE_INTEGER) * UNIT
  }

  /** The reset period holding `at`, laid from the start of the customer's subscription (its entitlements' start). */
  period(customerId: string, pf: PlanFeatureDef, at: number): { start: number; end: number } {
    const from = this.subscriptionOf.get(customerId)!.startAt
    const len = pf.resetMinutes * MINUTE_MS
    const start = from + Math.floor((at - from) / len) * len
    return { start, end: start + len }
  }

  /** The counters of the period holding `at` (fresh when the stored ones are of an earlier period). */
  private counter(customerId: string, pf: PlanFeatureDef, at: number): Counter {
    const key = `${customerId}\0${pf.featureSlug}`
    const { start, end } = this.period(customerId, pf, at)
    const stored = this.counters.get(key)
    if (stored && stored.periodStart === start) return stored
    if (stored && stored.periodStart > start) throw new Error(`the model counted a later period first (${key})`)
    return { periodStart: start, periodEnd: end, usage: 0n, refused: 0n, reached: false }
  }

  /**
   * The overage strategy's decision (src/entitlements/README.md, "Overage strategies"): none
   * allows an amount while usage + amount ≤ limit, always allows everything; both refuse once
   * usage ≥ limit under none.
   */
  allows(customerId: string, pf: PlanFeatureDef, amount: bigint, at: number): boolean {
    if (pf.overage === 'always') return true
    const c = this.counter(customerId, pf, at)
    const limit = this.limitUnits(pf)
    return c.usage < limit && c.usage + amount <= limit
  }

  /** Counts an amount (mode count): accepted or refused, and the limit.reached decision it makes, if any. */
  private count(customerId: string, pf: PlanFeatureDef, amount: bigint, at: number, source: { kind: 'ingest' | 'run'; runId?: string }): boolean {
    const c = this.counter(customerId, pf, at)
    const allowed = this.allows(customerId, pf, amount, at)
    if (allowed) c.usage += amount
    else c.refused += amount
    const limit = this.limitUnits(pf)
    if (c.usage >= limit && !c.reached) {
      c.reached = true
      this.reached.push({
        customerId,
        featureSlug: pf.featureSlug,
        used: c.usage,
        limit,
        periodStartAt: c.periodStart,
        resetsAt: c.periodEnd,
        denied: pf.overage !== 'always',
        overageStrategy: pf.overage,
        source: source.kind,
        ...(source.runId === undefined ? {} : { runId: source.runId }),
        createdAt: at,
      })
    }
    this.counters.set(`${customerId}\0${pf.featureSlug}`, c)
    return allowed
  }

  /** What the entitlement routes should show for a customer's feature at `now` (metadata.usage). */
  shownUsage(customerId: string, pf: PlanFeatureDef, now: number) {
    const c = this.counter(customerId, pf, now)
    const limit = this.limitUnits(pf)
    return {
      usage: c.usage,
      refused: c.refused,
      overage: c.usage > limit ? c.usage - limit : 0n,
      limit: pf.limit === null ? null : limit,
      remaining: pf.limit === null ? null : limit - c.usage,
      periodStartAt: c.periodStart,
      periodEndAt: c.periodEnd,
      denied: pf.overage !== 'always' && c.usage >= limit,
    }
  }

  // ---- usage events ----

  /**
   * One event the gateway accepted at `receivedMs` (answered accepted: true whatever happens to
   * its usage). An event id seen before (its `id`, else one derived from its idempotencyKey) is
   * a copy: the gateway's dedup window may drop it (same key) or queue it (another key, or the
   * window passed), and then the claim finds the id owned by its first batch; either way it is
   * neither counted nor stored again (src/events/README.md, src/entitlements/README.md).
   */
  record(event: RawEvent, receivedMs: number): void {
    const key = event.id ?? (event.idempotencyKey === undefined ? undefined : `ik:${event.idempotencyKey}`)
    if (key !== undefined) {
      if (this.seen.has(key)) return
      this.seen.add(key)
    }
    const tsMs = event.timestamp ?? receivedMs
    const feature = this.world.features.find((f) => f.eventSlug === event.eventSlug)
    const pf = feature && this.entitlement(event.customerId, feature.slug)
    if (!feature || !pf) {
      // No meter of the customer's takes it: one accepted row under the event slug, valued
      // properties.value (else 1): src/events/README.md, "value".
      const raw = event.properties.value
      this.rows.push({ customerId: event.customerId, featureSlug: event.eventSlug, value: raw === undefined ? UNIT : units(raw), tsMs, status: 'accepted' })
      return
    }
    const amount = units(event.properties[feature.field]!)
    // The row names the feature (an entitlement of it exists, at some time); it is counted only
    // when one is in effect at the instant the gateway accepted the event, else accepted as is.
    const inEffect = this.entitlement(event.customerId, feature.slug, receivedMs) !== undefined
    const accepted = inEffect ? this.count(event.customerId, pf, amount, receivedMs, { kind: 'ingest' }) : true
    this.rows.push({ customerId: event.customerId, featureSlug: feature.slug, value: amount, tsMs, status: accepted ? 'accepted' : 'refused' })
  }

  // ---- wallets ----

  wallet(customerId: string): Wallet {
    let w = this.wallets.get(customerId)
    if (!w) {
      w = {
        cash: 0n,
        cashHeld: 0n,
        credits: [],
        journal: Object.fromEntries(JOURNAL_KINDS.map((k) => [k, 0n])) as Record<JournalKind, bigint>,
        topUps: new Set(),
      }
      this.wallets.set(customerId, w)
    }
    return w
  }

  private static live(c: Credit, now: number): boolean {
    return c.expiresAt === 0 || c.expiresAt > now
  }

  /** Credits in the order they are consumed: priority, then the earliest expiry (never last), then the oldest. */
  private static ordered(w: Wallet): Credit[] {
    const expiry = (c: Credit) => (c.expiresAt === 0 ? Number.POSITIVE_INFINITY : c.expiresAt)
    return [...w.credits].sort((a, b) => b.priority - a.priority || expiry(a) - expiry(b) || a.createdAt - b.createdAt || (a.seq < b.seq ? -1 : 1))
  }

  /** The available part of every credit past its expiry expires (what any wallet script does first). */
  expire(customerId: string, now: number): void {
    const w = this.wallet(customerId)
    for (const c of w.credits) {
      if (!AuditModel.live(c, now) && c.available > 0n) {
        w.journal.credit_expiry += c.available
        c.available = 0n
      }
    }
  }

  available(customerId: string, now: number): bigint {
    const w = this.wallet(customerId)
    return w.cash + w.credits.filter((c) => AuditModel.live(c, now)).reduce((s, c) => s + c.available, 0n)
  }

  /** Takes up to `amount` from live credits in order, then cash. */
  private take(w: Wallet, amount: bigint, now: number): Allocation[] {
    const out: Allocation[] = []
    let rest = amount
    for (const c of AuditModel.ordered(w)) {
      if (rest === 0n) break
      if (!AuditModel.live(c, now) || c.available === 0n) continue
      const part = smaller(c.available, rest)
      c.available -= part
      rest -= part
      out.push({ creditId: c.id, amount: part })
    }
    if (rest > 0n && w.cash > 0n) {
      const part = smaller(w.cash, rest)
      w.cash -= part
      out.push({ creditId: null, amount: part })
    }
    return out
  }

  /** A top-up: false when its key was used before (a replay moves nothing). */
  topUp(customerId: string, amount: bigint, idempotencyKey: string, now: number): boolean {
    this.expire(customerId, now)
    const w = this.wallet(customerId)
    if (w.topUps.has(idempotencyKey)) return false
    w.topUps.add(idempotencyKey)
    w.cash += amount
    w.journal.top_up += amount
    return true
  }

  grant(customerId: string, creditId: string, c: { amount: bigint; source: CreditSource; priority: number; expiresAt: number | null }, now: number): void {
    this.expire(customerId, now)
    const w = this.wallet(customerId)
    const seq = BigInt(/([0-9]+)$/.exec(creditId)![1]!)
    w.credits.push({ id: creditId, seq, source: c.source, priority: c.priority, createdAt: now, expiresAt: c.expiresAt ?? 0, available: c.amount, held: 0n })
    w.journal.credit_grant += c.amount
  }

  /** The balance as GET /v1/wallet/balance should answer it: totals and the live credits listed, in order. */
  balance(customerId: string, now: number) {
    this.expire(customerId, now)
    const w = this.wallet(customerId)
    const listed = AuditModel.ordered(w).filter((c) => AuditModel.live(c, now) && (c.available > 0n || c.held > 0n))
    return {
      available: this.available(customerId, now),
      held: w.cashHeld + w.credits.reduce((s, c) => s + c.held, 0n),
      credits: listed.map((c) => ({ id: c.id, source: c.source, priority: c.priority, available: c.available })),
    }
  }

  // ---- runs ----

  /** Whether a root run of this budget can start now (else 402 insufficient_funds), before it is given an id. */
  canStartRoot(customerId: string, budgetMinor: bigint, now: number): boolean {
    this.expire(customerId, now)
    return this.available(customerId, now) >= budgetMinor * MINOR
  }

  startRoot(runId: string, customerId: string, budgetMinor: bigint, now: number): ModelRun {
    const w = this.wallet(customerId)
    const allocations = this.take(w, budgetMinor * MINOR, now)
    for (const a of allocations) {
      if (a.creditId === null) w.cashHeld += a.amount
      else w.credits.find((c) => c.id === a.creditId)!.held += a.amount
      w.journal.hold += a.amount
    }
    return this.addRun(runId, customerId, undefined, budgetMinor, allocations)
  }

  remaining(run: ModelRun): bigint {
    return run.budgetMinor - run.consumedMinor - run.kidsHeldMinor
  }

  /** Whether a child of this budget fits its parent's remaining (else 402 insufficient_budget). */
  canStartChild(parent: ModelRun, budgetMinor: bigint): boolean {
    return parent.status === 'running' && budgetMinor <= this.remaining(parent)
  }

  startChild(runId: string, parent: ModelRun, budgetMinor: bigint): ModelRun {
    parent.kidsHeldMinor += budgetMinor
    const run = this.addRun(runId, parent.customerId, parent, budgetMinor, [])
    parent.kids.push(run)
    return run
  }

  private addRun(id: string, customerId: string, parent: ModelRun | undefined, budgetMinor: bigint, allocations: Allocation[]): ModelRun {
    const run: ModelRun = {
      id,
      customerId,
      parent,
      kids: [],
      budgetMinor,
      consumedMinor: 0n,
      kidsHeldMinor: 0n,
      status: 'running',
      allocations,
      cost: new Map(),
      consumes: new Map(),
    }
    this.runs.set(id, run)
    return run
  }

  /**
   * A consume (src/runs/README.md, "Consume"): priced with the entitlement's unit price; each
   * feature's cost over the run rounded up to whole cents once; checked against the entitlement
   * (nothing counted when refused) before the run's remaining.
   */
  consume(run: ModelRun, featureSlug: string, quantity: bigint, idempotencyKey: string, now: number): { reason: ConsumeReason; costMinor: bigint } {
    const known = run.consumes.get(idempotencyKey)
    if (known !== undefined) return { reason: 'duplicate', costMinor: known }
    if (run.status !== 'running') return { reason: 'not_running', costMinor: 0n }
    const pf = this.entitlement(run.customerId, featureSlug, now)
    if (!pf || !this.allows(run.customerId, pf, quantity, now)) return { reason: 'entitlement_denied', costMinor: 0n }
    const before = run.cost.get(featureSlug) ?? 0n
    const after = before + priceOf(quantity, pf.price)
    const costMinor = ceilDiv(after, MINOR) - ceilDiv(before, MINOR)
    if (costMinor > this.remaining(run)) return { reason: 'insufficient_budget', costMinor }
    run.cost.set(featureSlug, after)
    run.consumedMinor += costMinor
    run.consumes.set(idempotencyKey, costMinor)
    this.count(run.customerId, pf, quantity, now, { kind: 'run', runId: run.id })
    this.rows.push({ customerId: run.customerId, featureSlug, value: quantity, tsMs: now, status: 'accepted' })
    return { reason: 'accepted', costMinor }
  }

  /** Ends a run: its running descendants first (canceled); a child gives its consumption to its parent, a root settles at the wallet. */
  end(run: ModelRun, status: 'completed' | 'canceled' | 'failed', now: number): void {
    for (const kid of run.kids) if (kid.status === 'running') this.end(kid, 'canceled', now)
    run.status = status
    if (run.parent) {
      run.parent.consumedMinor += run.consumedMinor
      run.parent.kidsHeldMinor -= run.budgetMinor
      return
    }
    const w = this.wallet(run.customerId)
    let toCapture = run.consumedMinor * MINOR
    for (const a of run.allocations) {
      const used = smaller(toCapture, a.amount)
      toCapture -= used
      if (a.creditId === null) {
        w.cashHeld -= a.amount
        w.cash += a.amount - used
      } else {
        const c = w.credits.find((x) => x.id === a.creditId)!
        c.held -= a.amount
        c.available += a.amount - used
      }
      w.journal.capture += used
      w.journal.release += a.amount - used
    }
  }

  openRuns(): ModelRun[] {
    return [...this.runs.values()].filter((r) => r.status === 'running')
  }

  // ---- invoices ----

  private acceptedUsage(customerId: string, featureSlug: string, from: number, to: number): bigint {
    let sum = 0n
    for (const r of this.rows)
      if (r.customerId === customerId && r.featureSlug === featureSlug && r.status === 'accepted' && r.tsMs >= from && r.tsMs < to) sum += r.value
    return sum
  }

  /** Closes every cycle that ended by `now` (of one customer, or all), in order: the invoices the close should create. */
  closeDue(now: number, customerId?: string): InvoiceExpectation[] {
    const out: InvoiceExpectation[] = []
    for (const sub of this.subscriptions) {
      if (customerId !== undefined && sub.customerId !== customerId) continue
      const len = sub.plan.cycleMinutes * MINUTE_MS
      while (sub.cursor + len <= now) {
        out.push(this.closeCycle(sub, sub.cursor, sub.cursor + len, now))
        sub.cursor += len
      }
    }
    this.invoices.push(...out)
    return out
  }

  private closeCycle(sub: Subscription, start: number, end: number, now: number): InvoiceExpectation {
    const usage = new Map<string, { quantity: bigint; amount: bigint }>()
    const billedNow = new Map<string, bigint>()
    for (const pf of sub.plan.features) {
      const quantity = this.acceptedUsage(sub.customerId, pf.featureSlug, start, end)
      usage.set(pf.featureSlug, { quantity, amount: priceOf(quantity, pf.price) })
      billedNow.set(pf.featureSlug, quantity)
    }
    const adjustments: InvoiceExpectation['adjustments'] = []
    const earlier = [...sub.billed.keys()].filter((s) => s < start).sort((a, b) => a - b)
    for (const [index, cycleStart] of earlier.entries()) {
      const cycleEnd = cycleStart + sub.plan.cycleMinutes * MINUTE_MS
      if (cycleEnd < start - LATE_WINDOW_MS || index < earlier.length - MAX_LATE_CYCLES) {
        sub.billed.delete(cycleStart)
        continue
      }
      const billed = sub.billed.get(cycleStart)!
      for (const pf of sub.plan.features) {
        const old = billed.get(pf.featureSlug) ?? 0n
        const fresh = this.acceptedUsage(sub.customerId, pf.featureSlug, cycleStart, cycleEnd)
        if (fresh === old) continue
        adjustments.push({ featureSlug: pf.featureSlug, cycleStart, quantity: fresh - old, amount: priceOf(fresh, pf.price) - priceOf(old, pf.price) })
        billed.set(pf.featureSlug, fresh)
      }
    }
    sub.billed.set(start, billedNow)
    const gross = [...usage.values()].reduce((s, u) => s + u.amount, 0n) + adjustments.reduce((s, a) => s + a.amount, 0n)
    this.expire(sub.customerId, now)
    const w = this.wallet(sub.customerId)
    const allocations = gross > 0n ? this.take(w, gross, now) : []
    for (const a of allocations) w.journal[a.creditId === null ? 'cash_use' : 'credit_use'] += a.amount
    const paid = allocations.reduce((s, a) => s + a.amount, 0n)
    return {
      id: this.invoiceIdOf(sub.customerId, subscriptionIdOf(sub.customerId), start),
      customerId: sub.customerId,
      cycleStart: start,
      cycleEnd: end,
      usage,
      adjustments,
      gross,
      paid,
      due: gross - paid,
    }
  }

  /** Accepted and refused usage per customer, row feature and status, as ClickHouse should hold it. */
  usageTotals(): Map<string, bigint> {
    const out = new Map<string, bigint>()
    for (const r of this.rows) {
      const key = `${r.customerId}|${r.featureSlug}|${r.status}`
      out.set(key, (out.get(key) ?? 0n) + r.value)
    }
    return out
  }
}
