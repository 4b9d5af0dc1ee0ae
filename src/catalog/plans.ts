import { canonical, changeOf, derivedId, sha256, stamp } from './canonical.js'
import type { BillingConfigDoc, ConfigDocument, FeatureDoc, PlanFeatureDoc, PlanVersionDoc, ResetConfigDoc } from './document.js'
import type { Issues } from './issues.js'
import { toPrice } from './pricing.js'
import type { BillingConfig, BillingInterval, Currency, Feature, FeatureConfig, MeterConfig, Plan, Price, ResetConfig, Tier } from './schemas.js'
import type { ApplySummary, ChangeLists, StoredCatalog, StoredPlanFeature, StoredPlanVersion } from './types.js'

/**
 * The catalog half of an apply: features, plans and plan versions of the document merged into
 * the stored catalog, with every rule of src/catalog/README.md checked. Pure: no Redis, one `now`.
 */

/** A limit that no usage reaches: what `limit` and `allowanceUnits` say for "no limit" (the spec types them as numbers). */
export const UNLIMITED = Number.MAX_SAFE_INTEGER
/** Priority of the grants subscriptions give; document grants default higher (README, "Grants"). */
export const SUBSCRIPTION_GRANT_PRIORITY = 20

export interface CatalogBuild {
  catalog: StoredCatalog
  /** Whether the catalog differs from the stored one. */
  changed: boolean
  /** Plan versions whose stored record changed, or whose features did: customers on them are rebuilt. */
  touchedPlanVersionIds: Set<string>
  summary: Pick<ApplySummary, 'features' | 'plans' | 'planVersions'>
}

export const emptyChanges = (): ChangeLists => ({ created: [], updated: [], unchanged: [] })
export const planVersionName = (plan: string, version: number) => `${plan}@${version}`

export function buildCatalog(projectId: string, previous: StoredCatalog, doc: ConfigDocument, now: number, actor: string, issues: Issues): CatalogBuild {
  const summary = { features: emptyChanges(), plans: emptyChanges(), planVersions: emptyChanges() }
  const features = mergeFeatures(projectId, previous.features, doc.features ?? [], now, issues, summary.features)
  const plans = mergePlans(projectId, previous.plans, doc.plans ?? [], now, issues, summary.plans)
  const planVersions = mergePlanVersions(
    projectId,
    previous.planVersions,
    doc.planVersions ?? [],
    { features, plans },
    now,
    actor,
    issues,
    summary.planVersions,
  )
  markLatest(planVersions)

  const catalog: StoredCatalog = { features: [...features.values()], plans: [...plans.values()], planVersions: [...planVersions.values()] }
  const changedFeatureIds = new Set(summary.features.updated.map((slug) => features.get(slug)!.id))
  const before = new Map(previous.planVersions.map((pv) => [pv.id, pv]))
  const touchedPlanVersionIds = new Set<string>()
  for (const pv of catalog.planVersions) {
    const old = before.get(pv.id)
    if (!old || canonical(old) !== canonical(pv) || pv.features.some((f) => changedFeatureIds.has(f.featureId))) touchedPlanVersionIds.add(pv.id)
  }
  return { catalog, changed: canonical(catalog) !== canonical(previous), touchedPlanVersionIds, summary }
}

/** Reports every entry whose `key` an earlier entry already used; returns the entries to go on with. */
export function firstOfEach<T>(entries: readonly T[], keyOf: (entry: T) => string, report: (index: number, firstIndex: number) => void): [T, number][] {
  const seen = new Map<string, number>()
  const kept: [T, number][] = []
  entries.forEach((entry, i) => {
    const key = keyOf(entry)
    const first = seen.get(key)
    if (first !== undefined) {
      report(i, first)
      return
    }
    seen.set(key, i)
    kept.push([entry, i])
  })
  return kept
}

function mergeFeatures(projectId: string, stored: Feature[], entries: FeatureDoc[], now: number, issues: Issues, changes: ChangeLists): Map<string, Feature> {
  const result = new Map(stored.map((f) => [f.slug, f]))
  const kept = firstOfEach(
    entries,
    (f) => f.slug,
    (i, first) => issues.conflict(`$.features[${i}].slug`, `feature ${entries[i]!.slug} is already defined at $.features[${first}]`),
  )

  // Codes: those of stored features the document does not name stay taken; explicit codes come
  // next; the rest keep their old code when it is free, or take the next free one.
  const named = new Set(kept.map(([f]) => f.slug))
  const taken = new Map<number, string>()
  for (const f of stored) if (!named.has(f.slug)) taken.set(f.code, `feature ${f.slug}`)
  const codes = new Map<string, number>()
  for (const [f, i] of kept) {
    if (f.code === undefined) continue
    const holder = taken.get(f.code)
    if (holder) issues.conflict(`$.features[${i}].code`, `code ${f.code} is already used by ${holder}`)
    else taken.set(f.code, `$.features[${i}]`)
    codes.set(f.slug, f.code)
  }
  let next = Math.max(0, ...taken.keys(), ...stored.map((f) => f.code)) + 1
  for (const [f] of kept) {
    if (codes.has(f.slug)) continue
    const old = result.get(f.slug)?.code
    const code = old !== undefined && !taken.has(old) ? old : next++
    taken.set(code, f.slug)
    codes.set(f.slug, code)
  }

  for (const [f, i] of kept) {
    const previous = result.get(f.slug)
    const feature = stamp(
      {
        id: previous?.id ?? derivedId('ft', projectId, f.slug),
        projectId,
        slug: f.slug,
        code: codes.get(f.slug)!,
        unitOfMeasure: f.unitOfMeasure,
        title: f.title,
        description: f.description ?? '',
        meterConfig: meterConfigOf(projectId, f, `$.features[${i}].meterConfig`, issues),
      },
      previous,
      now,
    )
    changes[changeOf(feature, previous)].push(f.slug)
    result.set(f.slug, feature)
  }
  return result
}

/** The meter of a feature; by default, a count of the events named like the feature. */
function meterConfigOf(projectId: string, f: FeatureDoc, path: string, issues: Issues): MeterConfig {
  const m = f.meterConfig
  const aggregationMethod = m?.aggregationMethod ?? (m?.aggregationField ? 'sum' : 'count')
  if (aggregationMethod !== 'count' && !m?.aggregationField) {
    issues.invalid(`${path}.aggregationField`, `aggregationMethod ${aggregationMethod} needs the event property it aggregates`)
  }
  const eventSlug = m?.eventSlug ?? f.slug
  return {
    eventId: derivedId('ev', projectId, eventSlug),
    eventSlug,
    aggregationMethod,
    aggregationField: m?.aggregationField ?? '',
    filters: m?.filters ?? {},
    groupBy: m?.groupBy ?? [],
    windowSize: m?.windowSize ?? 'MINUTE',
  }
}

function mergePlans(
  projectId: string,
  stored: Plan[],
  entries: NonNullable<ConfigDocument['plans']>,
  now: number,
  issues: Issues,
  changes: ChangeLists,
): Map<string, Plan> {
  const result = new Map(stored.map((p) => [p.slug, p]))
  const kept = firstOfEach(
    entries,
    (p) => p.slug,
    (i, first) => issues.conflict(`$.plans[${i}].slug`, `plan ${entries[i]!.slug} is already defined at $.plans[${first}]`),
  )
  for (const [p] of kept) {
    const previous = result.get(p.slug)
    const plan = stamp(
      {
        id: previous?.id ?? derivedId('pl', projectId, p.slug),
        projectId,
        slug: p.slug,
        title: p.title,
        active: p.active ?? true,
        description: p.description ?? '',
        metadata: p.metadata ?? {},
        defaultPlan: p.defaultPlan ?? false,
        enterprisePlan: p.enterprisePlan ?? false,
      },
      previous,
      now,
    )
    changes[changeOf(plan, previous)].push(p.slug)
    result.set(p.slug, plan)
  }
  const defaults = [...result.values()].filter((p) => p.defaultPlan).map((p) => p.slug)
  if (defaults.length > 1) {
    for (const [p, i] of kept) {
      if (p.defaultPlan)
        issues.invalid(`$.plans[${i}].defaultPlan`, `only one plan may be the default; so are ${defaults.filter((s) => s !== p.slug).join(', ')}`)
    }
  }
  return result
}

interface Known {
  features: Map<string, Feature>
  plans: Map<string, Plan>
}

function mergePlanVersions(
  projectId: string,
  stored: StoredPlanVersion[],
  entries: PlanVersionDoc[],
  known: Known,
  now: number,
  actor: string,
  issues: Issues,
  changes: ChangeLists,
): Map<string, StoredPlanVersion> {
  const result = new Map(stored.map((pv) => [planVersionName(pv.planSlug, pv.version), pv]))
  const kept = firstOfEach(
    entries,
    (v) => planVersionName(v.plan, v.version),
    (i, first) => {
      issues.conflict(`$.planVersions[${i}].version`, `plan ${entries[i]!.plan} version ${entries[i]!.version} is already defined at $.planVersions[${first}]`)
    },
  )
  for (const [entry, i] of kept) {
    const path = `$.planVersions[${i}]`
    const name = planVersionName(entry.plan, entry.version)
    const plan = known.plans.get(entry.plan)
    if (!plan) issues.unresolved(`${path}.plan`, `plan ${entry.plan} does not exist`)
    const previous = result.get(name)
    const content = planVersionContent(entry, known, path, issues)
    const configHash = sha256(canonical(content))
    if (publishedConflict(previous, entry, configHash, name, path, issues)) continue
    if (!plan) continue

    const id = previous?.id ?? derivedId('pv', projectId, entry.plan, entry.version)
    // A published version keeps its record as it was published; only its lifecycle moves.
    const pvFeatures =
      previous?.status === 'published'
        ? previous.features
        : content.features.map((f) =>
            storedPlanFeature(
              projectId,
              id,
              f,
              known,
              previous?.features.find((p) => p.featureSlug === f.featureSlug),
              now,
            ),
          )
    const record: StoredPlanVersion = stamp(
      {
        id,
        projectId,
        planId: plan.id,
        description: content.description,
        latest: previous?.latest ?? false,
        title: content.title,
        tags: content.tags,
        ...lifecycleOf(entry, previous, now, actor),
        paymentProvider: content.paymentProvider,
        dueBehaviour: content.dueBehaviour,
        currency: content.currency,
        billingConfig: content.billingConfig,
        whenToBill: content.whenToBill,
        gracePeriod: content.gracePeriod,
        collectionMethod: content.collectionMethod,
        trialUnits: content.trialUnits,
        autoRenew: content.autoRenew,
        metadata: content.metadata,
        paymentMethodRequired: content.paymentMethodRequired,
        version: entry.version,
        configHash,
        planSlug: entry.plan,
        features: pvFeatures,
      },
      previous,
      now,
    )
    changes[changeOf(record, previous)].push(name)
    result.set(name, record)
  }
  return result
}

/**
 * Whether the entry must be skipped because it would change a published version (reported as a
 * conflict): a published version never returns to draft, and its content is immutable, so a
 * change is published as a new version instead.
 */
function publishedConflict(
  previous: StoredPlanVersion | undefined,
  entry: PlanVersionDoc,
  configHash: string,
  name: string,
  path: string,
  issues: Issues,
): boolean {
  if (previous?.status !== 'published') return false
  if (entry.status === 'draft') {
    issues.conflict(`${path}.status`, `${name} is published; a published version cannot return to draft`)
    return true
  }
  if (previous.configHash !== configHash) {
    issues.conflict(
      path,
      `${name} is published and immutable, and this content differs from it (configHash ${previous.configHash.slice(0, 12)}… → ${configHash.slice(0, 12)}…); publish the change as a new version`,
    )
    return true
  }
  return false
}

/** Who published or archived the version and when: kept from the stored record once set, else now and the actor. */
function lifecycleOf(entry: PlanVersionDoc, previous: StoredPlanVersion | undefined, now: number, actor: string) {
  const published = entry.status === 'published'
  const archived = entry.archived ?? false
  return {
    active: entry.active ?? true,
    status: entry.status,
    publishedAt: published ? (previous?.publishedAt ?? now) : null,
    publishedBy: published ? (previous?.publishedBy ?? actor) : null,
    archived,
    archivedAt: archived ? (previous?.archivedAt ?? now) : null,
    archivedBy: archived ? (previous?.archivedBy ?? actor) : null,
  }
}

/** `latest`: the highest published, unarchived version of each plan. Derived, so it moves no updatedAtM. */
function markLatest(planVersions: Map<string, StoredPlanVersion>): void {
  const best = new Map<string, StoredPlanVersion>()
  for (const pv of planVersions.values()) {
    if (pv.status !== 'published' || pv.archived) continue
    const current = best.get(pv.planSlug)
    if (!current || pv.version > current.version) best.set(pv.planSlug, pv)
  }
  for (const [name, pv] of planVersions) {
    const latest = best.get(pv.planSlug) === pv
    if (pv.latest !== latest) planVersions.set(name, { ...pv, latest })
  }
}

/** A plan feature with its defaults filled in and its prices exact: what the configHash covers. */
interface PlanFeatureContent {
  featureSlug: string
  featureType: PlanFeatureDoc['featureType']
  config: FeatureConfig
  billingConfig: BillingConfig
  resetConfig: ResetConfig
  limit: number
  defaultQuantity: number
  order: number
  metadata: NonNullable<PlanFeatureDoc['metadata']>
  displayFeatureText: string | null
}

/**
 * Everything of a plan version but its lifecycle (status, active, archived), defaults filled in:
 * the canonical content its configHash is computed from. Checks every rule on the way.
 */
function planVersionContent(entry: PlanVersionDoc, known: Known, path: string, issues: Issues) {
  const billingConfig = billingConfigOf(entry.billingConfig, `${path}.billingConfig`, issues)
  const kept = firstOfEach(
    entry.features,
    (f) => f.featureSlug,
    (j, first) => {
      issues.conflict(
        `${path}.features[${j}].featureSlug`,
        `feature ${entry.features[j]!.featureSlug} is already in this version at ${path}.features[${first}]`,
      )
    },
  )
  const features: PlanFeatureContent[] = []
  for (const [f, j] of kept) {
    const fpath = `${path}.features[${j}]`
    if (!known.features.has(f.featureSlug)) issues.unresolved(`${fpath}.featureSlug`, `feature ${f.featureSlug} does not exist`)
    const ownBilling = f.billingConfig ? billingConfigOf(f.billingConfig, `${fpath}.billingConfig`, issues) : billingConfig
    features.push({
      featureSlug: f.featureSlug,
      featureType: f.featureType,
      config: featureConfigOf(f, entry.currency, `${fpath}.config`, issues),
      billingConfig: ownBilling,
      resetConfig: f.resetConfig ? resetConfigOf(f.resetConfig, `${fpath}.resetConfig`, issues) : resetFromBilling(ownBilling),
      limit: f.limit ?? UNLIMITED,
      defaultQuantity: f.defaultQuantity ?? 1,
      order: f.order ?? j + 1,
      metadata: f.metadata ?? {},
      displayFeatureText: f.displayFeatureText ?? null,
    })
  }
  return {
    title: entry.title,
    description: entry.description ?? '',
    tags: entry.tags ?? [],
    currency: entry.currency,
    billingConfig,
    whenToBill: entry.whenToBill ?? 'pay_in_advance',
    dueBehaviour: entry.dueBehaviour ?? 'cancel',
    paymentProvider: entry.paymentProvider ?? 'sandbox',
    gracePeriod: entry.gracePeriod ?? 0,
    collectionMethod: entry.collectionMethod ?? 'charge_automatically',
    trialUnits: entry.trialUnits ?? 0,
    autoRenew: entry.autoRenew ?? true,
    paymentMethodRequired: entry.paymentMethodRequired ?? false,
    metadata: entry.metadata ?? {},
    features,
  }
}

function storedPlanFeature(
  projectId: string,
  planVersionId: string,
  f: PlanFeatureContent,
  known: Known,
  previous: StoredPlanFeature | undefined,
  now: number,
): StoredPlanFeature {
  const feature = known.features.get(f.featureSlug)
  return stamp(
    {
      id: derivedId('fpv', planVersionId, f.featureSlug),
      projectId,
      planVersionId,
      featureId: feature?.id ?? '',
      type: 'feature' as const,
      featureType: f.featureType,
      unitOfMeasure: feature?.unitOfMeasure ?? '',
      config: f.config,
      billingConfig: f.billingConfig,
      metadata: f.metadata,
      order: f.order,
      resetConfig: f.resetConfig,
      defaultQuantity: f.defaultQuantity,
      limit: f.limit,
      featureSlug: f.featureSlug,
      displayFeatureText: f.displayFeatureText ?? displayText(f, feature),
    },
    previous,
    now,
  )
}

// ---- cadences -------------------------------------------------------------------------------

const INTERVAL_NAMES: Record<BillingInterval, string> = {
  month: 'monthly',
  year: 'yearly',
  week: 'weekly',
  day: 'daily',
  minute: 'every minute',
  onetime: 'once',
}

function cadenceName(interval: BillingInterval, count: number): string {
  return count === 1 || interval === 'onetime' ? INTERVAL_NAMES[interval] : `every ${count} ${interval}s`
}

/**
 * Checks a cadence (billing or reset): a onetime interval goes with a onetime plan type and the
 * other way round, and a numeric anchor lies in its interval (README, "Cycles").
 */
export function checkCadence(
  interval: BillingInterval,
  anchor: number | 'dayOfCreation',
  planType: string | undefined,
  path: string,
  fields: { anchor: string; planType: string },
  issues: Issues,
): void {
  if (planType !== undefined && (planType === 'onetime') !== (interval === 'onetime')) {
    issues.invalid(`${path}.${fields.planType}`, `planType ${planType} does not go with a ${interval} interval (onetime goes with onetime)`)
  }
  if (anchor === 'dayOfCreation') return
  const range = ANCHOR_RANGES[interval]
  if (!range) issues.invalid(`${path}.${fields.anchor}`, `a ${interval} interval takes no anchor but dayOfCreation`)
  else if (anchor < range[0] || anchor > range[1]) issues.invalid(`${path}.${fields.anchor}`, `a ${interval} anchor is from ${range[0]} to ${range[1]}`)
}

/** Numeric anchors: day of the month, ISO weekday, hour of the day. */
const ANCHOR_RANGES: Partial<Record<BillingInterval, [number, number]>> = { month: [1, 31], year: [1, 31], week: [1, 7], day: [0, 23] }

function billingConfigOf(b: BillingConfigDoc, path: string, issues: Issues): BillingConfig {
  const count = b.billingIntervalCount ?? 1
  const anchor = b.billingAnchor ?? 'dayOfCreation'
  checkCadence(b.billingInterval, anchor, b.planType, path, { anchor: 'billingAnchor', planType: 'planType' }, issues)
  return {
    name: b.name ?? cadenceName(b.billingInterval, count),
    billingInterval: b.billingInterval,
    billingIntervalCount: count,
    billingAnchor: anchor,
    planType: b.planType ?? (b.billingInterval === 'onetime' ? 'onetime' : 'recurring'),
  }
}

function resetConfigOf(r: ResetConfigDoc, path: string, issues: Issues): ResetConfig {
  const count = r.resetIntervalCount ?? 1
  const anchor = r.resetAnchor ?? 'dayOfCreation'
  checkCadence(r.resetInterval, anchor, r.planType, path, { anchor: 'resetAnchor', planType: 'planType' }, issues)
  return {
    name: r.name ?? cadenceName(r.resetInterval, count),
    resetInterval: r.resetInterval,
    resetIntervalCount: count,
    resetAnchor: anchor,
    planType: r.planType ?? (r.resetInterval === 'onetime' ? 'onetime' : 'recurring'),
  }
}

function resetFromBilling(b: BillingConfig): ResetConfig {
  return { name: b.name, resetInterval: b.billingInterval, resetIntervalCount: b.billingIntervalCount, resetAnchor: b.billingAnchor, planType: b.planType }
}

// ---- pricing --------------------------------------------------------------------------------

type ConfigField = 'price' | 'tiers' | 'usageMode' | 'tierMode' | 'units'

/** The config fields each kind of pricing needs; the others it must not have. */
function pricingNeeds(f: PlanFeatureDoc): { needs: ConfigField[]; what: string } {
  switch (f.featureType) {
    case 'flat':
      return { needs: ['price'], what: 'a flat feature' }
    case 'package':
      return { needs: ['price', 'units'], what: 'a package feature' }
    case 'tier':
      return { needs: ['tiers', 'tierMode'], what: 'a tier feature' }
    case 'usage':
      switch (f.config.usageMode) {
        case 'tier':
          return { needs: ['usageMode', 'tiers', 'tierMode'], what: 'usage priced by tier' }
        case 'package':
          return { needs: ['usageMode', 'price', 'units'], what: 'usage priced by package' }
        case 'unit':
          return { needs: ['usageMode', 'price'], what: 'usage priced per unit' }
        default:
          return { needs: ['usageMode'], what: 'a usage feature' }
      }
  }
}

function featureConfigOf(f: PlanFeatureDoc, currency: Currency, path: string, issues: Issues): FeatureConfig {
  const { needs, what } = pricingNeeds(f)
  for (const field of ['price', 'tiers', 'usageMode', 'tierMode', 'units'] as const) {
    const present = f.config[field] !== undefined
    if (needs.includes(field) && !present) issues.invalid(`${path}.${field}`, `${what} needs config.${field}`)
    if (!needs.includes(field) && present) issues.invalid(`${path}.${field}`, `${what} takes no config.${field}`)
  }
  const price = (text: string, at: string): Price => {
    const p = toPrice(text, currency)
    if (!p) issues.invalid(at, `${text} ${currency} has too many digits to be kept exactly`)
    return p ?? toPrice('0', currency)!
  }
  const config: FeatureConfig = {}
  if (f.config.price !== undefined) config.price = price(f.config.price, `${path}.price`)
  if (f.config.tiers !== undefined) {
    const tiers = f.config.tiers
    checkTiers(tiers, `${path}.tiers`, issues)
    config.tiers = tiers.map(
      (t, k): Tier => ({
        unitPrice: price(t.unitPrice, `${path}.tiers[${k}].unitPrice`),
        flatPrice: price(t.flatPrice ?? '0', `${path}.tiers[${k}].flatPrice`),
        firstUnit: t.firstUnit,
        lastUnit: t.lastUnit,
        label: t.label ?? (t.lastUnit === null ? `${t.firstUnit}+` : `${t.firstUnit}-${t.lastUnit}`),
      }),
    )
  }
  if (f.config.usageMode !== undefined) config.usageMode = f.config.usageMode
  if (f.config.tierMode !== undefined) config.tierMode = f.config.tierMode
  if (f.config.units !== undefined) config.units = f.config.units
  return config
}

/** Tiers start at unit 1, follow each other without gap or overlap, and only the last is open-ended. */
function checkTiers(tiers: NonNullable<PlanFeatureDoc['config']['tiers']>, path: string, issues: Issues): void {
  tiers.forEach((t, k) => {
    const previous = tiers[k - 1]
    if (k === 0 && t.firstUnit !== 1) issues.invalid(`${path}[0].firstUnit`, 'the first tier starts at unit 1')
    if (previous && previous.lastUnit !== null && t.firstUnit !== previous.lastUnit + 1) {
      issues.invalid(`${path}[${k}].firstUnit`, `must be ${previous.lastUnit + 1}, the unit after the previous tier's lastUnit`)
    }
    if (t.lastUnit === null && k < tiers.length - 1) issues.invalid(`${path}[${k}].lastUnit`, 'only the last tier may be open-ended (null)')
    if (t.lastUnit !== null && t.lastUnit < t.firstUnit) issues.invalid(`${path}[${k}].lastUnit`, `must be at least firstUnit (${t.firstUnit})`)
  })
}

const grouped = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',')

/** How a pricing page shows the feature, e.g. "Tokens: 1-1,000,000 at $0 each, 1,000,001+ at $0.000002 each". */
function displayText(f: PlanFeatureContent, feature: Feature | undefined): string {
  const title = feature?.title ?? f.featureSlug
  const unit = feature?.unitOfMeasure ?? 'units'
  const c = f.config
  let text: string
  if (c.tiers) {
    text = c.tiers
      .map((t) => `${t.lastUnit === null ? `${grouped(t.firstUnit)}+` : `${grouped(t.firstUnit)}-${grouped(t.lastUnit)}`} at ${t.unitPrice.displayAmount} each`)
      .join(', ')
  } else if (c.units !== undefined) {
    text = `${c.price?.displayAmount ?? ''} per ${grouped(c.units)} ${unit}`
  } else {
    text = f.featureType === 'flat' ? (c.price?.displayAmount ?? '') : `${c.price?.displayAmount ?? ''} each`
  }
  const limit = f.limit === UNLIMITED ? '' : ` (up to ${grouped(f.limit)} ${unit} ${f.resetConfig.name})`
  return `${title}: ${text}${limit}`
}
