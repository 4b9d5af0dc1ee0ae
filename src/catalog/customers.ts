import { canonical, changeOf, derivedId, stamp } from './canonical.js'
import { addIntervals, FOREVER_MS, isTimeZone, resolveAnchor, type Cadence } from './cycles.js'
import type { ConfigDocument, GrantDoc, SubscriptionDoc } from './document.js'
import type { Issues } from './issues.js'
import { checkCadence, emptyChanges, firstOfEach, planVersionName, SUBSCRIPTION_GRANT_PRIORITY } from './plans.js'
import type { Entitlement, Grant, GrantType } from './schemas.js'
import type {
  ApplySummary,
  CatalogIndex,
  CustomerSource,
  CustomerView,
  PhaseView,
  StoredCatalog,
  StoredGrant,
  StoredPhase,
  StoredPlanVersion,
  StoredSubscription,
  SubscriptionView,
} from './types.js'
import { featuresById, fullPlanFeature, toPlanVersion } from './views.js'

/**
 * The customer half of an apply: customers, subscriptions and grants of the document merged into
 * the customers' stored sources, every rule checked, and each changed customer's read document
 * (`doc`) rebuilt against the new catalog. Pure: no Redis, one `now`.
 */

/** Default priorities of document grants: free units are used before paid ones. */
const GRANT_PRIORITY: Record<GrantType, number> = { trial: 100, promotion: 80, manual: 60, addon: 40, subscription: SUBSCRIPTION_GRANT_PRIORITY }

export interface CustomerWrite {
  id: string
  src: CustomerSource
  view: CustomerView
  /** The document changed one of the customer's subscriptions: the subscriptionStatus access flag no longer applies. */
  clearStatus: boolean
}

export interface CustomersBuild {
  writes: CustomerWrite[]
  index: CatalogIndex
  summary: Pick<ApplySummary, 'customers' | 'subscriptions' | 'grants'>
}

/** The stored customers an apply reads: those the document names, and those on plan versions it touched. */
export function customersToRead(doc: ConfigDocument, index: CatalogIndex, touchedPlanVersionIds: ReadonlySet<string>): string[] {
  const ids = new Set<string>()
  for (const c of doc.customers ?? []) ids.add(c.id)
  for (const s of doc.subscriptions ?? []) ids.add(s.customerId)
  for (const g of doc.grants ?? []) ids.add(g.customerId)
  for (const [id, entry] of Object.entries(index.customers)) if (entry.planVersionIds.some((pv) => touchedPlanVersionIds.has(pv))) ids.add(id)
  return [...ids].filter((id) => Object.hasOwn(index.customers, id))
}

interface Context {
  projectId: string
  catalog: StoredCatalog
  planVersions: Map<string, StoredPlanVersion>
  now: number
  issues: Issues
}

export function buildCustomers(
  projectId: string,
  catalog: StoredCatalog,
  index: CatalogIndex,
  sources: ReadonlyMap<string, CustomerSource>,
  doc: ConfigDocument,
  now: number,
  touchedPlanVersionIds: ReadonlySet<string>,
  issues: Issues,
): CustomersBuild {
  const ctx: Context = {
    projectId,
    catalog,
    planVersions: new Map(catalog.planVersions.map((pv) => [planVersionName(pv.planSlug, pv.version), pv])),
    now,
    issues,
  }
  const summary = { customers: emptyChanges(), subscriptions: emptyChanges(), grants: emptyChanges() }
  const customerEntries = doc.customers ?? []
  const docCustomers = new Map(
    firstOfEach(
      customerEntries,
      (c) => c.id,
      (i, first) => {
        issues.conflict(`$.customers[${i}].id`, `customer ${customerEntries[i]!.id} is already defined at $.customers[${first}]`)
      },
    ).map(([c]) => [c.id, c]),
  )
  const known = (id: string) => docCustomers.has(id) || Object.hasOwn(index.customers, id)
  const owners = ownersOf(index)

  const subscriptionsOf = byCustomer(doc.subscriptions ?? [], 'subscriptions', 'subscription', known, owners.subscriptions, issues)
  const grantsOf = byCustomer(doc.grants ?? [], 'grants', 'grant', known, owners.grants, issues)
  const ids = new Set([...sources.keys(), ...docCustomers.keys(), ...subscriptionsOf.keys(), ...grantsOf.keys()])

  const nextIndex: CatalogIndex = { customers: { ...index.customers } }
  const writes: Omit<CustomerWrite, 'view'>[] = []
  for (const id of ids) {
    const previous = sources.get(id)
    const entry = docCustomers.get(id)
    const customer = entry
      ? stamp({ id, name: entry.name ?? '', email: entry.email ?? '', metadata: entry.metadata ?? {} }, previous?.customer, now)
      : previous?.customer
    if (!customer) continue // referenced, but neither stored nor defined: reported as unresolved
    if (entry) summary.customers[changeOf(customer, previous?.customer)].push(id)

    const subscriptions = [...(previous?.subscriptions ?? [])]
    let subscriptionsChanged = false
    const docSubscriptions = subscriptionsOf.get(id) ?? []
    for (const [s, i] of docSubscriptions) {
      const old = subscriptions.find((x) => x.id === s.id)
      const subscription = subscriptionOf(s, old, `$.subscriptions[${i}]`, ctx)
      if (!subscription) continue
      const change = changeOf(subscription, old)
      summary.subscriptions[change].push(s.id)
      if (change !== 'unchanged') subscriptionsChanged = true
      replaceOrAdd(subscriptions, subscription)
    }
    for (const [s, i] of docSubscriptions) {
      const mine = subscriptions.find((x) => x.id === s.id)
      const other = mine && subscriptions.find((x) => x !== mine && overlaps(x, mine))
      if (other)
        issues.invalid(`$.subscriptions[${i}].phases`, `overlaps subscription ${other.id} of customer ${id}: a customer has one subscription at a time`)
    }

    const grants = [...(previous?.grants ?? [])]
    for (const [g, i] of grantsOf.get(id) ?? []) {
      const old = grants.find((x) => x.id === g.id)
      const grant = grantOf(g, old, subscriptions, `$.grants[${i}]`, ctx)
      if (!grant) continue
      summary.grants[changeOf(grant, old)].push(g.id)
      replaceOrAdd(grants, grant)
    }

    const src: CustomerSource = { customer, subscriptions, grants }
    const planVersionIds = planVersionsOf(src, ctx)
    nextIndex.customers[id] = { planVersionIds, subscriptionIds: subscriptions.map((s) => s.id), grantIds: grants.map((g) => g.id) }
    if (!previous || canonical(src) !== canonical(previous) || planVersionIds.some((pv) => touchedPlanVersionIds.has(pv))) {
      writes.push({ id, src, clearStatus: subscriptionsChanged })
    }
  }
  // Views are built only for a document without problems: they assume every reference resolves.
  const built = issues.any ? [] : writes.map((w) => ({ ...w, view: customerView(projectId, catalog, w.src) }))
  return { writes: built, index: nextIndex, summary }
}

function replaceOrAdd<T extends { id: string }>(list: T[], item: T): void {
  const at = list.findIndex((x) => x.id === item.id)
  if (at >= 0) list[at] = item
  else list.push(item)
}

/** Which customer holds each stored subscription and grant: neither may move to another customer. */
function ownersOf(index: CatalogIndex) {
  const subscriptions = new Map<string, string>()
  const grants = new Map<string, string>()
  for (const [customerId, entry] of Object.entries(index.customers)) {
    for (const id of entry.subscriptionIds) subscriptions.set(id, customerId)
    for (const id of entry.grantIds) grants.set(id, customerId)
  }
  return { subscriptions, grants }
}

/** Document entries grouped by customer, after the checks on their id and customerId. */
function byCustomer<T extends { id: string; customerId: string }>(
  entries: T[],
  field: string,
  what: string,
  known: (id: string) => boolean,
  owners: Map<string, string>,
  issues: Issues,
): Map<string, [T, number][]> {
  const result = new Map<string, [T, number][]>()
  const kept = firstOfEach(
    entries,
    (e) => e.id,
    (i, first) => issues.conflict(`$.${field}[${i}].id`, `${what} ${entries[i]!.id} is already defined at $.${field}[${first}]`),
  )
  for (const [e, i] of kept) {
    const owner = owners.get(e.id)
    if (!known(e.customerId)) {
      issues.unresolved(`$.${field}[${i}].customerId`, `customer ${e.customerId} does not exist`)
    } else if (owner !== undefined && owner !== e.customerId) {
      issues.conflict(`$.${field}[${i}].id`, `${what} ${e.id} belongs to customer ${owner}; it cannot move to another customer`)
    } else {
      const list = result.get(e.customerId) ?? []
      list.push([e, i])
      result.set(e.customerId, list)
    }
  }
  return result
}

/** A plan version named by plan and version, or an unresolved reference at the field that is wrong. */
function resolvePlanVersion(plan: string, version: number, path: string, ctx: Context): StoredPlanVersion | undefined {
  const pv = ctx.planVersions.get(planVersionName(plan, version))
  if (pv) return pv
  if (!ctx.catalog.plans.some((p) => p.slug === plan)) ctx.issues.unresolved(`${path}.plan`, `plan ${plan} does not exist`)
  else ctx.issues.unresolved(`${path}.version`, `plan ${plan} has no version ${version}`)
  return undefined
}

function subscriptionOf(s: SubscriptionDoc, previous: StoredSubscription | undefined, path: string, ctx: Context): StoredSubscription | undefined {
  const { issues, now } = ctx
  // Only a phase whose plan version does not resolve stops the subscription from being built:
  // built, it still lets the customer's grants resolve, so one mistake is reported once.
  let ok = true
  const timezone = s.timezone ?? 'UTC'
  if (!isTimeZone(timezone)) issues.invalid(`${path}.timezone`, `${timezone} is not an IANA time zone`)
  const phases: StoredPhase[] = []
  s.phases.forEach((ph, j) => {
    const at = `${path}.phases[${j}]`
    const before = s.phases[j - 1]
    if (ph.endAt != null && ph.endAt <= ph.startAt) issues.invalid(`${at}.endAt`, 'must be after startAt')
    if (ph.endAt == null && j < s.phases.length - 1) issues.invalid(`${at}.endAt`, 'only the last phase may be open-ended')
    if (before && (ph.startAt <= before.startAt || (before.endAt != null && ph.startAt < before.endAt))) {
      issues.invalid(`${at}.startAt`, 'phases are in order of startAt and do not overlap: this one starts before the previous one ends')
    }
    const pv = resolvePlanVersion(ph.plan, ph.version, at, ctx)
    if (!pv) {
      ok = false
      return
    }
    const name = planVersionName(ph.plan, ph.version)
    const oldPhase = previous?.phases[j]
    if (pv.status !== 'published') {
      issues.invalid(`${at}.version`, `${name} is a draft; subscriptions use published versions`)
    } else if (!pv.active && !(oldPhase?.plan === ph.plan && oldPhase.version === ph.version)) {
      issues.invalid(`${at}.version`, `${name} is not active: no new subscription may use it`)
    }
    if (ph.billingAnchor !== undefined) {
      checkCadence(pv.billingConfig.billingInterval, ph.billingAnchor, undefined, at, { anchor: 'billingAnchor', planType: 'planType' }, issues)
    }
    const items = firstOfEach(
      ph.items ?? [],
      (it) => it.featureSlug,
      (k, first) => {
        issues.conflict(`${at}.items[${k}].featureSlug`, `feature ${ph.items![k]!.featureSlug} is already an item at ${at}.items[${first}]`)
      },
    )
    for (const [it, k] of items) {
      if (!pv.features.some((f) => f.featureSlug === it.featureSlug))
        issues.unresolved(`${at}.items[${k}].featureSlug`, `feature ${it.featureSlug} is not in ${name}`)
    }
    phases.push(
      stamp(
        {
          plan: ph.plan,
          version: ph.version,
          startAt: ph.startAt,
          endAt: ph.endAt ?? null,
          trialUnits: ph.trialUnits ?? null,
          billingAnchor: ph.billingAnchor ?? null,
          paymentMethodId: ph.paymentMethodId ?? null,
          paymentProvider: ph.paymentProvider ?? null,
          creditLinePolicy: ph.creditLinePolicy ?? 'capped',
          creditLineAmount: ph.creditLineAmount ?? 0,
          metadata: ph.metadata ?? {},
          // Every feature of the version is an item; the document only sets units.
          items: pv.features.map((f) =>
            stamp(
              {
                featureSlug: f.featureSlug,
                units: items.find(([it]) => it.featureSlug === f.featureSlug)?.[0].units ?? f.defaultQuantity,
              },
              oldPhase?.items.find((x) => x.featureSlug === f.featureSlug),
              now,
            ),
          ),
        },
        oldPhase,
        now,
      ),
    )
  })
  if (!ok) return undefined
  return stamp({ id: s.id, status: s.status ?? null, timezone, cancelAt: s.cancelAt ?? null, metadata: s.metadata ?? {}, phases }, previous, now)
}

const phaseEnd = (p: StoredPhase) => p.endAt ?? Infinity

function overlaps(a: StoredSubscription, b: StoredSubscription): boolean {
  return a.phases.some((p) => b.phases.some((q) => p.startAt < phaseEnd(q) && q.startAt < phaseEnd(p)))
}

function grantOf(g: GrantDoc, previous: StoredGrant | undefined, subscriptions: StoredSubscription[], path: string, ctx: Context): StoredGrant | undefined {
  const { issues } = ctx
  let ok = true
  if (g.type === 'subscription') {
    issues.invalid(`${path}.type`, 'subscription grants come from subscriptions; a document grant is manual, promotion, trial or addon')
    ok = false
  }
  if (g.expiresAt != null && g.expiresAt <= g.effectiveAt) {
    issues.invalid(`${path}.expiresAt`, 'must be after effectiveAt')
    ok = false
  }
  if (!ctx.catalog.features.some((f) => f.slug === g.featureSlug)) {
    issues.unresolved(`${path}.featureSlug`, `feature ${g.featureSlug} does not exist`)
    return undefined
  }
  let planVersionId: string
  if (g.plan !== undefined || g.version !== undefined) {
    if (g.plan === undefined || g.version === undefined) {
      issues.invalid(`${path}.${g.plan === undefined ? 'plan' : 'version'}`, 'plan and version name a plan version together')
      return undefined
    }
    const pv = resolvePlanVersion(g.plan, g.version, path, ctx)
    if (!pv) return undefined
    if (pv.status !== 'published') issues.invalid(`${path}.version`, `${planVersionName(g.plan, g.version)} is a draft; grants entitle from published versions`)
    if (!pv.features.some((f) => f.featureSlug === g.featureSlug)) {
      issues.unresolved(`${path}.featureSlug`, `feature ${g.featureSlug} is not in ${planVersionName(g.plan, g.version)}`)
      return undefined
    }
    planVersionId = pv.id
  } else {
    // The plan version of the customer's subscription to the feature when the grant starts.
    const pv = subscriptions
      .flatMap((s) => s.phases)
      .filter((p) => p.startAt <= g.effectiveAt && g.effectiveAt < phaseEnd(p))
      .map((p) => ctx.planVersions.get(planVersionName(p.plan, p.version))!)
      .find((v) => v.features.some((f) => f.featureSlug === g.featureSlug))
    if (!pv) {
      issues.unresolved(
        `${path}.featureSlug`,
        `customer ${g.customerId} has no subscription to ${g.featureSlug} at effectiveAt; name the plan and version the grant entitles from`,
      )
      return undefined
    }
    planVersionId = pv.id
  }
  if (!ok) return undefined
  return stamp(
    {
      id: g.id,
      featureSlug: g.featureSlug,
      type: g.type,
      priority: g.priority ?? GRANT_PRIORITY[g.type],
      allowanceUnits: g.allowanceUnits,
      effectiveAt: g.effectiveAt,
      expiresAt: g.expiresAt ?? null,
      metadata: g.metadata ?? {},
      planVersionId,
    },
    previous,
    ctx.now,
  )
}

function planVersionsOf(src: CustomerSource, ctx: Context): string[] {
  const ids = new Set<string>()
  for (const s of src.subscriptions) for (const p of s.phases) ids.add(ctx.planVersions.get(planVersionName(p.plan, p.version))!.id)
  for (const g of src.grants) ids.add(g.planVersionId)
  return [...ids]
}

// ---- the read document ------------------------------------------------------------------------

/** Quantity features (seats) allow what the item subscribes; usage features their plan limit. */
const allowanceOf = (featureType: string, units: number, limit: number) => (featureType === 'usage' ? limit : units)

/**
 * The customer's read document: subscriptions with their phases resolved to plan versions, and
 * every entitlement (one per subscription item, one per plan feature granted outside a
 * subscription) with every grant. Reads keep what is in effect at their `now`.
 */
export function customerView(projectId: string, catalog: StoredCatalog, src: CustomerSource): CustomerView {
  const customerId = src.customer.id
  const ctx: ViewContext = {
    projectId,
    customerId,
    features: featuresById(catalog),
    byName: new Map(catalog.planVersions.map((pv) => [planVersionName(pv.planSlug, pv.version), pv])),
    entitlements: [],
  }
  const byId = new Map(catalog.planVersions.map((pv) => [pv.id, pv]))

  const subscriptions: SubscriptionView[] = src.subscriptions.map((s) => ({
    id: s.id,
    projectId,
    customerId,
    createdAtM: s.createdAtM,
    updatedAtM: s.updatedAtM,
    status: s.status,
    timezone: s.timezone,
    cancelAt: s.cancelAt,
    metadata: s.metadata,
    phases: s.phases.map((p, j) => phaseView(ctx, s, p, j)),
  }))
  for (const g of src.grants) addGrant(ctx, byId.get(g.planVersionId)!, g)
  const { entitlements } = ctx
  entitlements.sort((a, b) => a.featurePlanVersion.order - b.featurePlanVersion.order || a.effectiveAt - b.effectiveAt || (a.id < b.id ? -1 : 1))
  return { customerId, subscriptions, entitlements }
}

/** What building one customer's read document shares; `entitlements` fills up as it is built. */
interface ViewContext {
  projectId: string
  customerId: string
  features: ReturnType<typeof featuresById>
  byName: Map<string, StoredPlanVersion>
  entitlements: Entitlement[]
}

/** A phase resolved to its plan version; each of its items adds its entitlement to `ctx.entitlements`. */
function phaseView(ctx: ViewContext, s: StoredSubscription, p: StoredPhase, j: number): PhaseView {
  const { projectId } = ctx
  const pv = ctx.byName.get(planVersionName(p.plan, p.version))!
  const phaseId = derivedId('ph', projectId, s.id, j)
  const cadence: Cadence = {
    interval: pv.billingConfig.billingInterval,
    count: pv.billingConfig.billingIntervalCount,
    anchor: p.billingAnchor ?? pv.billingConfig.billingAnchor,
  }
  const trialUnits = p.trialUnits ?? pv.trialUnits
  const endAt = p.endAt ?? FOREVER_MS
  const items = p.items.map((it) => subscriptionItem(ctx, pv, s, p, phaseId, it))
  return {
    id: phaseId,
    projectId,
    subscriptionId: s.id,
    planVersionId: pv.id,
    paymentMethodId: p.paymentMethodId,
    paymentProvider: p.paymentProvider ?? pv.paymentProvider,
    creditLineAmount: p.creditLineAmount,
    billingAnchor: resolveAnchor(p.startAt, cadence, s.timezone),
    trialEndsAt: Math.min(addIntervals(p.startAt, cadence.interval, trialUnits, s.timezone), endAt),
    startAt: p.startAt,
    endAt,
    planVersion: toPlanVersion(pv),
    createdAtM: p.createdAtM,
    updatedAtM: p.updatedAtM,
    creditLinePolicy: p.creditLinePolicy,
    trialUnits,
    metadata: p.metadata,
    items,
    planSlug: p.plan,
    cadence,
    endsAt: p.endAt,
  }
}

/**
 * A subscription item, and the entitlement it gives (pushed to `ctx.entitlements`): for the
 * phase's span, with one subscription grant of what the item allows.
 */
function subscriptionItem(ctx: ViewContext, pv: StoredPlanVersion, s: StoredSubscription, p: StoredPhase, phaseId: string, it: StoredPhase['items'][number]) {
  const { projectId, customerId } = ctx
  const fpv = pv.features.find((f) => f.featureSlug === it.featureSlug)!
  const item = {
    id: derivedId('si', phaseId, it.featureSlug),
    projectId,
    createdAtM: it.createdAtM,
    updatedAtM: it.updatedAtM,
    units: it.units,
    featurePlanVersionId: fpv.id,
    subscriptionPhaseId: phaseId,
    subscriptionId: s.id,
  }
  const entitlementId = derivedId('ent', item.id)
  ctx.entitlements.push({
    id: entitlementId,
    projectId,
    customerId,
    featurePlanVersionId: fpv.id,
    createdAtM: it.createdAtM,
    updatedAtM: it.updatedAtM,
    subscriptionId: s.id,
    subscriptionPhaseId: phaseId,
    subscriptionItemId: item.id,
    effectiveAt: p.startAt,
    expiresAt: p.endAt,
    overageStrategy: fpv.metadata.overageStrategy ?? 'none',
    metadata: {},
    featurePlanVersion: fullPlanFeature(fpv, ctx.features),
    grants: [
      {
        id: derivedId('gr', item.id),
        projectId,
        customerEntitlementId: entitlementId,
        createdAtM: it.createdAtM,
        updatedAtM: it.updatedAtM,
        effectiveAt: p.startAt,
        expiresAt: p.endAt ?? FOREVER_MS,
        type: 'subscription',
        priority: SUBSCRIPTION_GRANT_PRIORITY,
        allowanceUnits: allowanceOf(fpv.featureType, it.units, fpv.limit),
        metadata: {},
      },
    ],
    subscriptionPhase: { creditLinePolicy: p.creditLinePolicy },
  })
  return item
}

/**
 * A document grant joins the subscription entitlement to the same plan feature in effect when
 * it starts, or else an entitlement of its own to that plan feature (`pv`: the grant's plan version).
 */
function addGrant(ctx: ViewContext, pv: StoredPlanVersion, g: StoredGrant): void {
  const { projectId, customerId, entitlements } = ctx
  const fpv = pv.features.find((f) => f.featureSlug === g.featureSlug)!
  let target = entitlements.find(
    (e) =>
      e.subscriptionId !== null && e.featurePlanVersionId === fpv.id && e.effectiveAt <= g.effectiveAt && (e.expiresAt === null || g.effectiveAt < e.expiresAt),
  )
  if (!target) {
    const id = derivedId('ent', projectId, customerId, fpv.id)
    target = entitlements.find((e) => e.id === id)
    if (!target) {
      target = {
        id,
        projectId,
        customerId,
        featurePlanVersionId: fpv.id,
        createdAtM: g.createdAtM,
        updatedAtM: g.updatedAtM,
        subscriptionId: null,
        subscriptionPhaseId: null,
        subscriptionItemId: null,
        effectiveAt: g.effectiveAt,
        expiresAt: g.expiresAt,
        overageStrategy: fpv.metadata.overageStrategy ?? 'none',
        metadata: {},
        featurePlanVersion: fullPlanFeature(fpv, ctx.features),
        grants: [],
        subscriptionPhase: {},
      }
      entitlements.push(target)
    } else {
      // An entitlement of grants lasts from the first grant's start to the last one's end.
      target.effectiveAt = Math.min(target.effectiveAt, g.effectiveAt)
      target.expiresAt = target.expiresAt === null || g.expiresAt === null ? null : Math.max(target.expiresAt, g.expiresAt)
      target.createdAtM = Math.min(target.createdAtM, g.createdAtM)
      target.updatedAtM = Math.max(target.updatedAtM, g.updatedAtM)
    }
  }
  const grant: Grant = {
    id: g.id,
    projectId,
    customerEntitlementId: target.id,
    createdAtM: g.createdAtM,
    updatedAtM: g.updatedAtM,
    effectiveAt: g.effectiveAt,
    expiresAt: g.expiresAt ?? FOREVER_MS,
    type: g.type,
    priority: g.priority,
    allowanceUnits: g.allowanceUnits,
    metadata: g.metadata,
  }
  target.grants!.push(grant)
}
