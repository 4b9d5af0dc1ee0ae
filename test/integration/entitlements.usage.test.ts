// Usage counted against entitlements (src/entitlements/README.md), with a moving clock:
// raw events through POST /v1/usage/record(-batch) → the gateway's in-process ingest worker,
// whose claim counts each new event once against the customer's grants (the test
// clickhouse-server 18.16 in a throwaway database holds the rows); grant priority, a grant
// expiring mid-period, reset at a monthly period end in New York time, every overage strategy
// at its limit, duplicates, the denied state hash, the read routes in one Redis command, and
// the ingest claim's count on a single node and on a Cluster.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { BudgetService } from '../../src/budgets/service.js'
import { EntitlementsGetResponseSchema, EntitlementsListResponseSchema } from '../../src/catalog/schemas.js'
import { CatalogReads, CatalogService } from '../../src/catalog/service.js'
import { manualClock } from '../../src/kernel/clock.js'
import { entitlementStateKey, usageKey } from '../../src/entitlements/keys.js'
import { EntitlementService } from '../../src/entitlements/service.js'
import { countsOfEvents, resetPeriod } from '../../src/entitlements/usage.js'
import { claimEvents } from '../../src/events/redis.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { untilQueuesIdle } from '../support/queues.js'
import { testCluster, testRedis, uniquePrefix } from '../support/redis.js'

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
/** Midnight of 2025-01-01 in New York (EST, UTC−5): the subscription's start and its first reset period's. */
const JAN_1_NY = Date.UTC(2025, 0, 1, 5)
const FEB_1_NY = Date.UTC(2025, 1, 1, 5)
const START = Date.UTC(2025, 0, 10, 12)
const PROMO_ENDS = Date.UTC(2025, 0, 20, 12)

const CATALOG = {
  features: [
    {
      slug: 'tokens',
      title: 'Tokens',
      unitOfMeasure: 'tokens',
      meterConfig: { eventSlug: 'llm.completion', aggregationMethod: 'sum', aggregationField: 'tokens' },
    },
    { slug: 'completions', title: 'Completions', unitOfMeasure: 'calls', meterConfig: { eventSlug: 'llm.completion', aggregationMethod: 'count' } },
    { slug: 'gpus', title: 'GPUs', unitOfMeasure: 'gpus', meterConfig: { eventSlug: 'gpu.usage', aggregationMethod: 'max', aggregationField: 'gpus' } },
    {
      slug: 'storage',
      title: 'Storage',
      unitOfMeasure: 'GB',
      meterConfig: { eventSlug: 'storage.report', aggregationMethod: 'latest', aggregationField: 'gb' },
    },
  ],
  plans: [{ slug: 'pro', title: 'Pro' }],
  planVersions: [
    {
      plan: 'pro',
      version: 1,
      status: 'published',
      title: 'Pro',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'tokens', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 20, metadata: { overageStrategy: 'none' } },
        {
          featureSlug: 'completions',
          featureType: 'usage',
          config: { usageMode: 'unit', price: '0.01' },
          limit: 3,
          metadata: { overageStrategy: 'last-call' },
        },
        { featureSlug: 'gpus', featureType: 'usage', config: { usageMode: 'unit', price: '1' }, limit: 4, metadata: { overageStrategy: 'none' } },
        { featureSlug: 'storage', featureType: 'usage', config: { usageMode: 'unit', price: '0.1' }, limit: 10, metadata: { overageStrategy: 'always' } },
      ],
    },
  ],
  customers: ['acme', 'batchy', 'dupes', 'sync', 'fresh'].map((id) => ({ id })),
  subscriptions: ['acme', 'batchy', 'dupes', 'sync', 'fresh'].map((id) => ({
    id: `sub-${id}`,
    customerId: id,
    timezone: 'America/New_York',
    phases: [{ plan: 'pro', version: 1, startAt: JAN_1_NY }],
  })),
  grants: [
    { id: 'promo-acme', customerId: 'acme', featureSlug: 'tokens', type: 'promotion', allowanceUnits: 80, effectiveAt: JAN_1_NY, expiresAt: PROMO_ENDS },
    { id: 'promo-sync', customerId: 'sync', featureSlug: 'tokens', type: 'promotion', allowanceUnits: 80, effectiveAt: JAN_1_NY },
  ],
}

const listCheck = TypeCompiler.Compile(EntitlementsListResponseSchema)
const getCheck = TypeCompiler.Compile(EntitlementsGetResponseSchema)

describe('usage recorded over HTTP, counted by the ingest worker', () => {
  const suffix = randomBytes(6).toString('hex')
  const database = `test_ent_${suffix}`
  const queue = `test-entitlements-${suffix}`
  let gw: TestGateway
  let dataDir: string
  let apiKey: string
  let projectId: string

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-entitlements-'))
    gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: inject('clickhouseUrl'),
        clickhouseDatabase: database,
        dataDir,
        events: { queueName: queue },
      },
      START,
    )
    ;({ apiKey, projectId } = await gw.project())
    const applied = await gw.post('/v1/config/apply', CATALOG, apiKey)
    expect(applied.status, JSON.stringify(applied.body)).toBe(200)
  })
  afterAll(async () => {
    await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await gw?.close()
    await rm(dataDir, { recursive: true, force: true })
  })

  let n = 0
  const record = async (customerId: string, eventSlug: string, properties: Record<string, unknown>, id = `e${++n}`, timestamp?: number) => {
    const res = await gw.post('/v1/usage/record', { customerId, eventSlug, id, properties, ...(timestamp === undefined ? {} : { timestamp }) }, apiKey)
    expect(res.body).toEqual({ accepted: true })
  }
  const drained = () => untilQueuesIdle(gw.redis, [queue])
  /** The entitlements of a customer by feature slug, checked against the response schema. */
  const usageOf = async (customerId: string) => {
    const res = await gw.post('/v1/access/entitlements/list', { customerId }, apiKey)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect([...listCheck.Errors(res.body)].slice(0, 3)).toEqual([])
    return Object.fromEntries(res.body.map((e: any) => [e.featurePlanVersion.feature.slug, e])) as Record<string, any>
  }
  const grantsOf = (e: any) => e.grants.map((g: any) => [g.id.startsWith('gr_') ? 'subscription' : g.id, g.metadata.usage.consumed])
  const deniedUntil = async (customerId: string, featureSlug: string) => gw.redis.hget(entitlementStateKey(projectId, customerId), featureSlug)

  test('grants in priority order, a grant expiring mid-period, none at its limit, reset at the period end in New York time', async () => {
    gw.clock.set(START)
    await record('acme', 'llm.completion', { tokens: 50 })
    await drained()
    let tokens = (await usageOf('acme')).tokens
    expect(tokens.metadata.usage).toEqual({
      usage: '50',
      limit: '100',
      remaining: '50',
      overage: '0',
      refused: '0',
      periodStartAt: JAN_1_NY,
      periodEndAt: FEB_1_NY,
      denied: false,
      asOf: START,
      usageAsOf: START,
    })
    // The promotion (80) is consumed before the subscription's grant (20).
    expect(grantsOf(tokens)).toEqual([
      ['promo-acme', '50'],
      ['subscription', '0'],
    ])

    // The promotion expires: its allowance and what was consumed from it leave with it.
    gw.clock.set(PROMO_ENDS)
    tokens = (await usageOf('acme')).tokens
    expect(tokens.metadata.usage).toMatchObject({ usage: '50', limit: '20', remaining: '20', denied: false })
    expect(grantsOf(tokens)).toEqual([['subscription', '0']])
    await record('acme', 'llm.completion', { tokens: '12.5' })
    await record('acme', 'llm.completion', { tokens: 10 }) // 22.5 > 20: none refuses it
    await drained()
    tokens = (await usageOf('acme')).tokens
    expect(tokens.metadata.usage).toMatchObject({ usage: '62.5', limit: '20', remaining: '7.5', refused: '10', denied: false })
    expect(await deniedUntil('acme', 'tokens')).toBeNull()
    await record('acme', 'llm.completion', { tokens: '7.5' }) // exactly the limit: reached, denied until the period ends
    await drained()
    tokens = (await usageOf('acme')).tokens
    expect(tokens.metadata.usage).toMatchObject({ usage: '70', remaining: '0', denied: true })
    expect(grantsOf(tokens)).toEqual([['subscription', '20']])
    expect(await deniedUntil('acme', 'tokens')).toBe(String(FEB_1_NY))
    await record('acme', 'llm.completion', { tokens: 1 })
    await drained()
    expect((await usageOf('acme')).tokens.metadata.usage).toMatchObject({ usage: '70', refused: '11', denied: true })

    // The period ends at midnight in New York (05:00 UTC), not at midnight UTC.
    gw.clock.set(FEB_1_NY - 1)
    expect(await gw.services.entitlements.isDenied(projectId, 'acme', 'tokens')).toBe(true)
    expect((await usageOf('acme')).tokens.metadata.usage).toMatchObject({ denied: true, periodEndAt: FEB_1_NY })
    gw.clock.set(FEB_1_NY)
    expect(await gw.services.entitlements.isDenied(projectId, 'acme', 'tokens')).toBe(false)
    expect((await usageOf('acme')).tokens.metadata.usage).toEqual({
      usage: '0',
      limit: '20',
      remaining: '20',
      overage: '0',
      refused: '0',
      periodStartAt: FEB_1_NY,
      periodEndAt: Date.UTC(2025, 2, 1, 5),
      denied: false,
      // Nothing counted in the new period yet.
      asOf: FEB_1_NY,
      usageAsOf: null,
    })
    await record('acme', 'llm.completion', { tokens: 4 })
    await drained()
    expect((await usageOf('acme')).tokens.metadata.usage).toMatchObject({ usage: '4', remaining: '16', denied: false })
    expect(await deniedUntil('acme', 'tokens')).toBeNull()
  })

  test('record-batch is counted; last-call lets the crossing event through, then denies; one event counts for two features', async () => {
    gw.clock.set(START)
    const events = Array.from({ length: 5 }, (_, i) => ({ customerId: 'batchy', eventSlug: 'llm.completion', id: `b${i}`, properties: { tokens: 2 } }))
    events.push({ customerId: 'batchy', eventSlug: 'llm.completion', id: 'b-text', properties: { tokens: 'lots' } as never })
    const res = await gw.post('/v1/usage/record-batch', { events }, apiKey)
    expect(res.body.results.every((r: any) => r.accepted)).toBe(true)
    await drained()
    const e = await usageOf('batchy')
    // completions: 1, 2, 3 (reaches 3: allowed, then denied), 4, 5, 6 refused.
    expect(e.completions.metadata.usage).toMatchObject({ usage: '3', limit: '3', remaining: '0', refused: '3', overage: '0', denied: true })
    expect(await deniedUntil('batchy', 'completions')).toBe(String(FEB_1_NY))
    // tokens: five events of 2; the one whose field is not a number counts for nothing.
    expect(e.tokens.metadata.usage).toMatchObject({ usage: '10', remaining: '10', refused: '0', denied: false })
    // One ClickHouse row per feature whose meter takes the event: completions (every event, the
    // event's id) and tokens (the five with a number: `<id>#tokens`).
    const rows = await gw.clickhouse!.query<{ event_id: string; feature_slug: string }>(
      `SELECT event_id, feature_slug FROM ${database}.usage_events FINAL WHERE project_id = '${projectId}' AND customer_id = 'batchy' ORDER BY event_id`,
    )
    expect(rows.map((r) => `${r.event_id} ${r.feature_slug}`)).toEqual([
      'b-text completions',
      ...[0, 1, 2, 3, 4].flatMap((i) => [`b${i} completions`, `b${i}#tokens tokens`]),
    ])

    // always (storage: the latest value, past the limit as overage) and none (gpus: the maximum).
    await record('batchy', 'gpu.usage', { gpus: 3 })
    await record('batchy', 'storage.report', { gb: 12 }, 'st-new', START)
    await record('batchy', 'storage.report', { gb: 8 }, 'st-old', START - HOUR_MS) // older: latest stays 12
    await drained()
    const after = await usageOf('batchy')
    expect(after.storage.metadata.usage).toMatchObject({ usage: '12', limit: '10', remaining: '-2', overage: '2', denied: false })
    expect(await deniedUntil('batchy', 'storage')).toBeNull()
    expect(after.gpus.metadata.usage).toMatchObject({ usage: '3', denied: false })
    // Each row's value is what its feature's meter counts: the aggregation field (gpus, gb), not properties.value; 1 for a count.
    const values = await gw.clickhouse!.query<{ feature_slug: string; v: string }>(
      `SELECT feature_slug, toString(value) AS v FROM ${database}.usage_events FINAL WHERE project_id = '${projectId}' AND customer_id = 'batchy'`,
    )
    expect(values.map((r) => `${r.feature_slug}=${Number(r.v)}`).sort()).toEqual([
      ...Array(6).fill('completions=1'),
      'gpus=3',
      'storage=12',
      'storage=8',
      ...Array(5).fill('tokens=2'),
    ])
    await record('batchy', 'gpu.usage', { gpus: 5 }) // max 5 > 4: none refuses it
    await record('batchy', 'gpu.usage', { gpus: 2 }) // below the max: nothing changes
    await drained()
    expect((await usageOf('batchy')).gpus.metadata.usage).toMatchObject({ usage: '3', refused: '5', denied: false })
    await record('batchy', 'gpu.usage', { gpus: 4 })
    await drained()
    expect((await usageOf('batchy')).gpus.metadata.usage).toMatchObject({ usage: '4', remaining: '0', denied: true })
  })

  test("duplicates are counted once: the gateway's dedup window, and past it the worker's claim", async () => {
    gw.clock.set(START)
    await record('dupes', 'llm.completion', { tokens: 5 }, 'same')
    await record('dupes', 'llm.completion', { tokens: 5 }, 'same')
    await drained()
    expect((await usageOf('dupes')).tokens.metadata.usage).toMatchObject({ usage: '5' })
    // Past the 24 h dedup window the gateway queues it again; the claim knows the event id.
    gw.clock.advance(25 * HOUR_MS)
    await record('dupes', 'llm.completion', { tokens: 5 }, 'same')
    await drained()
    expect((await usageOf('dupes')).tokens.metadata.usage).toMatchObject({ usage: '5' })
    expect((await usageOf('dupes')).completions.metadata.usage).toMatchObject({ usage: '1' })
  })

  test('asOf is the moment of the read; usageAsOf is when the gateway accepted the newest event the worker counted, and moves only with a count', async () => {
    const T = START + 3 * HOUR_MS
    gw.clock.set(T)
    const asOfs = async () => {
      const e = await usageOf('sync')
      return Object.fromEntries(['tokens', 'completions', 'storage'].map((f) => [f, [e[f].metadata.usage.asOf, e[f].metadata.usage.usageAsOf]]))
    }
    expect(await asOfs()).toEqual({ tokens: [T, null], completions: [T, null], storage: [T, null] })
    // Stamped an hour earlier: usageAsOf is the acceptance (the count's clock), not the event's own timestamp.
    await record('sync', 'llm.completion', { tokens: 1 }, 'sync-1', T - HOUR_MS)
    await drained()
    gw.clock.advance(1000)
    expect(await asOfs()).toEqual({ tokens: [T + 1000, T], completions: [T + 1000, T], storage: [T + 1000, null] })
    // Reads, a duplicate the gateway drops and an event of another feature leave it where it is.
    gw.clock.advance(1000)
    await record('sync', 'llm.completion', { tokens: 1 }, 'sync-1')
    await record('sync', 'storage.report', { gb: 1 }, 'sync-st')
    await drained()
    expect(await asOfs()).toEqual({ tokens: [T + 2000, T], completions: [T + 2000, T], storage: [T + 2000, T + 2000] })
    // A count the strategy refuses moves it too: the usage read afterwards has taken the event into account.
    gw.clock.advance(1000)
    await record('sync', 'llm.completion', { tokens: 500 }, 'sync-big')
    await drained()
    const e = await usageOf('sync')
    expect(e.tokens.metadata.usage).toMatchObject({ usage: '1', refused: '500', asOf: T + 3000, usageAsOf: T + 3000 })
    // The reduced variant answers the same.
    const reduced = await gw.post('/v1/entitlements/get', { customerId: 'sync' }, apiKey)
    expect([...getCheck.Errors(reduced.body)].slice(0, 3)).toEqual([])
    const tokens = reduced.body.find((x: any) => x.featurePlanVersion.feature.slug === 'tokens')
    expect(tokens.metadata.usage).toMatchObject({ asOf: T + 3000, usageAsOf: T + 3000 })
  })

  test('counters stored before usageAsOf existed read as null, keep their fields, and take it at their next count', async () => {
    const T = START + 4 * HOUR_MS
    gw.clock.set(T)
    const key = usageKey(projectId, 'fresh')
    // gpus as stored before the reached marker (ends with the grants); storage with the marker, reached.
    await gw.redis.hset(key, 'gpus', `${JAN_1_NY};${FEB_1_NY};0:300000000;0:0;0:0;-1;`)
    await gw.redis.hset(key, 'storage', `${JAN_1_NY};${FEB_1_NY};0:1200000000;0:0;0:0;${START};;1`)
    let e = await usageOf('fresh')
    expect(e.gpus.metadata.usage).toMatchObject({ usage: '3', asOf: T, usageAsOf: null })
    expect(e.storage.metadata.usage).toMatchObject({ usage: '12', asOf: T, usageAsOf: null })
    await record('fresh', 'gpu.usage', { gpus: 2 }, 'fresh-gpu') // below the max: unchanged, but counted
    await record('fresh', 'storage.report', { gb: 5 }, 'fresh-st', T)
    await drained()
    gw.clock.advance(1)
    e = await usageOf('fresh')
    expect(e.gpus.metadata.usage).toMatchObject({ usage: '3', asOf: T + 1, usageAsOf: T })
    expect(e.storage.metadata.usage).toMatchObject({ usage: '5', asOf: T + 1, usageAsOf: T })
    // The reached marker is kept where it was set, and countedAt follows it.
    expect((await gw.redis.hget(key, 'storage'))!.split(';').slice(-2)).toEqual(['1', String(T)])
    expect((await gw.redis.hget(key, 'gpus'))!.split(';').slice(-2)).toEqual(['', String(T)])
  })

  test('the reduced variant shows the same usage; the read is one Redis command', async () => {
    gw.clock.set(START + 2 * DAY_MS)
    const res = await gw.post('/v1/entitlements/get', { customerId: 'batchy' }, apiKey)
    expect(res.status).toBe(200)
    expect([...getCheck.Errors(res.body)].slice(0, 3)).toEqual([])
    expect(res.body.find((e: any) => e.featurePlanVersion.feature.slug === 'completions').metadata.usage).toMatchObject({ usage: '3', denied: true })

    const commands: string[] = []
    const counting = new Proxy(gw.redis, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver)
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          commands.push(String(name))
          return value.apply(target, args)
        }
      },
    }) as RedisClient
    const service = new EntitlementService(counting, gw.clock)
    const listed = await service.listEntitlements(projectId, 'batchy')
    expect(listed.ok && listed.value.length).toBe(4)
    expect(commands).toEqual(['call'])
  })
})

describe("the claim's count and the reset periods", () => {
  const runOn = async (redis: RedisClient) => {
    const clock = manualClock(START)
    const project = uniquePrefix()
    const catalog = new CatalogService(redis, clock, new BudgetService(redis, clock))
    const applied = await catalog.apply(project, CATALOG, 'test')
    expect(applied.ok, JSON.stringify(applied)).toBe(true)
    const customer = (await new CatalogReads(redis).customers(project, ['sync'])).get('sync')!
    // Periods in New York time, across the change to daylight saving time (March 9).
    const e = customer.view.entitlements.find((x) => x.featurePlanVersion.feature.slug === 'tokens')!
    expect(resetPeriod(customer.view, e, Date.UTC(2025, 2, 20))).toEqual({ startMs: Date.UTC(2025, 2, 1, 5), endMs: Date.UTC(2025, 3, 1, 4) })
    // The ingest claim: a retried batch (same batchId) and a second job with the same events
    // own or lose them, but count them once.
    const events = ['x1', 'x2', 'x3'].map((eventId, i) => ({
      eventId,
      projectId: project,
      customerId: 'fresh',
      eventSlug: 'llm.completion',
      properties: { tokens: i + 1 },
      timestampMs: START,
      receivedMs: START,
    }))
    const views = await new CatalogReads(redis).customers(project, ['fresh'])
    const { counts, rows } = countsOfEvents(events, views)
    // One ClickHouse row per feature whose meter takes the event: completions counts 1, tokens sums properties.tokens.
    expect(rows).toEqual(
      [1, 2, 3].map((n) => [
        { featureSlug: 'completions', value: '1' },
        { featureSlug: 'tokens', value: String(n) },
      ]),
    )
    expect(counts).toHaveLength(6)
    const ids = events.map((x) => x.eventId)
    const first = await claimEvents(redis, project, 'b1', ids, Date.now(), counts)
    expect([...first.owned]).toEqual(ids.map((id) => [id, new Set()]))
    // The third completion takes completions (last-call, limit 3) to its limit: that count is the limit.reached decision.
    expect(first.reached.map((r) => [r.count.event, r.count.args[0], r.usedUnits, r.limitUnits, r.deniedUntilMs])).toEqual([
      [2, 'completions', '300000000', '300000000', FEB_1_NY],
    ])
    const retried = await claimEvents(redis, project, 'b1', ids, Date.now(), counts)
    expect([...retried.owned.keys()]).toEqual(ids)
    expect(retried.reached).toEqual([])
    const other = await claimEvents(redis, project, 'b2', ids, Date.now(), counts)
    expect([...other.owned.keys()]).toEqual([])
    const listed = await new EntitlementService(redis, clock).listEntitlements(project, 'fresh')
    if (!listed.ok) throw new Error(JSON.stringify(listed))
    const bySlug = Object.fromEntries(listed.value.map((x) => [x.featurePlanVersion.feature.slug, x.metadata.usage]))
    expect(bySlug.tokens).toMatchObject({ usage: '6', remaining: '14' })
    expect(bySlug.completions).toMatchObject({ usage: '3', remaining: '0', denied: true })
    expect(await redis.hget(entitlementStateKey(project, 'fresh'), 'completions')).toBe(String(FEB_1_NY))
  }

  test('on a single node', async () => {
    const redis = testRedis()
    try {
      await runOn(redis)
    } finally {
      await redis.quit()
    }
  })

  test('on a 3-master Cluster', async () => {
    const cluster = testCluster()
    try {
      await runOn(cluster)
    } finally {
      await cluster.quit()
    }
  })
})
