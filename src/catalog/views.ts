import { cycleAt, FOREVER_MS } from './cycles.js'
import { UNLIMITED } from './plans.js'
import { formatSum, priceAnswer } from './pricing.js'
import type {
  Entitlement,
  EntitlementAnswer,
  EntitlementReduced,
  Feature,
  FeatureAnswer,
  FeatureConfig,
  FeatureListItem,
  FeaturePlanVersion,
  FeaturePlanVersionAnswer,
  FeaturePlanVersionReduced,
  Grant,
  GrantAnswer,
  MeterConfig,
  MeterConfigAnswer,
  MeterConfigReduced,
  Plan,
  PlanFeature,
  PlanVersion,
  PlanVersionDetail,
  PlanVersionListItem,
  PlanVersionsListRequest,
  Subscription,
  SubscriptionStatus,
} from './schemas.js'
import type { AccessFlags, CustomerView, PhaseView, StoredCatalog, StoredPlanFeature, StoredPlanVersion, SubscriptionView } from './types.js'

/**
 * What the read routes answer, projected from the stored catalog and customer documents at one
 * `now`. Pure functions: the service reads, these shape. Records are stored with numbers for
 * "never" (FOREVER_MS) and "unlimited" (UNLIMITED) and "" for no field, which the domains compute
 * with; the `…Answer` projections below turn them into null or an absent field (README.md, "Shapes").
 */

// ---- answers: no sentinels ------------------------------------------------------------------

/** null for "never" (FOREVER_MS, or past it). */
const endOrNull = (ms: number | null): number | null => (ms === null || ms >= FOREVER_MS ? null : ms)
/** null for "unlimited" (UNLIMITED, or past it). */
const amountOrNull = (n: number): number | null => (n >= UNLIMITED ? null : n)

export function meterAnswer({ aggregationField, ...meter }: MeterConfig): MeterConfigAnswer {
  return aggregationField === '' ? meter : { ...meter, aggregationField }
}

export function featureAnswer(f: Feature): FeatureAnswer {
  return { ...f, description: f.description === '' ? null : f.description, meterConfig: meterAnswer(f.meterConfig) }
}

function configAnswer(c: FeatureConfig): FeatureConfig {
  return {
    ...c,
    ...(c.price ? { price: priceAnswer(c.price) } : {}),
    ...(c.tiers ? { tiers: c.tiers.map((t) => ({ ...t, unitPrice: priceAnswer(t.unitPrice), flatPrice: priceAnswer(t.flatPrice) })) } : {}),
  }
}

export function featurePlanVersionAnswer(f: FeaturePlanVersion): FeaturePlanVersionAnswer {
  return {
    ...f,
    config: configAnswer(f.config),
    limit: amountOrNull(f.limit),
    feature: featureAnswer(f.feature),
    meterConfig: meterAnswer(f.meterConfig),
  }
}

/** A grant as answered; without a limit, the `remaining` of its `metadata.usage` (src/entitlements) is null too. */
function grantAnswer(g: Grant): GrantAnswer {
  const allowanceUnits = amountOrNull(g.allowanceUnits)
  const usage = g.metadata.usage
  const metadata = allowanceUnits === null && typeof usage === 'object' && usage !== null ? { ...g.metadata, usage: { ...usage, remaining: null } } : g.metadata
  return { ...g, expiresAt: endOrNull(g.expiresAt), allowanceUnits, metadata }
}

/**
 * An entitlement as POST /v1/access/entitlements/list answers it. Its `metadata.usage` (counted
 * by src/entitlements) says `limit` and `remaining` null when a grant has no limit.
 */
export function entitlementAnswer(e: Entitlement): EntitlementAnswer {
  const { grants, ...rest } = e
  const answer: EntitlementAnswer = {
    ...rest,
    expiresAt: endOrNull(e.expiresAt),
    metadata: unlimitedUsage(e),
    featurePlanVersion: featurePlanVersionAnswer(e.featurePlanVersion),
  }
  return grants === undefined ? answer : { ...answer, grants: grants.map(grantAnswer) }
}

/**
 * The entitlement's metadata, its `usage.limit` and `usage.remaining` null when one of its grants
 * has no limit (src/entitlements sums the grants' allowances, UNLIMITED included).
 */
function unlimitedUsage(e: Entitlement): Record<string, unknown> {
  const usage = e.metadata.usage
  const unlimited = (e.grants ?? []).some((g) => g.allowanceUnits >= UNLIMITED)
  if (!unlimited || typeof usage !== 'object' || usage === null || !('limit' in usage)) return e.metadata
  return { ...e.metadata, usage: { ...usage, limit: null, remaining: null } }
}

// ---- plan versions and features -------------------------------------------------------------

export function toPlanVersion(pv: StoredPlanVersion): PlanVersion {
  const { planSlug: _slug, features: _features, ...planVersion } = pv
  return planVersion
}

/** A plan feature as the spec shows it (stored shape): the feature joined in, and its meter. */
export function fullPlanFeature(f: StoredPlanFeature, featuresById: ReadonlyMap<string, Feature>): FeaturePlanVersion {
  const { featureSlug: _slug, displayFeatureText: _text, ...rest } = f
  const feature = featuresById.get(f.featureId)!
  return { ...rest, feature, meterConfig: feature.meterConfig }
}

export function featuresById(catalog: StoredCatalog): Map<string, Feature> {
  return new Map(catalog.features.map((f) => [f.id, f]))
}

/** The plan version list's shape of a plan feature: no type, featureType, usageMode, tierMode; with displayFeatureText. */
function planFeature(f: StoredPlanFeature, features: ReadonlyMap<string, Feature>): PlanFeature {
  const { type: _type, featureType: _featureType, config, ...rest } = featurePlanVersionAnswer(fullPlanFeature(f, features))
  const { usageMode: _usageMode, tierMode: _tierMode, ...reducedConfig } = config
  return { ...rest, config: reducedConfig, displayFeatureText: f.displayFeatureText }
}

/** The flat price of a version: its flat features' prices times their default quantities. */
function flatPrice(pv: StoredPlanVersion): string {
  const terms = pv.features.filter((f) => f.featureType === 'flat' && f.config.price).map((f) => ({ price: f.config.price!, quantity: f.defaultQuantity }))
  return formatSum(terms, pv.currency)
}

/** A plan version with its plan, its features in full and its flat price (GET /v1/plan-versions/get, as `planVersion`). */
export function planVersionDetail(pv: StoredPlanVersion, catalog: StoredCatalog): PlanVersionDetail {
  const features = featuresById(catalog)
  const plan = catalog.plans.find((p) => p.id === pv.planId)!
  const planFeatures = pv.features.map((f) => ({ ...featurePlanVersionAnswer(fullPlanFeature(f, features)), displayFeatureText: f.displayFeatureText }))
  return { ...toPlanVersion(pv), plan, planFeatures, flatPrice: flatPrice(pv) }
}

/** The list variant (4.10): without status, paymentProvider, dueBehaviour, currency and whenToBill; features reduced. */
export function planVersionListItem(pv: StoredPlanVersion, catalog: StoredCatalog): PlanVersionListItem {
  const features = featuresById(catalog)
  const plan = catalog.plans.find((p) => p.id === pv.planId)!
  const { status: _s, paymentProvider: _p, dueBehaviour: _d, currency: _c, whenToBill: _w, ...item } = toPlanVersion(pv)
  return { ...item, plan, planFeatures: pv.features.map((f) => planFeature(f, features)), flatPrice: flatPrice(pv) }
}

/** Every filter of 4.10 holds (an absent or false flag does not filter); plans by slug, then versions in order. */
export function filterPlanVersions(catalog: StoredCatalog, filters: PlanVersionsListRequest): StoredPlanVersion[] {
  const plans = new Map<string, Plan>(catalog.plans.map((p) => [p.id, p]))
  const ids = filters.planVersionIds ? new Set(filters.planVersionIds) : undefined
  return catalog.planVersions
    .filter(
      (pv) =>
        (!filters.onlyPublished || pv.status === 'published') &&
        (!filters.onlyEnterprisePlan || plans.get(pv.planId)?.enterprisePlan === true) &&
        (!filters.onlyLatest || pv.latest) &&
        (!ids || ids.has(pv.id)) &&
        (!filters.billingInterval || pv.billingConfig.billingInterval === filters.billingInterval) &&
        (!filters.currency || pv.currency === filters.currency),
    )
    .sort((a, b) => (a.planSlug < b.planSlug ? -1 : a.planSlug > b.planSlug ? 1 : a.version - b.version))
}

export function featureListItem(f: Feature): FeatureListItem {
  const { createdAtM: _c, updatedAtM: _u, ...item } = featureAnswer(f)
  return item
}

// ---- subscriptions --------------------------------------------------------------------------

/** Subscription statuses under which a subscription gives its entitlements. */
const GIVES_ACCESS: ReadonlySet<SubscriptionStatus> = new Set(['active', 'trialing', 'past_due'])

const covers = (phase: PhaseView, now: number) => phase.startAt <= now && (phase.endsAt === null || now < phase.endsAt)

/** The customer's subscription with a phase in effect now (phases of one customer's subscriptions never overlap). */
export function currentSubscription(view: CustomerView, now: number): { subscription: SubscriptionView; phase: PhaseView; index: number } | undefined {
  for (const subscription of view.subscriptions) {
    const index = subscription.phases.findIndex((p) => covers(p, now))
    if (index >= 0) return { subscription, phase: subscription.phases[index]!, index }
  }
  return undefined
}

/** The access flag's status, else the document's, else trialing during the trial and active after it. */
function statusOf(subscription: SubscriptionView, phase: PhaseView, flags: AccessFlags, now: number): SubscriptionStatus {
  return flags.subscriptionStatus ?? subscription.status ?? (now < phase.trialEndsAt ? 'trialing' : 'active')
}

/** POST /v1/subscriptions/get: the current subscription, its cycle laid at `now`. */
export function subscriptionAt(view: CustomerView, flags: AccessFlags, now: number): Subscription | undefined {
  const current = currentSubscription(view, now)
  if (!current) return undefined
  const { subscription: s, phase, index } = current
  const cycle = cycleAt(now, phase.startAt, phase.endsAt, phase.cadence, s.timezone)
  const last = s.phases[s.phases.length - 1]!
  const status = statusOf(s, phase, flags, now)
  const { planSlug, cadence: _cadence, endsAt, ...activePhase } = phase
  const endAt = last.endsAt
  const cycleEnd = endOrNull(cycle.end)
  const ends = (at: number | null) => at !== null && cycleEnd !== null && at <= cycleEnd
  const dates: { lastChangeAt?: number; cancelAt?: number } = {}
  if (index > 0) dates.lastChangeAt = phase.startAt
  if (s.cancelAt !== null) dates.cancelAt = s.cancelAt
  return {
    id: s.id,
    projectId: s.projectId,
    customerId: s.customerId,
    createdAtM: s.createdAtM,
    updatedAtM: s.updatedAtM,
    status,
    active: GIVES_ACCESS.has(status) && !flags.customerDisabled,
    planSlug,
    currentCycleStartAt: cycle.start,
    currentCycleEndAt: cycleEnd,
    // No renewal after a cycle without an end, or one the subscription ends (or is canceled) with.
    renewAt: ends(endAt) || ends(s.cancelAt) ? null : cycleEnd,
    endAt,
    timezone: s.timezone,
    metadata: Object.keys(dates).length > 0 ? { ...s.metadata, dates } : { ...s.metadata },
    project: { enabled: true },
    customer: { active: !flags.customerDisabled },
    // Read documents applied before null ends stored the phase's end as FOREVER_MS: endsAt is its own.
    activePhase: { ...activePhase, endAt: endsAt },
  }
}

// ---- entitlements ---------------------------------------------------------------------------

/**
 * POST /v1/access/entitlements/list: entitlements in effect now, each with its grants in effect
 * now (highest priority first), the access flags in `metadata`. An entitlement a subscription
 * gives counts only while that subscription's status gives access.
 */
export function entitlementsAt(view: CustomerView, flags: AccessFlags, now: number): Entitlement[] {
  const current = currentSubscription(view, now)
  const status = current ? statusOf(current.subscription, current.phase, flags, now) : null
  const metadata = {
    customerDisabled: flags.customerDisabled,
    customerUsageLimitReached: flags.customerUsageLimitReached,
    subscriptionStatus: status,
  }
  return view.entitlements
    .filter(
      (e) =>
        e.effectiveAt <= now &&
        (e.expiresAt === null || now < e.expiresAt) &&
        (e.subscriptionId === null || (e.subscriptionId === current?.subscription.id && GIVES_ACCESS.has(status!))),
    )
    .map((e) => ({
      ...e,
      metadata: { ...e.metadata, ...metadata },
      grants: (e.grants ?? [])
        .filter((g) => g.effectiveAt <= now && now < g.expiresAt)
        .sort((a, b) => b.priority - a.priority || a.effectiveAt - b.effectiveAt),
    }))
}

function reducedMeter({ aggregationMethod: _a, windowSize: _w, ...meter }: MeterConfigAnswer): MeterConfigReduced {
  return meter
}

/**
 * The reduced variant of POST /v1/entitlements/get (4.2): without type, featureType, usageMode,
 * tierMode, billingInterval, planType, resetInterval, aggregationMethod and windowSize at any
 * depth, grants without their type, and an empty subscriptionPhase.
 */
export function reduceEntitlement(stored: Entitlement): EntitlementReduced {
  const e = entitlementAnswer(stored)
  const { type: _t, featureType: _ft, config, billingConfig, resetConfig, meterConfig, feature, ...fpv } = e.featurePlanVersion
  const { usageMode: _um, tierMode: _tm, ...reducedConfig } = config
  const { billingInterval: _bi, planType: _bp, ...reducedBilling } = billingConfig
  const { resetInterval: _ri, planType: _rp, ...reducedReset } = resetConfig
  const featurePlanVersion: FeaturePlanVersionReduced = {
    ...fpv,
    config: reducedConfig,
    billingConfig: reducedBilling,
    resetConfig: reducedReset,
    meterConfig: reducedMeter(meterConfig),
    feature: { ...feature, meterConfig: reducedMeter(feature.meterConfig) },
  }
  const { grants, subscriptionPhase: _sp, featurePlanVersion: _fpv, ...entitlement } = e
  return {
    ...entitlement,
    featurePlanVersion,
    grants: grants?.map(({ type: _type, ...grant }) => grant),
    subscriptionPhase: {},
  }
}
