// The catalog's read routes, each answer checked against the spec's TypeBox response schemas
// (src/catalog/schemas.ts) with TypeCompiler: entitlements (full and the reduced variant),
// subscriptions with their cycles (time zones included), plan versions with every filter of
// 4.10, one plan version, features; access flags and a disabled customer; other projects; and
// that a customer read is one Redis command (entitlements with their usage: one script call).
import { readFileSync } from 'node:fs'
import type { Static, TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import {
  EntitlementsGetResponseSchema,
  EntitlementsListResponseSchema,
  FeaturesListResponseSchema,
  PlanVersionGetResponseSchema,
  PlanVersionSchema,
  PlanVersionsListResponseSchema,
  SubscriptionSchema,
} from '../../src/catalog/schemas.js'
import { EntitlementService } from '../../src/entitlements/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { getPlanVersion } from '../../src/http/routes/planVersions/get.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { expectError } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

const DOCS = 'https://docs.metering.dev'
const EXAMPLE = JSON.parse(readFileSync(new URL('../../examples/ai-api-catalog.json', import.meta.url), 'utf8'))
const MARCH_15 = Date.UTC(2025, 2, 15, 12)

/** What the example lacks for the filters of 4.10: a published enterprise version, yearly, in EUR; and a customer in a trial. */
const EXTRA = {
  // A feature counting its events (no meterConfig: a count of events named like it) and with no description.
  features: [{ slug: 'calls', title: 'Calls', unitOfMeasure: 'calls' }],
  planVersions: [
    {
      plan: 'enterprise',
      version: 1,
      status: 'published',
      title: 'Enterprise',
      currency: 'EUR',
      billingConfig: { billingInterval: 'year' },
      features: [
        {
          featureSlug: 'seats',
          featureType: 'tier',
          config: {
            tierMode: 'volume',
            tiers: [
              { firstUnit: 1, lastUnit: 100, unitPrice: '30' },
              { firstUnit: 101, lastUnit: null, unitPrice: '25' },
            ],
          },
        },
      ],
    },
    {
      plan: 'free',
      version: 2,
      status: 'published',
      title: 'Free with a trial',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      trialUnits: 1,
      features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '0' } }],
    },
  ],
  customers: [{ id: 'trialer' }, { id: 'later' }],
  subscriptions: [
    { id: 'sub_trialer', customerId: 'trialer', phases: [{ plan: 'free', version: 2, startAt: Date.UTC(2025, 2, 1) }] },
    { id: 'sub_later', customerId: 'later', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2026, 0, 1) }] },
  ],
}

const compiled = new Map<TSchema, ReturnType<typeof TypeCompiler.Compile>>()
/** Asserts the value has the schema's shape (TypeCompiler), naming the first errors otherwise. */
function expectShape<T extends TSchema>(schema: T, value: unknown): asserts value is Static<T> {
  let check = compiled.get(schema)
  if (!check) {
    check = TypeCompiler.Compile(schema)
    compiled.set(schema, check)
  }
  const errors = [...check.Errors(value)].slice(0, 5).map((e) => `${e.path}: ${e.message}`)
  expect(errors, JSON.stringify(value).slice(0, 500)).toEqual([])
}

/** Every key of every object at any depth. */
function keysDeep(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) keysDeep(v, into)
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      into.add(k)
      keysDeep(v, into)
    }
  }
  return into
}

let gw: TestGateway
let apiKey: string
let projectId: string
beforeAll(async () => {
  gw = await startTestGateway({}, MARCH_15)
  ;({ apiKey, projectId } = await gw.project())
  for (const doc of [EXAMPLE, EXTRA]) {
    const res = await gw.post('/v1/config/apply', doc, apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
  }
})
afterAll(async () => {
  await gw?.close()
})

const entitlements = (customerId: string, key = apiKey) => gw.post('/v1/access/entitlements/list', { customerId }, key)
const subscription = (customerId: string, key = apiKey) => gw.post('/v1/subscriptions/get', { customerId }, key)
const planVersions = (body: unknown, path = '/v1/plan-versions/list') => gw.post(path, body, apiKey)

describe('POST /v1/access/entitlements/list', () => {
  test('active entitlements with their grants, in the shape of 2.2', async () => {
    gw.clock.set(MARCH_15)
    const res = await entitlements('acme')
    expect(res.status).toBe(200)
    expectShape(EntitlementsListResponseSchema, res.body)
    expect(res.body.map((e) => e.featurePlanVersion.feature.slug)).toEqual(['seats', 'tokens', 'run-budget'])
    for (const e of res.body) {
      expect(e).toMatchObject({ projectId, customerId: 'acme', subscriptionId: 'sub_acme', expiresAt: null, subscriptionPhase: { creditLinePolicy: 'capped' } })
      // Beside the flags, the usage counted against the entitlement (src/entitlements/README.md).
      expect(e.metadata).toEqual({
        customerDisabled: false,
        customerUsageLimitReached: false,
        subscriptionStatus: 'active',
        usage: expect.objectContaining({ usage: '0', denied: false }),
      })
      for (const id of [e.id, e.featurePlanVersionId, e.subscriptionPhaseId!, e.subscriptionItemId!, ...e.grants!.map((g) => g.id)])
        expect(id.length).toBeLessThanOrEqual(36)
      for (const g of e.grants!) expect(g.customerEntitlementId).toBe(e.id)
    }
    const tokens = res.body[1]!
    expect(tokens.featurePlanVersion).toMatchObject({ type: 'feature', featureType: 'usage', config: { usageMode: 'tier', tierMode: 'graduated' } })
    expect(tokens.featurePlanVersion.config.tiers!.map((t) => [t.firstUnit, t.lastUnit, t.unitPrice.displayAmount])).toEqual([
      // Plain decimals, as the peer API sends them (README.md, "Shapes").
      [1, 1_000_000, '0'],
      [1_000_001, 50_000_000, '0.000002'],
      [50_000_001, null, '0.0000015'],
    ])
    expect(tokens.featurePlanVersion.config.tiers![1]!.unitPrice.dinero).toEqual({ amount: 2, currency: { code: 'USD', base: 10, exponent: 2 }, scale: 6 })
    expect(tokens.featurePlanVersion.meterConfig).toMatchObject({
      eventSlug: 'llm.completion',
      aggregationMethod: 'sum',
      aggregationField: 'total_tokens',
      groupBy: ['model'],
    })
    // Higher priority first: the promotion before the subscription's own grant.
    expect(tokens.grants!.map((g) => [g.type, g.priority])).toEqual([
      ['promotion', 80],
      ['subscription', 20],
    ])
    // Pro's tokens have no limit: null, never a far-away number, and so the usage's limit and remaining; no end: null.
    expect(tokens.featurePlanVersion.limit).toBeNull()
    expect(tokens.grants!.map((g) => [g.allowanceUnits, g.expiresAt])).toEqual([
      [2_000_000, Date.UTC(2030, 0, 1)],
      [null, null],
    ])
    expect(tokens.metadata.usage).toMatchObject({ usage: '0', limit: null, remaining: null })
    expect(res.body[2]!.featurePlanVersion.limit).toBe(100_000) // run-budget: a limit of 100,000 a day
    expect(tokens.featurePlanVersion.feature.description).toBe('Input and output tokens of completions')
  })

  test('an entitlement from a grant outside any subscription, beside the subscription ones', async () => {
    gw.clock.set(MARCH_15)
    const res = await entitlements('globex')
    expectShape(EntitlementsListResponseSchema, res.body)
    const standalone = res.body.filter((e) => e.subscriptionId === null)
    expect(standalone).toHaveLength(1)
    expect(standalone[0]).toMatchObject({
      subscriptionPhaseId: null,
      subscriptionItemId: null,
      effectiveAt: Date.UTC(2025, 0, 10),
      expiresAt: null,
      overageStrategy: 'last-call',
      subscriptionPhase: {},
    })
    expect(standalone[0]!.grants).toEqual([expect.objectContaining({ id: 'grant_globex_runs', type: 'addon', allowanceUnits: 2000, expiresAt: null })])
    expect(res.body.filter((e) => e.subscriptionId === 'sub_globex').map((e) => e.featurePlanVersion.feature.slug)).toEqual(['seats', 'tokens', 'run-budget'])
  })

  test('with a moving clock: phases switch plan versions, grants start and expire', async () => {
    gw.clock.set(Date.UTC(2025, 0, 15))
    const january = await entitlements('acme')
    expectShape(EntitlementsListResponseSchema, january.body)
    // On the free plan: its limits, and the promotion (from 1 February) not yet.
    expect(january.body.map((e) => [e.featurePlanVersion.feature.slug, e.grants!.map((g) => g.allowanceUnits)])).toEqual([
      ['seats', [1]],
      ['tokens', [100_000]],
      ['run-budget', [500]],
    ])
    gw.clock.set(Date.UTC(2025, 1, 1) - 1)
    expect((await entitlements('acme')).body[1].grants.map((g: any) => g.type)).toEqual(['subscription'])
    gw.clock.set(Date.UTC(2025, 1, 1))
    expect((await entitlements('acme')).body[1].grants.map((g: any) => g.type)).toEqual(['promotion', 'subscription'])
    gw.clock.set(Date.UTC(2030, 0, 1))
    expect((await entitlements('acme')).body[1].grants.map((g: any) => g.type)).toEqual(['subscription'])
    // Before the subscription starts, nothing.
    gw.clock.set(Date.UTC(2024, 11, 31))
    expect((await entitlements('acme')).body).toEqual([])
    gw.clock.set(MARCH_15)
  })

  test('an unknown customer is 404 customer_not_found', async () => {
    const res = await entitlements('nobody')
    expectError(res, 404, 'NOT_FOUND', DOCS)
    expect(res.body.error.details.reason).toBe('customer_not_found')
  })
})

describe('POST /v1/entitlements/get (the reduced variant)', () => {
  test('the same entitlements without the fields 4.2 names, grants without type, an empty subscriptionPhase', async () => {
    gw.clock.set(MARCH_15)
    const [full, reduced] = await Promise.all([entitlements('acme'), gw.post('/v1/entitlements/get', { customerId: 'acme' }, apiKey)])
    expect(reduced.status).toBe(200)
    expectShape(EntitlementsGetResponseSchema, reduced.body)
    const keys = keysDeep(reduced.body)
    for (const omitted of ['type', 'featureType', 'usageMode', 'tierMode', 'billingInterval', 'planType', 'resetInterval', 'aggregationMethod', 'windowSize']) {
      expect(keys.has(omitted), omitted).toBe(false)
    }
    expect(reduced.body.map((e) => e.subscriptionPhase)).toEqual([{}, {}, {}])
    expect(reduced.body.map((e) => e.id)).toEqual(full.body.map((e: any) => e.id))
    expect(reduced.body[1]!.grants!.map((g) => g.allowanceUnits)).toEqual(full.body[1].grants.map((g: any) => g.allowanceUnits))
    expect(reduced.body[1]!.featurePlanVersion.billingConfig).toEqual({ name: 'monthly', billingIntervalCount: 1, billingAnchor: 1 })
  })
})

describe('POST /v1/subscriptions/get', () => {
  test('the subscription with its active phase, plan version, items and current cycle (anchored on the 1st)', async () => {
    gw.clock.set(MARCH_15)
    const res = await subscription('acme')
    expect(res.status).toBe(200)
    expectShape(SubscriptionSchema, res.body)
    expect(res.body).toMatchObject({
      id: 'sub_acme',
      customerId: 'acme',
      status: 'active',
      active: true,
      planSlug: 'pro',
      timezone: 'UTC',
      currentCycleStartAt: Date.UTC(2025, 2, 1),
      currentCycleEndAt: Date.UTC(2025, 3, 1),
      renewAt: Date.UTC(2025, 3, 1),
      endAt: null,
      metadata: { dates: { lastChangeAt: Date.UTC(2025, 1, 1) } },
      project: { enabled: true },
      customer: { active: true },
    })
    const phase = res.body.activePhase
    expect(phase).toMatchObject({
      subscriptionId: 'sub_acme',
      startAt: Date.UTC(2025, 1, 1),
      endAt: null,
      billingAnchor: 1,
      trialUnits: 0,
      metadata: { reason: 'upgrade' },
    })
    expect(phase.planVersion).toMatchObject({ title: 'Pro', version: 1, status: 'published', latest: true, currency: 'USD' })
    expect(phase.items.map((i) => i.units)).toEqual([5, 1, 1])
    for (const item of phase.items) expect(item).toMatchObject({ subscriptionPhaseId: phase.id, subscriptionId: 'sub_acme' })
  })

  test("cycles are laid in the subscription's time zone: Berlin across the March DST change", async () => {
    gw.clock.set(MARCH_15)
    const res = await subscription('globex')
    expectShape(SubscriptionSchema, res.body)
    // Started 2025-01-10 01:00 Berlin (00:00 UTC): cycles start on the 10th at 01:00 Berlin time.
    expect(res.body).toMatchObject({
      planSlug: 'free',
      timezone: 'Europe/Berlin',
      currentCycleStartAt: Date.UTC(2025, 2, 10),
      currentCycleEndAt: Date.UTC(2025, 3, 9, 23),
    })
    expect(res.body.activePhase.billingAnchor).toBe(10)
  })

  test('trialing during the trial, active after it', async () => {
    gw.clock.set(MARCH_15)
    const trial = await subscription('trialer')
    expectShape(SubscriptionSchema, trial.body)
    expect(trial.body).toMatchObject({ status: 'trialing', active: true })
    expect(trial.body.activePhase).toMatchObject({ trialUnits: 1, trialEndsAt: Date.UTC(2025, 3, 1) })
    gw.clock.set(Date.UTC(2025, 3, 1))
    expect((await subscription('trialer')).body.status).toBe('active')
    gw.clock.set(MARCH_15)
  })

  test('no subscription in effect now is 404 subscription_not_found; an unknown customer 404 customer_not_found', async () => {
    gw.clock.set(MARCH_15)
    const later = await subscription('later')
    expectError(later, 404, 'NOT_FOUND', DOCS)
    expect(later.body.error.details.reason).toBe('subscription_not_found')
    const nobody = await subscription('nobody')
    expectError(nobody, 404, 'NOT_FOUND', DOCS)
    expect(nobody.body.error.details.reason).toBe('customer_not_found')
  })
})

describe('POST /v1/plan-versions/list and /v1/plans/versions/list (4.10)', () => {
  const names = (res: { body: any }) => res.body.planVersions.map((v: any) => `${v.plan.slug}@${v.version}`)

  test('the list variant, in plan and version order', async () => {
    const res = await planVersions({})
    expect(res.status).toBe(200)
    expectShape(PlanVersionsListResponseSchema, res.body)
    expect(names(res)).toEqual(['enterprise@1', 'free@1', 'free@2', 'pro@1', 'pro@2'])
    const keys = keysDeep(res.body.planVersions.map((v: any) => ({ ...v, plan: null, planFeatures: null })))
    for (const omitted of ['status', 'paymentProvider', 'dueBehaviour', 'currency', 'whenToBill']) expect(keys.has(omitted), omitted).toBe(false)
    const pro = res.body.planVersions[3]!
    expect(pro).toMatchObject({
      flatPrice: '$20',
      plan: { slug: 'pro', defaultPlan: false, enterprisePlan: false },
      metadata: { includedCreditAmount: 500_000_000 },
    })
    expect(pro.planFeatures.map((f: any) => f.displayFeatureText)).toEqual([
      'Seats: $20',
      'Tokens: 1-1,000,000 at $0 each, 1,000,001-50,000,000 at $0.000002 each, 50,000,001+ at $0.0000015 each',
      'Agent run budget: $0.01 each (up to 100,000 usd_cents daily)',
    ])
    for (const f of pro.planFeatures) for (const omitted of ['type', 'featureType']) expect(f).not.toHaveProperty(omitted)
    expect(pro.planFeatures[1]!.config).not.toHaveProperty('usageMode')
  })

  test.each<[string, Record<string, unknown>, string[]]>([
    ['onlyPublished', { onlyPublished: true }, ['enterprise@1', 'free@1', 'free@2', 'pro@1']],
    ['onlyEnterprisePlan', { onlyEnterprisePlan: true }, ['enterprise@1']],
    ['onlyLatest', { onlyLatest: true }, ['enterprise@1', 'free@2', 'pro@1']],
    ['billingInterval year', { billingInterval: 'year' }, ['enterprise@1']],
    ['billingInterval month', { billingInterval: 'month' }, ['free@1', 'free@2', 'pro@1', 'pro@2']],
    ['billingInterval week (none)', { billingInterval: 'week' }, []],
    ['currency EUR', { currency: 'EUR' }, ['enterprise@1']],
    ['currency USD and onlyPublished', { currency: 'USD', onlyPublished: true }, ['free@1', 'free@2', 'pro@1']],
    [
      'false flags filter nothing',
      { onlyPublished: false, onlyLatest: false, onlyEnterprisePlan: false },
      ['enterprise@1', 'free@1', 'free@2', 'pro@1', 'pro@2'],
    ],
  ])('filter %s, the same on both routes', async (_name, body, expected) => {
    const [a, b] = await Promise.all([planVersions(body), planVersions(body, '/v1/plans/versions/list')])
    expectShape(PlanVersionsListResponseSchema, a.body)
    expect(names(a)).toEqual(expected)
    expect(b.body).toEqual(a.body)
  })

  test('filter planVersionIds, alone and with another filter', async () => {
    const all = (await planVersions({})).body.planVersions
    const ids = [all[0].id, all[4].id]
    expect(names(await planVersions({ planVersionIds: ids }))).toEqual(['enterprise@1', 'pro@2'])
    expect(names(await planVersions({ planVersionIds: ids, onlyPublished: true }))).toEqual(['enterprise@1'])
    expect(names(await planVersions({ planVersionIds: ['pv_nope'] }))).toEqual([])
  })

  test('a filter value outside its set is 400 at its path', async () => {
    expectError(await planVersions({ currency: 'GBP' }), 400, 'BAD_REQUEST', DOCS)
    const res = await planVersions({ billingInterval: 'fortnight' })
    expect(res.body.error.details.issues.map((i: any) => i.path)).toEqual(['$.billingInterval'])
  })
})

describe('GET /v1/plan-versions/get/:planVersionId', () => {
  test('a published version, with its plan and features', async () => {
    const pro = (await planVersions({ onlyLatest: true })).body.planVersions.find((v: any) => v.plan.slug === 'pro')
    const res = await gw.get(`/v1/plan-versions/get/${pro.id}`, apiKey)
    expect(res.status).toBe(200)
    expectShape(getPlanVersion.response, res.body)
    expectShape(PlanVersionGetResponseSchema, res.body)
    expect(Object.keys(res.body)).toEqual(['planVersion'])
    const planVersion = res.body.planVersion
    expectShape(PlanVersionSchema, planVersion)
    expect(planVersion).toMatchObject({
      id: pro.id,
      status: 'published',
      currency: 'USD',
      whenToBill: 'pay_in_advance',
      version: 1,
      plan: { slug: 'pro' },
      flatPrice: '$20',
    })
    expect(planVersion.configHash).toMatch(/^[0-9a-f]{64}$/)
    // The full feature configs (the list variant drops type, featureType, usageMode and tierMode), with displayFeatureText.
    expect(planVersion.planFeatures).toHaveLength(3)
    const tokens = planVersion.planFeatures.find((f) => f.feature.slug === 'tokens')!
    expect(tokens).toMatchObject({ type: 'feature', featureType: 'usage', config: { usageMode: 'tier', tierMode: 'graduated' }, limit: null })
    expect(tokens.displayFeatureText).toContain('$0.000002')
    expect(tokens.config.tiers!.map((t) => t.unitPrice.displayAmount)).toEqual(['0', '0.000002', '0.0000015'])
    const listed = pro.planFeatures.find((f: any) => f.feature.slug === 'tokens')
    expect(listed).not.toHaveProperty('featureType')
    expect(listed.limit).toBeNull()
  })

  test("a draft, an unknown id, and another project's version are 404", async () => {
    const draft = (await planVersions({})).body.planVersions.find((v: any) => v.plan.slug === 'pro' && v.version === 2)
    for (const id of [draft.id, 'pv_unknown', 'x'.repeat(200)]) {
      const res = await gw.get(`/v1/plan-versions/get/${id}`, apiKey)
      expectError(res, 404, 'NOT_FOUND', DOCS)
      expect(res.body.error.details.reason).toBe('plan_version_not_found')
    }
    const other = await gw.project()
    const published = (await planVersions({ onlyPublished: true })).body.planVersions[0]
    expectError(await gw.get(`/v1/plan-versions/get/${published.id}`, other.apiKey), 404, 'NOT_FOUND', DOCS)
  })
})

describe('GET /v1/features/list', () => {
  test('features without createdAtM and updatedAtM', async () => {
    const res = await gw.get('/v1/features/list', apiKey)
    expect(res.status).toBe(200)
    expectShape(FeaturesListResponseSchema, res.body)
    expect(res.body.features.map((f) => [f.slug, f.code, f.unitOfMeasure])).toEqual([
      ['seats', 1, 'seats'],
      ['tokens', 2, 'tokens'],
      ['run-budget', 3, 'usd_cents'],
      ['calls', 4, 'calls'],
    ])
    for (const f of res.body.features) {
      expect(f).not.toHaveProperty('createdAtM')
      expect(f).not.toHaveProperty('updatedAtM')
    }
    // calls counts events: no aggregationField at all (never ""); no description: null (never "").
    expect(res.body.features.map((f) => [f.meterConfig.aggregationMethod, f.meterConfig.aggregationField ?? 'absent', f.description])).toEqual([
      ['latest', 'seats', 'People in the workspace'],
      ['sum', 'total_tokens', 'Input and output tokens of completions'],
      ['sum', 'cost_cents', 'What agent runs may spend, in US cents'],
      ['count', 'absent', null],
    ])
  })

  test('a project without a catalog has no features', async () => {
    const other = await gw.project()
    expect((await gw.get('/v1/features/list', other.apiKey)).body).toEqual({ features: [] })
  })
})

describe('POST /v1/access/update', () => {
  const update = (customerId: string, updates: Record<string, unknown>) => gw.post('/v1/access/update', { customerId, updates }, apiKey)

  test('customerUsageLimitReached shows in entitlement metadata; the answer is {}', async () => {
    gw.clock.set(MARCH_15)
    const res = await update('acme', { customerUsageLimitReached: true })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({})
    const listed = await entitlements('acme')
    for (const e of listed.body) expect(e.metadata).toMatchObject({ customerUsageLimitReached: true, customerDisabled: false })
    expect((await update('acme', { customerUsageLimitReached: false })).status).toBe(200)
    expect((await entitlements('acme')).body[0].metadata.customerUsageLimitReached).toBe(false)
  })

  test('a disabled customer: 403 customer_disabled on both entitlement routes, subscription shown inactive; enabled again', async () => {
    gw.clock.set(MARCH_15)
    expect((await update('globex', { customerDisabled: true })).status).toBe(200)
    expect(await gw.services.catalog.isCustomerDisabled(projectId, 'globex')).toBe(true)
    for (const path of ['/v1/access/entitlements/list', '/v1/entitlements/get']) {
      const res = await gw.post(path, { customerId: 'globex' }, apiKey)
      expectError(res, 403, 'FORBIDDEN', DOCS)
      expect(res.body.error.details.reason).toBe('customer_disabled')
    }
    const sub = await subscription('globex')
    expectShape(SubscriptionSchema, sub.body)
    expect(sub.body).toMatchObject({ active: false, customer: { active: false } })
    expect((await update('globex', { customerDisabled: false })).status).toBe(200)
    expect(await gw.services.catalog.isCustomerDisabled(projectId, 'globex')).toBe(false)
    expect((await entitlements('globex')).status).toBe(200)
    expect(await gw.services.catalog.isCustomerDisabled(projectId, 'nobody')).toBe(false)
  })

  test("subscriptionStatus overrides the status: past_due keeps access, canceled ends the subscription's entitlements; an apply changing the subscription clears it", async () => {
    gw.clock.set(MARCH_15)
    const { apiKey: key } = await gw.project()
    expect((await gw.post('/v1/config/apply', EXAMPLE, key)).status).toBe(200)
    const set = (status: string) => gw.post('/v1/access/update', { customerId: 'globex', updates: { subscriptionStatus: status } }, key)

    expect((await set('past_due')).status).toBe(200)
    expect((await subscription('globex', key)).body).toMatchObject({ status: 'past_due', active: true })
    expect((await entitlements('globex', key)).body.map((e: any) => e.metadata.subscriptionStatus)).toEqual(['past_due', 'past_due', 'past_due', 'past_due'])

    expect((await set('canceled')).status).toBe(200)
    expect((await subscription('globex', key)).body).toMatchObject({ status: 'canceled', active: false })
    // Only the grant outside the subscription still entitles.
    expect((await entitlements('globex', key)).body.map((e: any) => e.subscriptionId)).toEqual([null])

    const doc = { subscriptions: [{ ...EXAMPLE.subscriptions[1], metadata: { note: 'renewed' } }] }
    expect((await gw.post('/v1/config/apply', doc, key)).body.summary.subscriptions.updated).toEqual(['sub_globex'])
    expect((await subscription('globex', key)).body).toMatchObject({ status: 'active', active: true, metadata: { note: 'renewed' } })
  })

  test('an unknown customer is 404; an empty updates object is 400', async () => {
    const res = await update('nobody', { customerDisabled: true })
    expectError(res, 404, 'NOT_FOUND', DOCS)
    expect(res.body.error.details.reason).toBe('customer_not_found')
    expectError(await update('acme', {}), 400, 'BAD_REQUEST', DOCS)
  })
})

describe('other projects', () => {
  test("another project's key: the customer is not found (404); naming this project in the body is 403", async () => {
    const other = await gw.project()
    for (const path of ['/v1/access/entitlements/list', '/v1/entitlements/get', '/v1/subscriptions/get']) {
      const missing = await gw.post(path, { customerId: 'acme' }, other.apiKey)
      expectError(missing, 404, 'NOT_FOUND', DOCS)
      const named = await gw.post(path, { customerId: 'acme', projectId }, other.apiKey)
      expectError(named, 403, 'FORBIDDEN', DOCS)
      expect(named.body.error.details.reason).toBe('other_project')
      // Naming its own project is fine.
      expect((await gw.post(path, { customerId: 'acme', projectId }, apiKey)).status).toBe(200)
    }
    expectError(await gw.post('/v1/access/update', { customerId: 'acme', updates: { customerDisabled: true } }, other.apiKey), 404, 'NOT_FOUND', DOCS)
    expect((await entitlements('acme')).status).toBe(200)
    expect((await gw.post('/v1/plan-versions/list', {}, other.apiKey)).body).toEqual({ planVersions: [] })
  })

  test('a catalog:read key reads but cannot apply or update access', async () => {
    const reader = await gw.post('/v1/keys/create', { projectId, scopes: ['catalog:read'] }, 'test-root-key-0123456789')
    expect((await entitlements('acme', reader.body.apiKey)).status).toBe(200)
    expectError(await gw.post('/v1/config/apply', {}, reader.body.apiKey), 403, 'FORBIDDEN', DOCS)
    expectError(await gw.post('/v1/access/update', { customerId: 'acme', updates: { customerDisabled: true } }, reader.body.apiKey), 403, 'FORBIDDEN', DOCS)
  })
})

test("reading a customer's entitlements (with usage: one script) or subscription (HGETALL) is one Redis command", async () => {
  const redis = testRedis()
  try {
    const clock = manualClock(MARCH_15)
    const project = uniquePrefix()
    await new CatalogService(redis, clock, new BudgetService(redis, clock)).apply(project, EXAMPLE, 'test')
    const commands: string[] = []
    const counting = new Proxy(redis, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver)
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          commands.push(String(name))
          return value.apply(target, args)
        }
      },
    }) as RedisClient
    const service = new CatalogService(counting, clock, new BudgetService(counting, clock))
    const entitlements = new EntitlementService(counting, clock)
    expect((await entitlements.listEntitlements(project, 'acme')).ok).toBe(true)
    expect((await entitlements.getEntitlements(project, 'acme')).ok).toBe(true)
    expect((await service.getSubscription(project, 'acme')).ok).toBe(true)
    expect(await service.isCustomerDisabled(project, 'acme')).toBe(false)
    expect(commands).toEqual(['call', 'call', 'hgetall', 'hget'])
  } finally {
    await redis.quit()
  }
})
