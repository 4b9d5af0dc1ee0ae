// POST /v1/config/apply: every failure kind with the exact JSON paths it reports, several
// problems at once, atomicity (a failing document changes nothing; a concurrent apply is a
// conflict), dry runs, the republishing rules of published plan versions, record timestamps,
// the example catalog, and the same apply on a real 3-node Redis Cluster.
import { readFileSync } from 'node:fs'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { catalogKey } from '../../src/catalog/keys.js'
import { EntitlementService } from '../../src/entitlements/service.js'
import { CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { expectError } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { testCluster, testRedis, uniquePrefix } from '../support/redis.js'

const DOCS = 'https://docs.metering.dev'
const EXAMPLE = JSON.parse(readFileSync(new URL('../../examples/ai-api-catalog.json', import.meta.url), 'utf8'))
const JAN_1 = Date.UTC(2025, 0, 1)

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway()
})
afterAll(async () => {
  await gw?.close()
})

/** A published Pro v1: flat seats, and tokens on graduated tiers with a limit. */
const proV1 = (over: Record<string, unknown> = {}) => ({
  plan: 'pro',
  version: 1,
  status: 'published',
  title: 'Pro',
  currency: 'USD',
  billingConfig: { billingInterval: 'month' },
  features: [
    { featureSlug: 'seats', featureType: 'flat', config: { price: '20' } },
    {
      featureSlug: 'tokens',
      featureType: 'usage',
      limit: 100_000,
      config: {
        usageMode: 'tier',
        tierMode: 'graduated',
        tiers: [
          { firstUnit: 1, lastUnit: 1000, unitPrice: '0' },
          { firstUnit: 1001, lastUnit: null, unitPrice: '0.002' },
        ],
      },
    },
  ],
  ...over,
})

/** A small document of every kind. */
const base = (): Record<string, any> => ({
  features: [
    {
      slug: 'tokens',
      title: 'Tokens',
      unitOfMeasure: 'tokens',
      meterConfig: { eventSlug: 'llm.completion', aggregationMethod: 'sum', aggregationField: 'total_tokens' },
    },
    { slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' },
  ],
  plans: [{ slug: 'pro', title: 'Pro' }],
  planVersions: [proV1()],
  customers: [{ id: 'c1', name: 'One' }],
  subscriptions: [{ id: 's1', customerId: 'c1', phases: [{ plan: 'pro', version: 1, startAt: JAN_1 }] }],
  grants: [{ id: 'g1', customerId: 'c1', featureSlug: 'tokens', type: 'promotion', allowanceUnits: 1000, effectiveAt: JAN_1, expiresAt: Date.UTC(2026, 0, 1) }],
  budgets: [{ key: 'c1-runs', unit: 'USD', limits: [{ id: 'daily', window: 'day', enforce: 'hard', amount: '50' }] }],
})

const apply = (apiKey: string, doc: unknown) => gw.post('/v1/config/apply', doc, apiKey)

async function applied(apiKey: string, doc: unknown): Promise<any> {
  const res = await apply(apiKey, doc)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body
}

/** A project with `base()` applied. */
async function seeded(): Promise<{ projectId: string; apiKey: string }> {
  const project = await gw.project()
  await applied(project.apiKey, base())
  return project
}

/** Every Redis key of the project's catalog, whole, and the document's budget. */
async function state(projectId: string, apiKey: string): Promise<unknown> {
  const redis = gw.redis as Redis
  const keys = (await redis.keys(`mg:{cat:${projectId}}:*`)).sort()
  const hashes: Record<string, unknown> = {}
  for (const key of keys) hashes[key] = await redis.hgetall(key)
  const budget = await gw.post('/v1/budgets/get', { key: 'c1-runs' }, apiKey)
  if (budget.status !== 200) return { hashes, budget: budget.status }
  delete budget.body.balance.asOf
  return { hashes, budget: budget.body }
}

/** A 400 of this kind whose issues name exactly these paths (in any order), each with a message. */
function expectProblems(res: { status: number; body: any; headers: Headers }, kind: string, paths: string[]): void {
  expectError(res, 400, 'BAD_REQUEST', DOCS)
  const details = res.body.error.details
  expect(details.kind, JSON.stringify(details)).toBe(kind)
  expect(details.reason).toBe(kind)
  expect(details.issues.map((i: { path: string }) => i.path).sort(), JSON.stringify(details.issues)).toEqual([...paths].sort())
  for (const issue of details.issues) {
    expect(typeof issue.message).toBe('string')
    expect(issue.message.length).toBeGreaterThan(0)
  }
}

describe('invalid_config: a schema or rule is broken', () => {
  test.each<[string, (d: Record<string, any>) => void, string[]]>([
    [
      'a slug with upper case and a space',
      (d) => {
        d.features[0].slug = 'Bad Slug'
      },
      ['$.features[0].slug'],
    ],
    [
      'a required field missing deep down',
      (d) => {
        delete d.planVersions[0].currency
      },
      ['$.planVersions[0].currency'],
    ],
    [
      'an unknown property inside a plan feature config',
      (d) => {
        d.planVersions[0].features[0].config.zz = 1
      },
      ['$.planVersions[0].features[0].config.zz'],
    ],
    [
      'a customer id of 37 characters',
      (d) => {
        d.customers[0].id = 'c'.repeat(37)
      },
      ['$.customers[0].id'],
    ],
    [
      'a timestamp that is not epoch ms',
      (d) => {
        d.subscriptions[0].phases[0].startAt = '2025-01-01'
      },
      ['$.subscriptions[0].phases[0].startAt'],
    ],
    [
      'a price with 9 fractional digits',
      (d) => {
        d.planVersions[0].features[0].config.price = '0.000000001'
      },
      ['$.planVersions[0].features[0].config.price'],
    ],
    [
      'a flat feature without a price',
      (d) => {
        delete d.planVersions[0].features[0].config.price
      },
      ['$.planVersions[0].features[0].config.price'],
    ],
    [
      'a flat feature with tiers',
      (d) => {
        d.planVersions[0].features[0].config.tierMode = 'volume'
      },
      ['$.planVersions[0].features[0].config.tierMode'],
    ],
    [
      'usage priced by tier without a tierMode',
      (d) => {
        delete d.planVersions[0].features[1].config.tierMode
      },
      ['$.planVersions[0].features[1].config.tierMode'],
    ],
    [
      'tiers with a gap',
      (d) => {
        d.planVersions[0].features[1].config.tiers[1].firstUnit = 1002
      },
      ['$.planVersions[0].features[1].config.tiers[1].firstUnit'],
    ],
    [
      'a first tier not starting at 1',
      (d) => {
        d.planVersions[0].features[1].config.tiers[0].firstUnit = 2
      },
      ['$.planVersions[0].features[1].config.tiers[0].firstUnit'],
    ],
    [
      'an open-ended tier before the last',
      (d) => {
        d.planVersions[0].features[1].config.tiers[0].lastUnit = null
      },
      ['$.planVersions[0].features[1].config.tiers[0].lastUnit'],
    ],
    [
      'a price too large to be exact',
      (d) => {
        d.planVersions[0].features[0].config.price = '999999999999999.99'
      },
      ['$.planVersions[0].features[0].config.price'],
    ],
    [
      'a weekly anchor of 8',
      (d) => {
        d.planVersions[0].billingConfig = { billingInterval: 'week', billingAnchor: 8 }
      },
      ['$.planVersions[0].billingConfig.billingAnchor'],
    ],
    [
      'a onetime interval on a recurring plan type',
      (d) => {
        d.planVersions[0].billingConfig = { billingInterval: 'onetime', planType: 'recurring' }
      },
      ['$.planVersions[0].billingConfig.planType'],
    ],
    [
      'a sum meter without its field',
      (d) => {
        delete d.features[0].meterConfig.aggregationField
      },
      ['$.features[0].meterConfig.aggregationField'],
    ],
    [
      'two default plans',
      (d) => {
        d.plans = [
          { slug: 'pro', title: 'Pro', defaultPlan: true },
          { slug: 'free', title: 'Free', defaultPlan: true },
        ]
      },
      ['$.plans[0].defaultPlan', '$.plans[1].defaultPlan'],
    ],
    // The grant of the customer's tokens falls in no phase either, so it is not resolved.
    [
      'a phase ending before it starts',
      (d) => {
        d.subscriptions[0].phases[0].endAt = JAN_1 - 1
      },
      ['$.subscriptions[0].phases[0].endAt', '$.grants[0].featureSlug'],
    ],
    [
      'an open-ended phase before another',
      (d) => {
        d.subscriptions[0].phases.push({ plan: 'pro', version: 1, startAt: JAN_1 + 1000 })
      },
      ['$.subscriptions[0].phases[0].endAt'],
    ],
    [
      'phases out of order',
      (d) => {
        d.subscriptions[0].phases = [
          { plan: 'pro', version: 1, startAt: JAN_1, endAt: JAN_1 + 1000 },
          { plan: 'pro', version: 1, startAt: JAN_1 + 500 },
        ]
      },
      ['$.subscriptions[0].phases[1].startAt'],
    ],
    [
      'an unknown time zone',
      (d) => {
        d.subscriptions[0].timezone = 'Mars/Olympus'
      },
      ['$.subscriptions[0].timezone'],
    ],
    [
      'a subscription to a draft',
      (d) => {
        d.planVersions[0].status = 'draft'
      },
      ['$.subscriptions[0].phases[0].version'],
    ],
    [
      'two subscriptions of one customer at once',
      (d) => {
        d.subscriptions.push({ id: 's2', customerId: 'c1', phases: [{ plan: 'pro', version: 1, startAt: JAN_1 + 86_400_000 }] })
      },
      ['$.subscriptions[0].phases', '$.subscriptions[1].phases'],
    ],
    [
      'a grant expiring before it starts',
      (d) => {
        d.grants[0].expiresAt = JAN_1
      },
      ['$.grants[0].expiresAt'],
    ],
    [
      'a grant of type subscription',
      (d) => {
        d.grants[0].type = 'subscription'
      },
      ['$.grants[0].type'],
    ],
    [
      'a grant naming a plan without a version',
      (d) => {
        d.grants[0].plan = 'pro'
      },
      ['$.grants[0].version'],
    ],
    [
      'a budget whose default ttl exceeds its max',
      (d) => {
        d.budgets[0].holds = { defaultTtlMs: 10_000, maxTtlMs: 5000 }
      },
      ['$.budgets[0].holds.defaultTtlMs'],
    ],
    [
      'a budget anchoring a never window',
      (d) => {
        d.budgets[0].limits[0] = { id: 'all', window: 'never', enforce: 'hard', amount: '1', anchor: 0 }
      },
      ['$.budgets[0].limits[0].anchor'],
    ],
    [
      'a budget amount with 9 fractional digits',
      (d) => {
        d.budgets[0].limits[0].amount = '1.000000001'
      },
      ['$.budgets[0].limits[0].amount'],
    ],
  ])('%s', async (_name, change, paths) => {
    const { projectId, apiKey } = await gw.project()
    const doc = base()
    change(doc)
    const before = await state(projectId, apiKey)
    expectProblems(await apply(apiKey, doc), 'invalid_config', paths)
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('a body that is not an object, and an unknown top-level property', async () => {
    const { apiKey } = await gw.project()
    expectProblems(await apply(apiKey, []), 'invalid_config', ['$'])
    expectProblems(await apply(apiKey, { ...base(), zz: true }), 'invalid_config', ['$.zz'])
  })

  test('every schema problem is reported at once', async () => {
    const { apiKey } = await gw.project()
    const doc = base()
    doc.features[0].slug = 'Bad'
    delete doc.features[1].title
    doc.planVersions[0].version = 0
    doc.grants[0].allowanceUnits = -1
    expectProblems(await apply(apiKey, doc), 'invalid_config', [
      '$.features[0].slug',
      '$.features[1].title',
      '$.planVersions[0].version',
      '$.grants[0].allowanceUnits',
    ])
  })
})

describe('slug_conflict: a name used twice, or a change to a published plan version', () => {
  test.each<[string, (d: Record<string, any>) => void, string[]]>([
    [
      'a feature slug twice',
      (d) => {
        d.features.push({ ...d.features[0], title: 'Again' })
      },
      ['$.features[2].slug'],
    ],
    [
      'a feature code twice',
      (d) => {
        d.features[0].code = 7
        d.features[1].code = 7
      },
      ['$.features[1].code'],
    ],
    [
      'a plan slug twice',
      (d) => {
        d.plans.push({ slug: 'pro', title: 'Pro again' })
      },
      ['$.plans[1].slug'],
    ],
    [
      'a plan version twice',
      (d) => {
        d.planVersions.push(proV1({ title: 'Other' }))
      },
      ['$.planVersions[1].version'],
    ],
    [
      'a feature twice in one version',
      (d) => {
        d.planVersions[0].features.push({ featureSlug: 'seats', featureType: 'flat', config: { price: '1' } })
      },
      ['$.planVersions[0].features[2].featureSlug'],
    ],
    [
      'a customer id twice',
      (d) => {
        d.customers.push({ id: 'c1' })
      },
      ['$.customers[1].id'],
    ],
    [
      'a subscription id twice',
      (d) => {
        d.subscriptions.push({ ...d.subscriptions[0] })
      },
      ['$.subscriptions[1].id'],
    ],
    [
      'an item twice in one phase',
      (d) => {
        d.subscriptions[0].phases[0].items = [
          { featureSlug: 'seats', units: 2 },
          { featureSlug: 'seats', units: 3 },
        ]
      },
      ['$.subscriptions[0].phases[0].items[1].featureSlug'],
    ],
    [
      'a grant id twice',
      (d) => {
        d.grants.push({ ...d.grants[0] })
      },
      ['$.grants[1].id'],
    ],
    [
      'a budget key twice',
      (d) => {
        d.budgets.push({ ...d.budgets[0] })
      },
      ['$.budgets[1].key'],
    ],
    [
      'a budget limit id twice',
      (d) => {
        d.budgets[0].limits.push({ id: 'daily', window: 'week', enforce: 'soft', amount: '1' })
      },
      ['$.budgets[0].limits[1].id'],
    ],
  ])('%s', async (_name, change, paths) => {
    const { projectId, apiKey } = await gw.project()
    const doc = base()
    change(doc)
    const before = await state(projectId, apiKey)
    expectProblems(await apply(apiKey, doc), 'slug_conflict', paths)
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('a subscription or grant cannot move to another customer', async () => {
    const { projectId, apiKey } = await seeded()
    const doc = {
      customers: [{ id: 'c2' }],
      subscriptions: [{ ...base().subscriptions[0], customerId: 'c2' }],
      grants: [{ ...base().grants[0], customerId: 'c2' }],
    }
    const before = await state(projectId, apiKey)
    expectProblems(await apply(apiKey, doc), 'slug_conflict', ['$.subscriptions[0].id', '$.grants[0].id'])
    expect(await state(projectId, apiKey)).toEqual(before)
  })
})

describe('unresolved_reference: a reference to something that does not exist', () => {
  test('the third plan version names a feature that does not exist: $.planVersions[2].features[0].featureSlug', async () => {
    const { apiKey } = await gw.project()
    const doc = base()
    doc.planVersions.push(proV1({ version: 2 }), proV1({ version: 3, features: [{ featureSlug: 'images', featureType: 'flat', config: { price: '1' } }] }))
    expectProblems(await apply(apiKey, doc), 'unresolved_reference', ['$.planVersions[2].features[0].featureSlug'])
  })

  test.each<[string, (d: Record<string, any>) => void, string[]]>([
    [
      'a plan version of an unknown plan',
      (d) => {
        d.plans = []
      },
      ['$.planVersions[0].plan', '$.subscriptions[0].phases[0].plan', '$.grants[0].featureSlug'],
    ],
    [
      'a subscription of an unknown customer',
      (d) => {
        d.customers = []
      },
      ['$.subscriptions[0].customerId', '$.grants[0].customerId'],
    ],
    [
      'a phase on a version that does not exist',
      (d) => {
        d.subscriptions[0].phases[0].version = 9
      },
      ['$.subscriptions[0].phases[0].version', '$.grants[0].featureSlug'],
    ],
    [
      'an item of a feature not in the version',
      (d) => {
        d.features.push({ slug: 'images', title: 'Images', unitOfMeasure: 'images' })
        d.subscriptions[0].phases[0].items = [{ featureSlug: 'images' }]
      },
      ['$.subscriptions[0].phases[0].items[0].featureSlug'],
    ],
    [
      'a grant of an unknown feature',
      (d) => {
        d.grants[0].featureSlug = 'images'
      },
      ['$.grants[0].featureSlug'],
    ],
    [
      'a grant of a feature the customer has no subscription to',
      (d) => {
        d.features.push({ slug: 'images', title: 'Images', unitOfMeasure: 'images' })
        d.grants[0].featureSlug = 'images'
      },
      ['$.grants[0].featureSlug'],
    ],
    [
      'a grant naming a plan version that does not exist',
      (d) => {
        Object.assign(d.grants[0], { plan: 'pro', version: 4 })
      },
      ['$.grants[0].version'],
    ],
  ])('%s', async (_name, change, paths) => {
    const { projectId, apiKey } = await gw.project()
    const doc = base()
    change(doc)
    const before = await state(projectId, apiKey)
    expectProblems(await apply(apiKey, doc), 'unresolved_reference', paths)
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('references resolve against what is stored, not only the document', async () => {
    const { apiKey } = await seeded()
    const res = await applied(apiKey, {
      customers: [{ id: 'c2' }],
      subscriptions: [{ id: 's2', customerId: 'c2', phases: [{ plan: 'pro', version: 1, startAt: JAN_1 }] }],
    })
    expect(res.summary.customers.created).toEqual(['c2'])
    expect(res.summary.subscriptions.created).toEqual(['s2'])
    expect(res.summary.features).toEqual({ created: [], updated: [], unchanged: [] })
  })
})

test('problems of every kind are reported together; details.kind is invalid_config, then slug_conflict, then unresolved_reference', async () => {
  const { projectId, apiKey } = await gw.project()
  const doc = base()
  doc.features.push({ slug: 'seats', title: 'Seats again', unitOfMeasure: 'seats' }) // slug_conflict
  doc.planVersions[0].features[1].config.tiers[1].firstUnit = 5000 // invalid_config
  doc.subscriptions[0].customerId = 'nobody' // unresolved_reference
  doc.grants[0].featureSlug = 'images' // unresolved_reference
  doc.budgets.push({ ...doc.budgets[0] }) // slug_conflict
  const before = await state(projectId, apiKey)
  const res = await apply(apiKey, doc)
  expectProblems(res, 'invalid_config', [
    '$.features[2].slug',
    '$.planVersions[0].features[1].config.tiers[1].firstUnit',
    '$.subscriptions[0].customerId',
    '$.grants[0].featureSlug',
    '$.budgets[1].key',
  ])
  const kinds = Object.fromEntries(res.body.error.details.issues.map((i: { path: string; kind: string }) => [i.path, i.kind]))
  expect(kinds).toEqual({
    '$.features[2].slug': 'slug_conflict',
    '$.planVersions[0].features[1].config.tiers[1].firstUnit': 'invalid_config',
    '$.subscriptions[0].customerId': 'unresolved_reference',
    '$.grants[0].featureSlug': 'unresolved_reference',
    '$.budgets[1].key': 'slug_conflict',
  })
  expect(await state(projectId, apiKey)).toEqual(before)

  doc.planVersions[0].features[1].config.tiers[1].firstUnit = 1001
  expect((await apply(apiKey, doc)).body.error.details.kind).toBe('slug_conflict')
})

describe('atomicity', () => {
  test('a document with one problem changes nothing, though the rest of it would (catalog, customers, budgets)', async () => {
    const { projectId, apiKey } = await seeded()
    const doc = base()
    doc.features[0].title = 'Tokens (renamed)'
    doc.customers.push({ id: 'c2' })
    doc.budgets[0].limits[0].amount = '75'
    doc.grants.push({ id: 'g2', customerId: 'c1', featureSlug: 'nothing', type: 'manual', allowanceUnits: 1, effectiveAt: JAN_1 })
    const before = await state(projectId, apiKey)
    expectProblems(await apply(apiKey, doc), 'unresolved_reference', ['$.grants[1].featureSlug'])
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('an apply that loses the race to another apply is a conflict (409) and writes nothing of its own', async () => {
    const project = uniquePrefix()
    const clock = manualClock(Date.UTC(2025, 2, 1))
    const redis = gw.redis
    const service = new CatalogService(redis, clock, new BudgetService(redis, clock))
    expect((await service.apply(project, base(), 'test')).ok).toBe(true)
    // The first script call of this apply (an FCALL) runs another apply first: the version it read is gone.
    let raced = false
    const racing = new Proxy(redis, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver)
        if (typeof value !== 'function') return value
        if (name !== 'call') return value.bind(target)
        return async (command: string, ...args: (string | number)[]) => {
          if (command === 'FCALL' && !raced) {
            raced = true
            const other = await service.apply(project, { features: [{ slug: 'images', title: 'Images', unitOfMeasure: 'images' }] }, 'other')
            expect(other.ok).toBe(true)
          }
          return (target as Redis).call(command, ...args)
        }
      },
    }) as RedisClient
    const loser = new CatalogService(racing, clock, new BudgetService(redis, clock))
    const doc = base()
    doc.features[0].title = 'Tokens (loser)'
    const result = await loser.apply(project, doc, 'loser')
    expect(raced, JSON.stringify(result)).toBe(true)
    expect(result).toMatchObject({ ok: false, kind: 'conflict', reason: 'catalog_changed' })
    const catalog = await service.listFeatures(project)
    expect(catalog.ok && catalog.value.features.map((f) => [f.slug, f.title])).toEqual([
      ['tokens', 'Tokens'],
      ['seats', 'Seats'],
      ['images', 'Images'],
    ])
    expect(await redis.hget(catalogKey(project), 'version')).toBe('2')
    // Applied again, it goes through.
    expect((await service.apply(project, doc, 'loser')).ok).toBe(true)
  })

  test('concurrent applies of different documents over HTTP: each is applied whole or refused with 409', async () => {
    const { apiKey } = await seeded()
    const docs = Array.from({ length: 6 }, (_, i) => ({
      features: [{ slug: 'tokens', title: `Tokens ${i}`, unitOfMeasure: 'tokens', meterConfig: base().features[0].meterConfig }],
      customers: [{ id: `cc${i}` }],
    }))
    const results = await Promise.all(docs.map((doc) => apply(apiKey, doc)))
    for (const res of results) expect([200, 409], JSON.stringify(res.body)).toContain(res.status)
    const winners = results.flatMap((res, i) => (res.status === 200 ? [i] : []))
    expect(winners.length).toBeGreaterThan(0)
    for (const res of results.filter((r) => r.status === 409)) expect(res.body.error.details.reason).toBe('catalog_changed')
    // The title is the one of the last winner; every winner's customer exists, no loser's does.
    const features = await gw.get('/v1/features/list', apiKey)
    expect(winners.map((i) => `Tokens ${i}`)).toContain(features.body.features[0].title)
    for (let i = 0; i < docs.length; i++) {
      // A winner's customer exists (without a subscription); a loser's does not.
      const subscription = await gw.post('/v1/subscriptions/get', { customerId: `cc${i}` }, apiKey)
      expect(subscription.status, `cc${i}`).toBe(404)
      expect(subscription.body.error.details.reason).toBe(winners.includes(i) ? 'subscription_not_found' : 'customer_not_found')
    }
  })
})

describe('dry run', () => {
  test('reports what would change and changes nothing; the real apply then reports the same', async () => {
    const { projectId, apiKey } = await seeded()
    const doc = base()
    doc.features[0].title = 'Tokens (renamed)'
    doc.features.push({ slug: 'images', title: 'Images', unitOfMeasure: 'images' })
    doc.planVersions.push(proV1({ version: 2, title: 'Pro 2' }))
    doc.customers.push({ id: 'c2' })
    doc.budgets[0].limits[0].amount = '75'
    const before = await state(projectId, apiKey)
    const dry = await applied(apiKey, { ...doc, dryRun: true })
    expect(await state(projectId, apiKey)).toEqual(before)
    expect(dry).toEqual({
      dryRun: true,
      catalogVersion: 1,
      summary: {
        features: { created: ['images'], updated: ['tokens'], unchanged: ['seats'] },
        plans: { created: [], updated: [], unchanged: ['pro'] },
        planVersions: { created: ['pro@2'], updated: [], unchanged: ['pro@1'] },
        customers: { created: ['c2'], updated: [], unchanged: ['c1'] },
        subscriptions: { created: [], updated: [], unchanged: ['s1'] },
        grants: { created: [], updated: [], unchanged: ['g1'] },
        budgets: { created: [], updated: ['c1-runs'], unchanged: [] },
      },
    })
    const real = await applied(apiKey, doc)
    expect(real).toEqual({ ...dry, dryRun: false, catalogVersion: 2 })
    expect(await state(projectId, apiKey)).not.toEqual(before)
  })

  test('a dry run of a document with problems fails like the real apply', async () => {
    const { apiKey } = await gw.project()
    const doc = base()
    doc.customers = []
    expectProblems(await apply(apiKey, { ...doc, dryRun: true }), 'unresolved_reference', ['$.subscriptions[0].customerId', '$.grants[0].customerId'])
  })
})

describe('republishing rules', () => {
  test('the same document again changes nothing: every record unchanged, the catalog version stays', async () => {
    const { projectId, apiKey } = await seeded()
    const before = await state(projectId, apiKey)
    gw.clock.advance(60_000)
    const res = await applied(apiKey, base())
    expect(res.catalogVersion).toBe(1)
    for (const changes of Object.values(res.summary) as { created: string[]; updated: string[] }[]) {
      expect(changes.created).toEqual([])
      expect(changes.updated).toEqual([])
    }
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('a published version with changed content is a slug_conflict at its path; nothing changes', async () => {
    const { projectId, apiKey } = await seeded()
    const before = await state(projectId, apiKey)
    for (const change of [
      (v: any) => {
        v.features[0].config.price = '25'
      },
      (v: any) => {
        v.title = 'Pro (new title)'
      },
      (v: any) => {
        v.features.pop()
      },
      (v: any) => {
        v.billingConfig.billingIntervalCount = 2
      },
    ]) {
      const doc = base()
      change(doc.planVersions[0])
      expectProblems(await apply(apiKey, doc), 'slug_conflict', ['$.planVersions[0]'])
    }
    const doc = base()
    doc.planVersions[0].status = 'draft'
    const res = await apply(apiKey, { planVersions: doc.planVersions })
    expectProblems(res, 'slug_conflict', ['$.planVersions[0].status'])
    expect(await state(projectId, apiKey)).toEqual(before)
  })

  test('the same content with its defaults written out is the same version (configHash of the canonical content)', async () => {
    const { apiKey } = await seeded()
    const doc = base()
    Object.assign(doc.planVersions[0], { whenToBill: 'pay_in_advance', gracePeriod: 0, autoRenew: true, tags: [] })
    doc.planVersions[0].billingConfig = {
      billingInterval: 'month',
      billingIntervalCount: 1,
      billingAnchor: 'dayOfCreation',
      planType: 'recurring',
      name: 'monthly',
    }
    doc.planVersions[0].features[0].config.price = '20.00'
    const res = await applied(apiKey, doc)
    expect(res.summary.planVersions).toEqual({ created: [], updated: [], unchanged: ['pro@1'] })
  })

  test('a new version number is created and becomes latest; customers on the old one see it is no longer latest', async () => {
    const { apiKey } = await seeded()
    const doc = base()
    doc.planVersions = [proV1({ version: 2, features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '25' } }] })]
    const res = await applied(apiKey, { planVersions: doc.planVersions })
    expect(res.summary.planVersions).toEqual({ created: ['pro@2'], updated: [], unchanged: [] })
    const list = await gw.post('/v1/plan-versions/list', {}, apiKey)
    expect(list.body.planVersions.map((v: any) => [v.version, v.latest])).toEqual([
      [1, false],
      [2, true],
    ])
    const subscription = await gw.post('/v1/subscriptions/get', { customerId: 'c1' }, apiKey)
    expect(subscription.body.activePhase.planVersion).toMatchObject({ version: 1, latest: false })
  })

  test('a draft changes freely, and publishing it stamps publishedAt and publishedBy', async () => {
    const { apiKey } = await seeded()
    const draft = proV1({ version: 2, status: 'draft' })
    expect((await applied(apiKey, { planVersions: [draft] })).summary.planVersions.created).toEqual(['pro@2'])
    draft.title = 'Pro 2 (edited)'
    expect((await applied(apiKey, { planVersions: [draft] })).summary.planVersions.updated).toEqual(['pro@2'])
    expect((await gw.post('/v1/plan-versions/list', { onlyPublished: true }, apiKey)).body.planVersions.map((v: any) => v.version)).toEqual([1])
    gw.clock.advance(1000)
    const publishedAt = gw.clock()
    expect((await applied(apiKey, { planVersions: [{ ...draft, status: 'published' }] })).summary.planVersions.updated).toEqual(['pro@2'])
    const list = await gw.post('/v1/plan-versions/list', { onlyPublished: true }, apiKey)
    expect(list.body.planVersions[1]).toMatchObject({ version: 2, publishedAt, latest: true, title: 'Pro 2 (edited)' })
    expect(list.body.planVersions[1].publishedBy).toMatch(/^key_/)
  })

  test('active and archived may change on a published version (not part of its content)', async () => {
    const { apiKey } = await seeded()
    gw.clock.advance(1000)
    const res = await applied(apiKey, { planVersions: [proV1({ archived: true, active: false })] })
    expect(res.summary.planVersions.updated).toEqual(['pro@1'])
    const list = await gw.post('/v1/plan-versions/list', {}, apiKey)
    expect(list.body.planVersions[0]).toMatchObject({ archived: true, archivedAt: gw.clock(), active: false, latest: false })
    // Not active: no new subscription may use it; the existing one stays.
    const doc = { customers: [{ id: 'c9' }], subscriptions: [{ id: 's9', customerId: 'c9', phases: [{ plan: 'pro', version: 1, startAt: JAN_1 }] }] }
    expectProblems(await apply(apiKey, doc), 'invalid_config', ['$.subscriptions[0].phases[0].version'])
    expect((await applied(apiKey, { subscriptions: base().subscriptions })).summary.subscriptions.unchanged).toEqual(['s1'])
  })
})

test('createdAtM is set on create; updatedAtM moves only when the record changes', async () => {
  const { apiKey } = await gw.project()
  const t0 = gw.clock()
  await applied(apiKey, base())
  gw.clock.advance(5000)
  const doc = base()
  doc.features[0].title = 'Tokens!'
  await applied(apiKey, doc)
  const feature = async (slug: string) => {
    const entitlements = await gw.post('/v1/access/entitlements/list', { customerId: 'c1' }, apiKey)
    return entitlements.body.find((e: any) => e.featurePlanVersion.feature.slug === slug).featurePlanVersion.feature
  }
  expect(await feature('tokens')).toMatchObject({ createdAtM: t0, updatedAtM: t0 + 5000, title: 'Tokens!' })
  expect(await feature('seats')).toMatchObject({ createdAtM: t0, updatedAtM: t0 })
})

test('a projectId naming another project is 403 other_project', async () => {
  const { apiKey } = await gw.project()
  const other = await gw.project()
  const res = await apply(apiKey, { ...base(), projectId: other.projectId })
  expectError(res, 403, 'FORBIDDEN', DOCS)
  expect(res.body.error.details.reason).toBe('other_project')
})

describe('the example catalog (examples/ai-api-catalog.json)', () => {
  test('applies, then reads back: plans, customers, entitlements with grants, budgets; applying it again changes nothing', async () => {
    const { apiKey } = await gw.project()
    gw.clock.set(Date.UTC(2025, 2, 15, 12))
    const res = await applied(apiKey, EXAMPLE)
    expect(res).toMatchObject({ dryRun: false, catalogVersion: 1 })
    expect(res.summary.features.created).toEqual(['seats', 'tokens', 'run-budget'])
    expect(res.summary.planVersions.created).toEqual(['free@1', 'pro@1', 'pro@2'])
    expect(res.summary.budgets.created).toEqual(['acme-agent-runs'])

    const acme = await gw.post('/v1/access/entitlements/list', { customerId: 'acme' }, apiKey)
    expect(acme.status).toBe(200)
    expect(acme.body.map((e: any) => [e.featurePlanVersion.feature.slug, e.overageStrategy, e.grants.map((g: any) => [g.type, g.allowanceUnits])])).toEqual([
      ['seats', 'none', [['subscription', 5]]],
      [
        'tokens',
        'always',
        [
          ['promotion', 2_000_000],
          ['subscription', null], // no limit: null (README.md, "Shapes")
        ],
      ],
      ['run-budget', 'last-call', [['subscription', 100_000]]],
    ])
    const budget = await gw.post('/v1/budgets/get', { key: 'acme-agent-runs' }, apiKey)
    expect(budget.body.limits.map((l: any) => l.id)).toEqual(['daily', 'monthly', 'daily-warning'])

    const again = await applied(apiKey, EXAMPLE)
    expect(again.catalogVersion).toBe(1)
    expect(Object.values(again.summary).flatMap((c: any) => [...c.created, ...c.updated])).toEqual([])
  })

  test('applies unchanged on a 3-node Redis Cluster (every key of the catalog in one slot)', async () => {
    const cluster = testCluster()
    try {
      const clock = manualClock(Date.UTC(2025, 2, 15, 12))
      const service = new CatalogService(cluster, clock, new BudgetService(cluster, clock))
      const project = uniquePrefix()
      const res = await service.apply(project, EXAMPLE, 'test')
      expect(res.ok, JSON.stringify(res)).toBe(true)
      const entitlements = await new EntitlementService(cluster, clock).listEntitlements(project, 'acme')
      expect(entitlements.ok && entitlements.value.length).toBe(3)
      const subscription = await service.getSubscription(project, 'globex')
      expect(subscription.ok && subscription.value.planSlug).toBe('free')
      // A second document touching a stored customer reads it back through the cluster too.
      const more = await service.apply(
        project,
        { grants: [{ id: 'extra', customerId: 'acme', featureSlug: 'seats', type: 'addon', allowanceUnits: 2, effectiveAt: Date.UTC(2025, 2, 1) }] },
        'test',
      )
      expect(more.ok && more.value.summary.grants.created).toEqual(['extra'])
    } finally {
      await cluster.quit()
    }
  })
})

test('the CLI path: CatalogService.apply with actor "cli" stamps publishedBy', async () => {
  const redis = testRedis()
  try {
    const clock = manualClock(Date.UTC(2025, 2, 15))
    const service = new CatalogService(redis, clock, new BudgetService(redis, clock))
    const project = uniquePrefix()
    expect((await service.apply(project, base(), 'cli')).ok).toBe(true)
    const list = await service.listPlanVersions(project, {})
    expect(list.ok && list.value.planVersions[0]!.publishedBy).toBe('cli')
  } finally {
    await redis.quit()
  }
})
