import { cycleAt, FOREVER_MS } from './cycles.js'
import { formatSum } from './pricing.js'
import type {
  Entitlement,
  EntitlementReduced,
  Feature,
  FeatureListItem,
  FeaturePlanVersion,
  FeaturePlanVersionReduced,
  MeterConfig,
  MeterConfigReduced,
  Plan,
  PlanFeature,
  PlanVersion,
  PlanVersionListItem,
  PlanVersionsListRequest,
  Subscription,
  SubscriptionStatus,
} from './schemas.js'
import type { AccessFlags, CustomerView, PhaseView, StoredCatalog, StoredPlanFeature, StoredPlanVersion, SubscriptionView } from './types.js'

/**
 * What the read routes answer, projected from the stored catalog and customer documents at one
 * `now`. Pure functions: the service reads, these shape.
 */

/** Subscription statuses under which a subscription gives its entitlements. */
const GIVES_ACCESS: ReadonlySet<SubscriptionStatus> = new Set(['active', 'trialing', 'past_due'])

// ---- plan versions and features -------------------------------------------------------------

export function toPlanVersion(pv: StoredPlanVersion): PlanVersion {
  const { planSlug: _slug, features: _features, ...planVersion } = pv
  return planVersion
}

/** A plan feature as the spec shows it: the feature joined in, and its meter. */
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
  const { type: _type, featureType: _featureType, config, ...rest } = fullPlanFeature(f, features)
  const { usageMode: _usageMode, tierMode: _tierMode, ...reducedConfig } = config
  return { ...rest, config: reducedConfig, displayFeatureText: f.displayFeatureText }
}

/** The flat price of a version: its flat features' prices times their default quantities. */
function flatPrice(pv: StoredPlanVersion): string {
  const terms = pv.features.filter((f) => f.featureType === 'flat' && f.config.price).map((f) => ({ price: f.config.price!, quantity: f.defaultQuantity }))
  return formatSum(terms, pv.currency)
}

/** A plan version with its plan, its features and its flat price (GET /v1/plan-versions/get). */
export function planVersionDetail(pv: StoredPlanVersion, catalog: StoredCatalog) {
  const features = featuresById(catalog)
  const plan = catalog.plans.find((p) => p.id === pv.planId)!
  return { ...toPlanVersion(pv), plan, planFeatures: pv.features.map((f) => planFeature(f, features)), flatPrice: flatPrice(pv) }
}

/** The list variant (4.10): without status, paymentProvider, dueBehaviour, currency and whenToBill. */
export function planVersionListItem(pv: StoredPlanVersion, catalog: StoredCatalog): PlanVersionListItem {
  const { status: _s, paymentProvider: _p, dueBehaviour: _d, currency: _c, whenToBill: _w, ...item } = planVersionDetail(pv, catalog)
  return item
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
  const { createdAtM: _c, updatedAtM: _u, ...item } = f
  return item
}

// ---- subscriptions --------------------------------------------------------------------------

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
  const { planSlug, cadence: _cadence, endsAt: _endsAt, ...activePhase } = phase
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
    currentCycleEndAt: cycle.end,
    renewAt: cycle.end,
    endAt: last.endsAt ?? FOREVER_MS,
    timezone: s.timezone,
    metadata: Object.keys(dates).length > 0 ? { ...s.metadata, dates } : { ...s.metadata },
    project: { enabled: true },
    customer: { active: !flags.customerDisabled },
    activePhase,
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

function reducedMeter({ aggregationMethod: _a, windowSize: _w, ...meter }: MeterConfig): MeterConfigReduced {
  return meter
}

/**
 * The reduced variant of POST /v1/entitlements/get (4.2): without type, featureType, usageMode,
 * tierMode, billingInterval, planType, resetInterval, aggregationMethod and windowSize at any
 * depth, grants without their type, and an empty subscriptionPhase.
 */
export function reduceEntitlement(e: Entitlement): EntitlementReduced {
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
