import { cycleAt, FOREVER_MS } from '../catalog/cycles.js'
import type { AggregationMethod, Entitlement, Grant, MeterConfig, OverageStrategy } from '../catalog/schemas.js'
import type { AccessFlags, CustomerView } from '../catalog/types.js'
import { entitlementsAt } from '../catalog/views.js'
import { formatUnits, fromPair, toPair, UNITS_PER_ONE } from '../kernel/money.js'
import { entitlementStateKey, usageKey } from './keys.js'

/**
 * Usage counted against entitlements (src/entitlements/README.md): what TypeScript computes for
 * the Lua include (the reset period, the grants in effect, the event's amount under the meter),
 * and what the read routes show from the stored counters. Pure functions.
 */

export interface UsagePeriod {
  startMs: number
  /** Exclusive; 253402300799999 for a period that never ends (onetime). */
  endMs: number
}

/**
 * The reset period of an entitlement holding `atMs`: cycles of the plan feature's `resetConfig`
 * from the entitlement's start, laid in its subscription's time zone (UTC without one), cut at
 * the entitlement's end (src/catalog/cycles.ts, as the billing cycles are).
 */
export function resetPeriod(view: CustomerView, e: Entitlement, atMs: number): UsagePeriod {
  const zone = (e.subscriptionId !== null && view.subscriptions.find((s) => s.id === e.subscriptionId)?.timezone) || 'UTC'
  const r = e.featurePlanVersion.resetConfig
  const cycle = cycleAt(atMs, e.effectiveAt, e.expiresAt, { interval: r.resetInterval, count: r.resetIntervalCount, anchor: r.resetAnchor }, zone)
  return { startMs: cycle.start, endMs: cycle.end }
}

/** At most 20 integer digits (a Decimal(38, 8) row value with room to sum; Lua pairs stay exact). */
const QUANTITY = /^([0-9]{1,20})(?:\.([0-9]{1,8}))?$/

/**
 * A property value as units of 10^-8: a finite non-negative number below 10^20 (rounded to 8
 * fractional digits), or a decimal string of at most 20 integer and 8 fractional digits ("2.5"). Anything else (other
 * text, a negative, NaN, a boolean, an object) is undefined: not counted.
 */
export function quantityUnitsOf(value: unknown): bigint | undefined {
  let text: string
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0 || value >= 1e20) return undefined
    if (Number.isSafeInteger(value)) return BigInt(value) * UNITS_PER_ONE
    text = Number.isInteger(value) ? BigInt(value).toString() : value.toFixed(8)
  } else if (typeof value === 'string') {
    text = value
  } else {
    return undefined
  }
  const m = QUANTITY.exec(text)
  if (!m) return undefined
  return BigInt(m[1]!) * UNITS_PER_ONE + BigInt((m[2] ?? '').padEnd(8, '0'))
}

/**
 * What one event counts for under a meter, in units of 10^-8, or undefined when the meter does
 * not count it: another `eventSlug`, a `filters` property that differs, or (sum, max, latest) an
 * `aggregationField` that is not a number. `count` counts 1 per event.
 */
export function meterAmount(meter: MeterConfig, event: { eventSlug: string; properties?: Record<string, unknown> | undefined }): bigint | undefined {
  if (meter.eventSlug !== event.eventSlug) return undefined
  for (const [name, wanted] of Object.entries(meter.filters ?? {})) {
    if (event.properties?.[name] !== wanted) return undefined
  }
  if (meter.aggregationMethod === 'count') return UNITS_PER_ONE
  return quantityUnitsOf(event.properties?.[meter.aggregationField])
}

/** A grant's allowance in units of 10^-8. */
function allowanceOf(g: Grant): bigint {
  return quantityUnitsOf(g.allowanceUnits) ?? 0n
}

/** The number of arguments entitlementUsage takes (lua/includes/entitlementUsage.lua). */
export const ENTITLEMENT_ARGC = 11

export type EntitlementMode = 'count' | 'check'

export interface EntitlementUsageInput {
  featureSlug: string
  nowMs: number
  period: UsagePeriod
  strategy: OverageStrategy
  method: AggregationMethod
  amountUnits: bigint
  /** Orders `latest` values; the event's timestamp (nowMs for a synchronous check). */
  eventTsMs: number
  /** The grants in effect, highest priority first (as entitlementsAt orders them). */
  grants: readonly Grant[]
  mode: EntitlementMode
}

/** The grants argument of entitlementUsage: "<id>=<hi>:<lo>,..." (allowances), in the order given. */
export function grantsArg(grants: readonly Grant[]): string {
  return grants
    .map((g) => {
      const [gh, gl] = toPair(allowanceOf(g))
      return `${g.id}=${gh}:${gl}`
    })
    .join(',')
}

/** The 11 ARGV strings of entitlementUsage, in its order. `grantsText` saves building grantsArg again. */
export function entitlementUsageArgs(input: EntitlementUsageInput, grantsText?: string): string[] {
  const [hi, lo] = toPair(input.amountUnits)
  const grants = grantsText ?? grantsArg(input.grants)
  return [
    input.featureSlug,
    String(input.nowMs),
    String(input.period.startMs),
    String(input.period.endMs),
    input.strategy,
    input.method,
    String(hi),
    String(lo),
    String(input.eventTsMs),
    grants,
    input.mode,
  ]
}

/** The customer's entitlement to a feature in effect at `atMs` (with its grants in effect then), if any. */
export function entitlementFor(view: CustomerView, flags: AccessFlags, featureSlug: string, atMs: number): Entitlement | undefined {
  return entitlementsAt(view, flags, atMs).find((e) => e.featurePlanVersion.feature.slug === featureSlug)
}

/** A call of entitlementUsage: the two KEYS (usage hash, state hash) and the 11 ARGV. */
export interface EntitlementUsageCall extends CountedEntitlement {
  keys: [usage: string, state: string]
}

/** Which entitlement a call of entitlementUsage counts against, and its 11 ARGV. */
export interface CountedEntitlement {
  customerId: string
  entitlementId: string
  /** The entitlement's reset interval (month, day, …). */
  window: string
  args: string[]
}

/** What a count that took a customer's usage of a feature to its limit decided (limit.reached), exactly as the script answered it. */
export interface LimitReachedDecision {
  customerId: string
  featureSlug: string
  entitlementId: string
  /** The reset interval (month, day, …). */
  window: string
  overageStrategy: OverageStrategy
  /** Usage counted against the grants in effect after the count, decimal text of the feature's units. */
  used: string
  /** The sum of the allowances of the grants in effect, decimal text. */
  limit: string
  periodStartMs: number
  /** Exclusive; null for a period that never ends. */
  periodEndMs: number | null
  /** Whether the feature is denied from the decision to the period's end (none, last-call). */
  denied: boolean
  /** The decision's clock: when the gateway accepted the event, or the consume's now. */
  atMs: number
}

/**
 * The limit.reached decision of a count the script said reached the limit (lua/includes/
 * entitlementUsage.lua: usedUnits, limitUnits and deniedUntilMs of its reply), read with the
 * count's own arguments (period, strategy, clock).
 */
export function reachedDecisionOf(
  counted: CountedEntitlement,
  figures: { usedUnits: string; limitUnits: string; deniedUntilMs: number },
): LimitReachedDecision {
  const [featureSlug, nowMs, periodStart, periodEnd, strategy] = counted.args
  const endMs = Number(periodEnd)
  return {
    customerId: counted.customerId,
    featureSlug: featureSlug!,
    entitlementId: counted.entitlementId,
    window: counted.window,
    overageStrategy: strategy as OverageStrategy,
    used: formatUnits(BigInt(figures.usedUnits)),
    limit: formatUnits(BigInt(figures.limitUnits)),
    periodStartMs: Number(periodStart),
    periodEndMs: endMs >= FOREVER_MS ? null : endMs,
    denied: figures.deniedUntilMs > 0,
    atMs: Number(nowMs),
  }
}

/**
 * The KEYS and ARGV to check (and count) `amountUnits` of a feature for a customer at `nowMs`
 * inside a script of the project's slot: splice `keys` into KEYS and `args` into ARGV, and call
 * `entitlementUsage(KEYS[u], KEYS[s], ARGV, i)` with i the index of args[0]. undefined when the
 * customer has no entitlement to the feature in effect at `nowMs` (the caller decides: runs
 * treat it as entitlement_denied).
 */
export function prepareEntitlementUsage(
  projectId: string,
  customer: { view: CustomerView; flags: AccessFlags },
  featureSlug: string,
  amountUnits: bigint,
  nowMs: number,
  mode: EntitlementMode = 'count',
  eventTsMs = nowMs,
): EntitlementUsageCall | undefined {
  const e = entitlementFor(customer.view, customer.flags, featureSlug, nowMs)
  if (!e) return undefined
  return {
    keys: [usageKey(projectId, customer.view.customerId), entitlementStateKey(projectId, customer.view.customerId)],
    customerId: customer.view.customerId,
    entitlementId: e.id,
    window: e.featurePlanVersion.resetConfig.resetInterval,
    args: entitlementUsageArgs({
      featureSlug,
      nowMs,
      period: resetPeriod(customer.view, e, nowMs),
      strategy: e.overageStrategy,
      method: e.featurePlanVersion.meterConfig.aggregationMethod,
      amountUnits,
      eventTsMs,
      grants: e.grants ?? [],
      mode,
    }),
  }
}

// ---- the ingest path ------------------------------------------------------------------------

export interface CountableEvent {
  customerId: string
  eventSlug: string
  properties?: Record<string, unknown>
  timestampMs: number
  receivedMs: number
}

/**
 * A ClickHouse row of an event: the feature whose meter takes it and what that meter counts for
 * it (decimal text). An event no meter of its customer takes has none (it is stored once, under
 * its event slug, src/events/rows.ts).
 */
export interface EventRowFeature {
  featureSlug: string
  value: string
}

/** One count of one event against one feature: the event's index, the entitlement, and the include's arguments. */
export interface EventCount extends CountedEntitlement {
  event: number
}

/**
 * The counts of a batch's events of one project, and the feature each event's ClickHouse row
 * names. An event counts against every entitlement of its customer in effect when the gateway
 * accepted it (`receivedMs`) whose meter counts it, with the grants in effect then and in the
 * reset period holding that instant. Its row's feature is the feature named like the event
 * when one of the customer's entitlements (at any time) counts it, else the first such feature
 * by slug, else the event slug.
 */
export function countsOfEvents(
  events: readonly CountableEvent[],
  customers: ReadonlyMap<string, { view: CustomerView; flags: AccessFlags }>,
): { counts: EventCount[]; rows: EventRowFeature[][] } {
  const counts: EventCount[] = []
  const rows: EventRowFeature[][] = new Array(events.length)
  const memo = new BatchMemo()
  events.forEach((event, index) => {
    rows[index] = []
    const customer = customers.get(event.customerId)
    if (!customer) return
    // One ClickHouse row per feature whose meter takes the event, valued as that meter counts it,
    // so analytics and invoices of each feature sum what its counters count.
    for (const { slug, meter } of memo.rowFeaturesOf(customer.view, event.eventSlug)) {
      const amountUnits = meterAmount(meter, event)
      if (amountUnits !== undefined) rows[index]!.push({ featureSlug: slug, value: formatUnits(amountUnits) })
    }
    for (const e of memo.entitlementsOf(event.customerId, customer, event.receivedMs)) {
      const meter = e.featurePlanVersion.meterConfig
      const amountUnits = meterAmount(meter, event)
      if (amountUnits === undefined) continue
      const grantsText = memo.grantsTextOf(e)
      counts.push({
        event: index,
        customerId: event.customerId,
        entitlementId: e.id,
        window: e.featurePlanVersion.resetConfig.resetInterval,
        args: entitlementUsageArgs(
          {
            featureSlug: e.featurePlanVersion.feature.slug,
            nowMs: event.receivedMs,
            period: memo.periodOf(customer.view, e, event.receivedMs),
            strategy: e.overageStrategy,
            method: meter.aggregationMethod,
            amountUnits,
            eventTsMs: event.timestampMs,
            grants: e.grants ?? [],
            mode: 'count',
          },
          grantsText,
        ),
      })
    }
  })
  return { counts, rows }
}

/**
 * What countsOfEvents works out once per batch rather than once per event: a batch holds many
 * events of the same few customers, and each of these answers is the same for most of them.
 */
class BatchMemo {
  private readonly inEffect = new Map<string, { fromMs: number; untilMs: number; list: Entitlement[] }>()
  private readonly periods = new Map<string, UsagePeriod>()
  private readonly grantsTexts = new Map<Entitlement, string>()
  private readonly rowFeatures = new Map<string, { slug: string; meter: MeterConfig }[]>()

  /**
   * The customer's entitlements in effect at `at`. What is in effect changes only at the instants
   * the customer's document names: one answer per customer serves every event between two of them.
   */
  entitlementsOf(customerId: string, customer: { view: CustomerView; flags: AccessFlags }, at: number): Entitlement[] {
    const known = this.inEffect.get(customerId)
    if (known && known.fromMs <= at && at < known.untilMs) return known.list
    let fromMs = -Infinity
    let untilMs = Infinity
    for (const t of changesOf(customer.view)) {
      if (t <= at && t > fromMs) fromMs = t
      if (t > at && t < untilMs) untilMs = t
    }
    const list = entitlementsAt(customer.view, customer.flags, at)
    this.inEffect.set(customerId, { fromMs, untilMs, list })
    return list
  }

  /**
   * The reset period of `e` holding `at`. Periods are laid with Intl time zone arithmetic (tens of
   * µs): one per entitlement while the batch's instants stay inside it.
   */
  periodOf(view: CustomerView, e: Entitlement, at: number): UsagePeriod {
    const key = `${view.customerId}\0${e.id}`
    const known = this.periods.get(key)
    if (known && known.startMs <= at && at < known.endMs) return known
    const period = resetPeriod(view, e, at)
    this.periods.set(key, period)
    return period
  }

  /** The grants argument of `e`, built once per entitlement. */
  grantsTextOf(e: Entitlement): string {
    let grantsText = this.grantsTexts.get(e)
    if (grantsText === undefined) {
      grantsText = grantsArg(e.grants ?? [])
      this.grantsTexts.set(e, grantsText)
    }
    return grantsText
  }

  /**
   * The features whose meters take an event slug, for a customer: the one named like the event
   * first, then by slug (each feature once, whatever its entitlements).
   */
  rowFeaturesOf(view: CustomerView, eventSlug: string): { slug: string; meter: MeterConfig }[] {
    const key = `${view.customerId}\0${eventSlug}`
    const known = this.rowFeatures.get(key)
    if (known) return known
    const mapped = new Map<string, MeterConfig>()
    for (const e of view.entitlements) {
      const slug = e.featurePlanVersion.feature.slug
      if (e.featurePlanVersion.meterConfig.eventSlug === eventSlug && !mapped.has(slug)) mapped.set(slug, e.featurePlanVersion.meterConfig)
    }
    const list = [...mapped]
      .map(([slug, meter]) => ({ slug, meter }))
      .sort((a, b) => (a.slug === eventSlug ? -1 : b.slug === eventSlug ? 1 : a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0))
    this.rowFeatures.set(key, list)
    return list
  }
}

/** The instants at which what entitlementsAt answers for a customer may change. */
function changesOf(view: CustomerView): number[] {
  const out: number[] = []
  for (const s of view.subscriptions) {
    for (const p of s.phases) {
      out.push(p.startAt, p.trialEndsAt)
      if (p.endsAt !== null) out.push(p.endsAt)
    }
  }
  for (const e of view.entitlements) {
    out.push(e.effectiveAt)
    if (e.expiresAt !== null) out.push(e.expiresAt)
    for (const g of e.grants ?? []) out.push(g.effectiveAt, g.expiresAt)
  }
  return out
}

// ---- the read routes ------------------------------------------------------------------------

/** A feature's counters as stored (lua/includes/entitlementUsage.lua). */
export interface StoredUsage {
  periodStartMs: number
  periodEndMs: number
  usage: bigint
  overage: bigint
  refused: bigint
  consumed: Map<string, bigint>
  /**
   * The greatest decision clock of the period's counts (when the gateway accepted the newest
   * event counted, or the consume's now); undefined for counters written before it was stored.
   */
  countedAtMs?: number
}

const pairOf = (text: string | undefined): bigint => {
  const [hi, lo] = (text ?? '0:0').split(':')
  return fromPair(hi ?? '0', lo ?? '0')
}

export function parseStoredUsage(raw: string | undefined): StoredUsage | undefined {
  if (raw === undefined) return undefined
  // Older fields end earlier (before the reached marker, or before countedAt): what is missing reads as ''.
  const [ps, pe, u, o, r, , gs, , ca] = raw.split(';')
  const consumed = new Map<string, bigint>()
  for (const part of (gs ?? '').split(',')) {
    const eq = part.indexOf('=')
    if (eq > 0) consumed.set(part.slice(0, eq), pairOf(part.slice(eq + 1)))
  }
  const stored: StoredUsage = { periodStartMs: Number(ps), periodEndMs: Number(pe), usage: pairOf(u), overage: pairOf(o), refused: pairOf(r), consumed }
  if (ca !== undefined && ca !== '') stored.countedAtMs = Number(ca)
  return stored
}

/** What an entitlement's `metadata.usage` says (decimal strings, epoch ms). */
export interface UsageSummary {
  /** Usage counted in the current period (for max and latest: the aggregate). */
  usage: string
  /** The sum of the allowances of the grants in effect. */
  limit: string
  /** limit − usage counted against the grants in effect (negative past the limit). */
  remaining: string
  /** Usage beyond every grant (last-call, always). */
  overage: string
  /** Usage the strategy refused this period (counted nowhere else). */
  refused: string
  periodStartAt: number
  periodEndAt: number
  /** Whether usage is denied until periodEndAt (none, last-call: usage counted ≥ limit). */
  denied: boolean
  /** Epoch ms: when these counters were read (the service's clock). */
  asOf: number
  /**
   * Epoch ms: the decision clock of the newest count in this period, i.e. when the gateway
   * accepted the newest raw event the ingest worker has counted (or a run's consume counted);
   * null when nothing was counted in the period yet (or only before this field was stored).
   */
  usageAsOf: number | null
}

/**
 * The entitlements (in effect at `now`, as entitlementsAt answers them) with their usage:
 * `metadata.usage` per entitlement and `metadata.usage = {consumed, remaining}` per grant, from
 * the customer's usage hash. Counters of an older period read as zero.
 */
export function withUsage(entitlements: Entitlement[], usageHash: Readonly<Record<string, string>>, view: CustomerView, now: number): Entitlement[] {
  return entitlements.map((e) => {
    const period = resetPeriod(view, e, now)
    const slug = e.featurePlanVersion.feature.slug
    const parsed = parseStoredUsage(usageHash[slug])
    const stored = parsed && parsed.periodStartMs === period.startMs ? parsed : undefined
    const grants = e.grants ?? []
    const additive = ['sum', 'count'].includes(e.featurePlanVersion.meterConfig.aggregationMethod)
    let limit = 0n
    let fromGrants = 0n
    const shown = grants.map((g) => {
      const allowance = allowanceOf(g)
      const consumed = stored?.consumed.get(g.id) ?? 0n
      limit += allowance
      fromGrants += consumed
      return { ...g, metadata: { ...g.metadata, usage: { consumed: formatUnits(consumed), remaining: formatUnits(allowance - consumed) } } }
    })
    const overage = stored?.overage ?? 0n
    const usage = stored?.usage ?? 0n
    const used = additive ? fromGrants + overage : usage
    const summary: UsageSummary = {
      usage: formatUnits(usage),
      limit: formatUnits(limit),
      remaining: formatUnits(limit - used),
      overage: formatUnits(overage),
      refused: formatUnits(stored?.refused ?? 0n),
      periodStartAt: period.startMs,
      periodEndAt: period.endMs,
      denied: e.overageStrategy !== 'always' && used >= limit,
      asOf: now,
      usageAsOf: stored?.countedAtMs ?? null,
    }
    return { ...e, metadata: { ...e.metadata, usage: summary }, grants: shown }
  })
}
