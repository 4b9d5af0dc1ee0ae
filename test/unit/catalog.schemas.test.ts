// The catalog schemas (spec 2.2, 2.3, 4.2, 4.3, 4.8, 4.10, 4.14): full examples of each resource
// pass, the reduced entitlement variant of /v1/entitlements/get lacks exactly the fields 4.2 names,
// and request bodies are strict. The examples are typed with the schemas' Static types (the
// answers': the …Answer types), so the type checker holds them to the same shapes.
import { KindGuard, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { describe, expect, test } from 'vitest'
import { namedSchemas } from '../../src/kernel/schema.js'
import * as schemas from '../../src/catalog/schemas.js'
import {
  AccessUpdateRequest,
  EntitlementReducedSchema,
  EntitlementSchema,
  EntitlementsGetResponseSchema,
  EntitlementsListRequest,
  EntitlementsListResponseSchema,
  FeatureListItemSchema,
  FeaturePlanVersionSchema,
  FeatureSchema,
  FeaturesListResponseSchema,
  PlanVersionListItemSchema,
  PlanVersionSchema,
  PlanVersionsListRequest,
  PlanVersionsListResponseSchema,
  PriceSchema,
  SubscriptionGetRequest,
  SubscriptionSchema,
  TierSchema,
  type BillingConfig,
  type EntitlementAnswer as Entitlement,
  type EntitlementReduced,
  type FeatureAnswer as Feature,
  type FeatureListItem,
  type FeaturePlanVersionAnswer as FeaturePlanVersion,
  type FeaturePlanVersionReduced,
  type FeaturesListResponse,
  type MeterConfigAnswer as MeterConfig,
  type MeterConfigReduced,
  type Plan,
  type PlanFeature,
  type PlanVersion,
  type PlanVersionListItem,
  type PlanVersionsListResponse,
  type Price,
  type ResetConfig,
  type Subscription,
  type SubscriptionPhase,
} from '../../src/catalog/schemas.js'

const check = (schema: TSchema, value: unknown) => TypeCompiler.Compile(schema).Check(value)
const errors = (schema: TSchema, value: unknown) => [...TypeCompiler.Compile(schema).Errors(value)].map((e) => `${e.path}: ${e.message}`)

// ---------------------------------------------------------------------------------------------
// Examples: "Acme AI", an AI API company. A metered `tokens` feature with graduated tiers and a
// flat `seats` feature, both in the published version 2 of its Pro plan.

const T0 = 1_735_689_600_000 // 2025-01-01T00:00:00Z
const DAY = 86_400_000
const projectId = 'proj_acme_ai'

const usd = (amount: number, scale: number, displayAmount: string): Price => ({
  dinero: { amount, currency: { code: 'USD', base: 10, exponent: 2 }, scale },
  displayAmount,
})
const free = usd(0, 2, '0')

const tokensMeter: MeterConfig = {
  eventId: 'evt_llm_completion',
  eventSlug: 'llm.completion',
  aggregationMethod: 'sum',
  aggregationField: 'total_tokens',
  filters: { model: ['acme-large', 'acme-small'] },
  groupBy: ['model'],
  windowSize: 'MINUTE',
}

const seatsMeter: MeterConfig = {
  eventId: 'evt_seats_changed',
  eventSlug: 'seats.changed',
  aggregationMethod: 'latest',
  aggregationField: 'seats',
  filters: {},
  groupBy: [],
  windowSize: 'DAY',
}

const tokensFeature: Feature = {
  id: 'feat_tokens',
  projectId,
  createdAtM: T0,
  updatedAtM: T0 + DAY,
  slug: 'tokens',
  code: 1,
  unitOfMeasure: 'tokens',
  title: 'LLM tokens',
  description: 'Input and output tokens of completions',
  meterConfig: tokensMeter,
}

const seatsFeature: Feature = {
  id: 'feat_seats',
  projectId,
  createdAtM: T0,
  updatedAtM: T0,
  slug: 'seats',
  code: 2,
  unitOfMeasure: 'seats',
  title: 'Team seats',
  description: null,
  meterConfig: seatsMeter,
}

const monthly: BillingConfig = { name: 'monthly', billingInterval: 'month', billingIntervalCount: 1, billingAnchor: 'dayOfCreation', planType: 'recurring' }
const monthlyReset: ResetConfig = { name: 'monthly', resetInterval: 'month', resetIntervalCount: 1, resetAnchor: 1, planType: 'recurring' }

const tokensFpv: FeaturePlanVersion = {
  id: 'fpv_pro2_tokens',
  projectId,
  planVersionId: 'pv_pro_2',
  featureId: 'feat_tokens',
  createdAtM: T0 + DAY,
  updatedAtM: T0 + DAY,
  type: 'feature',
  featureType: 'usage',
  unitOfMeasure: 'tokens',
  config: {
    usageMode: 'tier',
    tierMode: 'graduated',
    tiers: [
      { unitPrice: free, flatPrice: free, firstUnit: 1, lastUnit: 1_000_000, label: 'Included' },
      { unitPrice: usd(3, 6, '0.000003'), flatPrice: free, firstUnit: 1_000_001, lastUnit: 50_000_000, label: 'Standard' },
      { unitPrice: usd(2, 6, '0.000002'), flatPrice: free, firstUnit: 50_000_001, lastUnit: null, label: 'Volume' },
    ],
  },
  billingConfig: monthly,
  metadata: {
    realtime: true,
    notifyUsageThreshold: 90,
    overageStrategy: 'always',
    blockCustomer: false,
    hidden: false,
    billingCadenceOverride: false,
    resetCadenceOverride: false,
  },
  order: 1,
  feature: tokensFeature,
  resetConfig: monthlyReset,
  defaultQuantity: 1,
  limit: 200_000_000,
  meterConfig: tokensMeter,
}

const seatsFpv: FeaturePlanVersion = {
  id: 'fpv_pro2_seats',
  projectId,
  planVersionId: 'pv_pro_2',
  featureId: 'feat_seats',
  createdAtM: T0 + DAY,
  updatedAtM: T0 + DAY,
  type: 'feature',
  featureType: 'flat',
  unitOfMeasure: 'seats',
  config: { price: usd(4900, 2, '49') },
  billingConfig: monthly,
  metadata: { overageStrategy: 'none', blockCustomer: true },
  order: 2,
  feature: seatsFeature,
  resetConfig: monthlyReset,
  defaultQuantity: 5,
  limit: 5,
  meterConfig: seatsMeter,
}

const proVersion: PlanVersion = {
  id: 'pv_pro_2',
  projectId,
  createdAtM: T0 + DAY,
  updatedAtM: T0 + 2 * DAY,
  planId: 'plan_pro',
  description: 'For teams shipping AI features',
  latest: true,
  title: 'Pro',
  tags: ['popular', 'teams'],
  active: true,
  status: 'published',
  publishedAt: T0 + 2 * DAY,
  publishedBy: 'user_ops_1',
  archived: false,
  archivedAt: null,
  archivedBy: null,
  paymentProvider: 'stripe',
  dueBehaviour: 'downgrade',
  currency: 'USD',
  billingConfig: monthly,
  whenToBill: 'pay_in_advance',
  gracePeriod: 3,
  collectionMethod: 'charge_automatically',
  trialUnits: 0,
  autoRenew: true,
  metadata: { externalId: 'crm-plan-pro-2', includedCreditAmount: 2_000_000_000 },
  paymentMethodRequired: true,
  version: 2,
  configHash: 'sha256:9f2c4e0b7a51',
}

const draftVersion: PlanVersion = {
  ...proVersion,
  id: 'pv_pro_3',
  latest: false,
  status: 'draft',
  publishedAt: null,
  publishedBy: null,
  version: 3,
  metadata: {},
}

const proPlan: Plan = {
  id: 'plan_pro',
  projectId,
  createdAtM: T0,
  updatedAtM: T0,
  slug: 'pro',
  title: 'Pro',
  active: true,
  description: 'The plan for teams',
  metadata: { externalId: 'crm-plan-pro' },
  defaultPlan: false,
  enterprisePlan: false,
}

/** A feature plan version as the plan version list shows it. */
function planFeature(fpv: FeaturePlanVersion, displayFeatureText: string): PlanFeature {
  const { type: _type, featureType: _featureType, config, ...rest } = fpv
  const { usageMode: _usageMode, tierMode: _tierMode, ...reducedConfig } = config
  return { ...rest, config: reducedConfig, displayFeatureText }
}

const proListItem: PlanVersionListItem = (() => {
  const { status: _s, paymentProvider: _p, dueBehaviour: _d, currency: _c, whenToBill: _w, ...rest } = proVersion
  return {
    ...rest,
    plan: proPlan,
    planFeatures: [planFeature(tokensFpv, '1M tokens included, then from $0.000003 per token'), planFeature(seatsFpv, '5 seats')],
    flatPrice: '$49',
  }
})()

const tokensEntitlement: Entitlement = {
  id: 'ent_cus42_tokens',
  projectId,
  customerId: 'cus_42',
  featurePlanVersionId: 'fpv_pro2_tokens',
  createdAtM: T0 + 3 * DAY,
  updatedAtM: T0 + 3 * DAY,
  subscriptionId: 'sub_cus42',
  subscriptionPhaseId: 'sph_cus42_1',
  subscriptionItemId: 'sit_cus42_tokens',
  effectiveAt: T0 + 3 * DAY,
  expiresAt: null,
  overageStrategy: 'always',
  metadata: { source: 'subscription' } as schemas.EntitlementAnswer['metadata'],
  featurePlanVersion: tokensFpv,
  grants: [
    {
      id: 'gr_cus42_tokens_sub',
      projectId,
      customerEntitlementId: 'ent_cus42_tokens',
      createdAtM: T0 + 3 * DAY,
      updatedAtM: T0 + 3 * DAY,
      effectiveAt: T0 + 3 * DAY,
      expiresAt: T0 + 34 * DAY,
      type: 'subscription',
      priority: 10,
      allowanceUnits: 200_000_000,
      metadata: {},
    },
    {
      id: 'gr_cus42_tokens_promo',
      projectId,
      customerEntitlementId: 'ent_cus42_tokens',
      createdAtM: T0 + 5 * DAY,
      updatedAtM: T0 + 5 * DAY,
      effectiveAt: T0 + 5 * DAY,
      expiresAt: T0 + 35 * DAY,
      type: 'promotion',
      priority: 20,
      allowanceUnits: 5_000_000,
      metadata: { campaign: 'launch-week' },
    },
  ],
  subscriptionPhase: { creditLinePolicy: 'capped' },
}

const { grants: _grants, ...withoutGrants } = tokensEntitlement
const seatsEntitlement: Entitlement = {
  ...withoutGrants,
  id: 'ent_cus42_seats',
  featurePlanVersionId: 'fpv_pro2_seats',
  subscriptionItemId: 'sit_cus42_seats',
  overageStrategy: 'none',
  featurePlanVersion: seatsFpv,
  metadata: {},
  subscriptionPhase: {},
}

const reduceMeter = ({ aggregationMethod: _a, windowSize: _w, ...meter }: MeterConfig): MeterConfigReduced => meter

function reduceFpv(fpv: FeaturePlanVersion): FeaturePlanVersionReduced {
  const { type: _t, featureType: _ft, config, billingConfig, resetConfig, meterConfig, feature, ...rest } = fpv
  const { usageMode: _um, tierMode: _tm, ...reducedConfig } = config
  const { billingInterval: _bi, planType: _bp, ...reducedBilling } = billingConfig
  const { resetInterval: _ri, planType: _rp, ...reducedReset } = resetConfig
  return {
    ...rest,
    config: reducedConfig,
    billingConfig: reducedBilling,
    resetConfig: reducedReset,
    meterConfig: reduceMeter(meterConfig),
    feature: { ...feature, meterConfig: reduceMeter(feature.meterConfig) },
  }
}

/** An entitlement as /v1/entitlements/get answers it. */
function reduceEntitlement(entitlement: Entitlement): EntitlementReduced {
  const { featurePlanVersion, grants, subscriptionPhase: _sp, ...rest } = entitlement
  const reduced: EntitlementReduced = { ...rest, featurePlanVersion: reduceFpv(featurePlanVersion), subscriptionPhase: {} }
  if (grants) reduced.grants = grants.map(({ type: _type, ...grant }) => grant)
  return reduced
}

const subscription: Subscription = (() => {
  const phase: SubscriptionPhase = {
    id: 'sph_cus42_1',
    projectId,
    subscriptionId: 'sub_cus42',
    planVersionId: 'pv_pro_2',
    paymentMethodId: 'pm_sandbox_1',
    paymentProvider: 'sandbox',
    creditLineAmount: 100,
    billingAnchor: 4,
    trialEndsAt: T0 + 3 * DAY,
    startAt: T0 + 3 * DAY,
    endAt: T0 + 368 * DAY,
    planVersion: proVersion,
    createdAtM: T0 + 3 * DAY,
    updatedAtM: T0 + 3 * DAY,
    creditLinePolicy: 'capped',
    trialUnits: 0,
    metadata: { note: 'Upgraded from Free', reason: 'upgrade' },
    items: [
      {
        id: 'sit_cus42_tokens',
        projectId,
        createdAtM: T0 + 3 * DAY,
        updatedAtM: T0 + 3 * DAY,
        units: 1,
        featurePlanVersionId: 'fpv_pro2_tokens',
        subscriptionPhaseId: 'sph_cus42_1',
        subscriptionId: 'sub_cus42',
      },
      {
        id: 'sit_cus42_seats',
        projectId,
        createdAtM: T0 + 3 * DAY,
        updatedAtM: T0 + 3 * DAY,
        units: 5,
        featurePlanVersionId: 'fpv_pro2_seats',
        subscriptionPhaseId: 'sph_cus42_1',
        subscriptionId: 'sub_cus42',
      },
    ],
  }
  return {
    id: 'sub_cus42',
    projectId,
    customerId: 'cus_42',
    createdAtM: T0 + 3 * DAY,
    updatedAtM: T0 + 3 * DAY,
    status: 'active',
    active: true,
    planSlug: 'pro',
    currentCycleStartAt: T0 + 3 * DAY,
    currentCycleEndAt: T0 + 34 * DAY,
    renewAt: T0 + 34 * DAY,
    endAt: T0 + 368 * DAY,
    timezone: 'UTC',
    metadata: { note: 'Annual commitment', dates: { lastChangeAt: T0 + 3 * DAY } },
    project: { enabled: true },
    customer: { active: true },
    activePhase: phase,
  }
})()

const featureListItem = ({ createdAtM: _c, updatedAtM: _u, ...rest }: Feature): FeatureListItem => rest
const featuresList: FeaturesListResponse = { features: [featureListItem(tokensFeature), featureListItem(seatsFeature)] }
const planVersionsList: PlanVersionsListResponse = { planVersions: [proListItem] }

// ---------------------------------------------------------------------------------------------

/** Every property name anywhere in a schema (through properties, items, unions and intersections). */
function propertyNames(schema: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(schema)) {
    for (const item of schema) propertyNames(item, into)
  } else if (schema && typeof schema === 'object') {
    const s = schema as Record<string, unknown>
    if (s.properties && typeof s.properties === 'object') {
      for (const [name, child] of Object.entries(s.properties)) {
        into.add(name)
        propertyNames(child, into)
      }
    }
    for (const key of ['items', 'anyOf', 'allOf', 'oneOf', 'additionalProperties', 'patternProperties']) propertyNames(s[key], into)
  }
  return into
}

type ObjectSchema = { properties: Record<string, ObjectSchema & { items?: ObjectSchema }>; additionalProperties?: unknown }
const at = (schema: TSchema, ...path: string[]): ObjectSchema => {
  let node = schema as unknown as ObjectSchema & { items?: ObjectSchema }
  for (const key of path) {
    const next: (ObjectSchema & { items?: ObjectSchema }) | undefined = key === '[]' ? node.items : node.properties[key]
    if (!next) throw new Error(`no ${key} in ${path.join('.')}`)
    node = next
  }
  return node
}
const keysAt = (schema: TSchema, ...path: string[]) => Object.keys(at(schema, ...path).properties)

const exported = Object.entries(schemas as Record<string, unknown>).filter((entry): entry is [string, TSchema] => KindGuard.IsSchema(entry[1]))

describe('catalog schemas', () => {
  test('every exported schema compiles, is self-contained (no $ref), and an $id names one schema (an OpenAPI component)', () => {
    expect(exported.length).toBeGreaterThan(30)
    const named = new Map<string, TSchema>()
    for (const [name, schema] of exported) {
      expect(() => TypeCompiler.Compile(schema), name).not.toThrow()
      expect(JSON.stringify(schema), name).not.toContain('"$ref"')
      expect(() => namedSchemas(schema, named), name).not.toThrow()
    }
  })

  test('the full examples of each resource pass', () => {
    const cases: [string, TSchema, unknown][] = [
      ['price', PriceSchema, usd(3, 6, '0.000003')],
      ['open tier', TierSchema, tokensFpv.config.tiers![2]],
      ['feature', FeatureSchema, tokensFeature],
      ['feature list item', FeatureListItemSchema, featureListItem(seatsFeature)],
      ['features list', FeaturesListResponseSchema, featuresList],
      ['tokens feature plan version', FeaturePlanVersionSchema, tokensFpv],
      ['seats feature plan version', FeaturePlanVersionSchema, seatsFpv],
      ['entitlement', EntitlementSchema, tokensEntitlement],
      ['entitlement without grants', EntitlementSchema, seatsEntitlement],
      ['entitlements list', EntitlementsListResponseSchema, [tokensEntitlement, seatsEntitlement]],
      ['reduced entitlement', EntitlementReducedSchema, reduceEntitlement(tokensEntitlement)],
      ['entitlements get', EntitlementsGetResponseSchema, [tokensEntitlement, seatsEntitlement].map(reduceEntitlement)],
      ['published plan version', PlanVersionSchema, proVersion],
      ['draft plan version', PlanVersionSchema, draftVersion],
      ['plan version list item', PlanVersionListItemSchema, proListItem],
      ['plan versions list', PlanVersionsListResponseSchema, planVersionsList],
      ['subscription', SubscriptionSchema, subscription],
    ]
    for (const [name, schema, value] of cases) expect(errors(schema, value), name).toEqual([])
  })

  test('answers may grow: unknown properties are accepted in responses', () => {
    expect(check(FeaturePlanVersionSchema, { ...tokensFpv, newField: 1 })).toBe(true)
    expect(check(SubscriptionSchema, { ...subscription, activePhase: { ...subscription.activePhase, extra: true } })).toBe(true)
    expect(check(EntitlementReducedSchema, { ...reduceEntitlement(tokensEntitlement), extra: 'x' })).toBe(true)
  })

  test('enums, limits and nullability of responses are enforced', () => {
    expect(check(FeaturePlanVersionSchema, { ...tokensFpv, featureType: 'metered' })).toBe(false)
    expect(check(FeaturePlanVersionSchema, { ...tokensFpv, type: 'addon' })).toBe(false)
    expect(check(FeaturePlanVersionSchema, { ...tokensFpv, config: { ...tokensFpv.config, tierMode: 'stairstep' } })).toBe(false)
    expect(check(FeatureSchema, { ...tokensFeature, meterConfig: { ...tokensMeter, windowSize: 'WEEK' } })).toBe(false)
    expect(check(FeatureSchema, { ...tokensFeature, meterConfig: { ...tokensMeter, aggregationMethod: 'avg' } })).toBe(false)
    expect(check(FeatureSchema, { ...tokensFeature, createdAtM: T0 + 0.5 })).toBe(false)
    expect(check(FeatureListItemSchema, { ...tokensFeature })).toBe(true) // createdAtM is no longer required, and may grow back
    expect(check(EntitlementSchema, { ...tokensEntitlement, overageStrategy: 'sometimes' })).toBe(false)
    expect(check(EntitlementSchema, { ...tokensEntitlement, customerId: 'c'.repeat(37) })).toBe(false)
    expect(check(EntitlementSchema, { ...tokensEntitlement, subscriptionId: null, subscriptionPhaseId: null, subscriptionItemId: null })).toBe(true)
    expect(check(EntitlementSchema, { ...tokensEntitlement, subscriptionPhase: { creditLinePolicy: 'overdraft' } })).toBe(false)
    expect(check(PlanVersionSchema, { ...proVersion, status: 'archived' })).toBe(false)
    expect(check(PlanVersionSchema, { ...proVersion, currency: 'GBP' })).toBe(false)
    expect(check(PlanVersionSchema, { ...proVersion, metadata: { includedCreditAmount: 4503599627370495 } })).toBe(true)
    expect(check(PlanVersionSchema, { ...proVersion, metadata: { includedCreditAmount: 4503599627370496 } })).toBe(false)
    expect(check(PlanVersionSchema, { ...proVersion, metadata: { includedCreditAmount: 1.5 } })).toBe(false)
    expect(check(PlanVersionSchema, { ...proVersion, billingConfig: { ...monthly, billingAnchor: 'dayOfMonth' } })).toBe(false)
    expect(check(SubscriptionSchema, { ...subscription, status: 'paused' })).toBe(false)
    expect(check(SubscriptionSchema, { ...subscription, planSlug: '' })).toBe(false)
    // No sentinels (README.md, "Shapes"): null or absent for no end, no limit, no field; prices as plain decimals.
    expect(check(FeaturePlanVersionSchema, { ...tokensFpv, limit: null })).toBe(true)
    expect(check(SubscriptionSchema, { ...subscription, endAt: null, renewAt: null, currentCycleEndAt: null })).toBe(true)
    expect(check(SubscriptionSchema, { ...subscription, activePhase: { ...subscription.activePhase, endAt: null } })).toBe(true)
    const { aggregationField: _field, ...countMeter } = { ...tokensMeter, aggregationMethod: 'count' as const }
    expect(check(FeatureSchema, { ...tokensFeature, meterConfig: countMeter })).toBe(true)
    expect(check(FeatureSchema, { ...tokensFeature, meterConfig: { ...countMeter, aggregationField: '' } })).toBe(false)
    expect(check(PriceSchema, usd(4900, 2, '49'))).toBe(true)
    expect(check(PriceSchema, usd(4900, 2, '$49'))).toBe(false)
    expect(check(PriceSchema, usd(4900000, 2, '49,000'))).toBe(false)
    expect(check(SubscriptionSchema, { ...subscription, timezone: '' })).toBe(false)
    expect(check(SubscriptionSchema, { ...subscription, activePhase: { ...subscription.activePhase, creditLinePolicy: 'soft' } })).toBe(false)
  })

  test('the phase trialUnits defaults to 0', () => {
    expect(at(SubscriptionSchema, 'activePhase', 'trialUnits')).toMatchObject({ default: 0 })
  })
})

describe('the reduced entitlement of /v1/entitlements/get (4.2)', () => {
  const omitted = ['type', 'featureType', 'usageMode', 'tierMode', 'billingInterval', 'planType', 'resetInterval', 'aggregationMethod', 'windowSize']

  test('no omitted field appears anywhere under featurePlanVersion or in grants', () => {
    const names = propertyNames(at(EntitlementReducedSchema, 'featurePlanVersion'))
    for (const name of omitted) expect(names.has(name), `featurePlanVersion …${name}`).toBe(false)
    expect(keysAt(EntitlementReducedSchema, 'grants', '[]')).not.toContain('type')
    // ...whereas the full schema has every one of them (so the walk above looks in the right places).
    const full = propertyNames(at(EntitlementSchema, 'featurePlanVersion'))
    for (const name of omitted) expect(full.has(name), `full featurePlanVersion …${name}`).toBe(true)
  })

  test('each omitted field is gone at its own depth, and nothing else is', () => {
    const depths: [string[], string[]][] = [
      [['featurePlanVersion'], ['type', 'featureType']],
      [
        ['featurePlanVersion', 'config'],
        ['usageMode', 'tierMode'],
      ],
      [
        ['featurePlanVersion', 'billingConfig'],
        ['billingInterval', 'planType'],
      ],
      [
        ['featurePlanVersion', 'resetConfig'],
        ['resetInterval', 'planType'],
      ],
      [
        ['featurePlanVersion', 'meterConfig'],
        ['aggregationMethod', 'windowSize'],
      ],
      [
        ['featurePlanVersion', 'feature', 'meterConfig'],
        ['aggregationMethod', 'windowSize'],
      ],
      [['grants', '[]'], ['type']],
    ]
    for (const [path, gone] of depths) {
      const fullKeys = keysAt(EntitlementSchema, ...path)
      for (const name of gone) expect(fullKeys, `full ${path.join('.')}`).toContain(name)
      expect(keysAt(EntitlementReducedSchema, ...path).sort(), path.join('.')).toEqual(fullKeys.filter((k) => !gone.includes(k)).sort())
    }
    expect(keysAt(EntitlementReducedSchema).sort()).toEqual(keysAt(EntitlementSchema).sort())
    expect(keysAt(EntitlementReducedSchema, 'featurePlanVersion', 'feature').sort()).toEqual(keysAt(EntitlementSchema, 'featurePlanVersion', 'feature').sort())
  })

  test('required-ness is kept: what the full schema requires, the reduced one requires', () => {
    const required = (schema: TSchema, ...path: string[]) => ((at(schema, ...path) as unknown as { required?: string[] }).required ?? []).sort()
    expect(required(EntitlementReducedSchema).filter((k) => k !== 'subscriptionPhase')).toEqual(required(EntitlementSchema))
    expect(required(EntitlementReducedSchema, 'featurePlanVersion')).toEqual(
      required(EntitlementSchema, 'featurePlanVersion').filter((k) => !omitted.includes(k)),
    )
    expect(required(EntitlementReducedSchema, 'featurePlanVersion', 'config')).toEqual([])
    expect(required(EntitlementReducedSchema, 'grants', '[]')).toEqual(required(EntitlementSchema, 'grants', '[]').filter((k) => k !== 'type'))
  })

  test('subscriptionPhase is an empty object', () => {
    const phase = at(EntitlementReducedSchema, 'subscriptionPhase')
    expect(phase.properties).toEqual({})
    expect(phase.additionalProperties).toBe(false)
    expect(check(EntitlementReducedSchema, { ...reduceEntitlement(tokensEntitlement), subscriptionPhase: { creditLinePolicy: 'capped' } })).toBe(false)
    const { subscriptionPhase: _sp, ...withoutPhase } = reduceEntitlement(tokensEntitlement)
    expect(check(EntitlementReducedSchema, withoutPhase)).toBe(false)
  })

  test('the plan version list variant drops what 2.3 says and adds plan, planFeatures and flatPrice', () => {
    const full = keysAt(PlanVersionSchema)
    const list = keysAt(PlanVersionListItemSchema)
    const dropped = ['status', 'paymentProvider', 'dueBehaviour', 'currency', 'whenToBill']
    expect(list.sort()).toEqual([...full.filter((k) => !dropped.includes(k)), 'plan', 'planFeatures', 'flatPrice'].sort())
    const features = propertyNames(at(PlanVersionListItemSchema, 'planFeatures', '[]'))
    for (const name of ['displayFeatureText', 'config', 'billingConfig', 'feature']) expect(features.has(name), name).toBe(true)
    for (const name of ['featureType', 'usageMode', 'tierMode']) expect(features.has(name), name).toBe(false)
    expect(keysAt(PlanVersionListItemSchema, 'planFeatures', '[]')).not.toContain('type')
    expect(keysAt(FeatureListItemSchema).sort()).toEqual(
      keysAt(FeatureSchema)
        .filter((k) => k !== 'createdAtM' && k !== 'updatedAtM')
        .sort(),
    )
  })
})

describe('request bodies are strict', () => {
  test('entitlements list / get', () => {
    expect(check(EntitlementsListRequest, { customerId: 'cus_42' })).toBe(true)
    expect(check(EntitlementsListRequest, { customerId: 'cus_42', projectId })).toBe(true)
    expect(check(EntitlementsListRequest, {})).toBe(false)
    expect(check(EntitlementsListRequest, { customerId: '' })).toBe(false)
    expect(check(EntitlementsListRequest, { customerId: 'c'.repeat(37) })).toBe(false)
    expect(check(EntitlementsListRequest, { customerId: 'cus_42', featureSlug: 'tokens' })).toBe(false)
  })

  test('subscription get', () => {
    expect(check(SubscriptionGetRequest, {})).toBe(true)
    expect(check(SubscriptionGetRequest, { customerId: 'cus_42', projectId })).toBe(true)
    expect(check(SubscriptionGetRequest, { customerId: 42 })).toBe(false)
    expect(check(SubscriptionGetRequest, { customerId: 'cus_42', subscriptionId: 'sub_1' })).toBe(false)
  })

  test('plan versions list', () => {
    expect(check(PlanVersionsListRequest, {})).toBe(true)
    const all = { onlyPublished: true, onlyEnterprisePlan: false, onlyLatest: true, planVersionIds: ['pv_pro_2'], billingInterval: 'month', currency: 'EUR' }
    expect(errors(PlanVersionsListRequest, all)).toEqual([])
    for (const billingInterval of ['month', 'year', 'week', 'day', 'minute', 'onetime']) expect(check(PlanVersionsListRequest, { billingInterval })).toBe(true)
    expect(check(PlanVersionsListRequest, { billingInterval: 'quarter' })).toBe(false)
    expect(check(PlanVersionsListRequest, { currency: 'GBP' })).toBe(false)
    expect(check(PlanVersionsListRequest, { onlyPublished: 'true' })).toBe(false)
    expect(check(PlanVersionsListRequest, { planVersionIds: 'pv_pro_2' })).toBe(false)
    expect(check(PlanVersionsListRequest, { planVersionIds: [''] })).toBe(false)
    expect(check(PlanVersionsListRequest, { ...all, limit: 10 })).toBe(false)
  })

  test('access update', () => {
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: { customerUsageLimitReached: true } })).toBe(true)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: { customerDisabled: false, subscriptionStatus: 'past_due' } })).toBe(true)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: {} }), 'at least one update').toBe(false)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42' })).toBe(false)
    expect(check(AccessUpdateRequest, { updates: { customerDisabled: true } })).toBe(false)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: { subscriptionStatus: 'paused' } })).toBe(false)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: { customerDisabled: true, banned: true } })).toBe(false)
    expect(check(AccessUpdateRequest, { customerId: 'cus_42', updates: { customerDisabled: true }, reason: 'x' })).toBe(false)
  })
})
