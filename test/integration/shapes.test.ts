// Shapes a client can trust (README.md, "Shapes"): the answers of the catalog, run, wallet and
// invoice routes, as sent over HTTP, are described by their route's response schema (the one
// openapi.json is generated from: test/unit/openapi.integrity.test.ts) with no property it does
// not declare, and carry no placeholder: no "" value, no 0 for a time that has not come
// (`…At`, `…_at`), no 253402300799999 for "no end", no 9007199254740991 for "unlimited". The one
// "" kept: the description of a plan or plan version given none (the peer types it a string).
import { readFileSync } from 'node:fs'
import { Kind, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { routes } from '../../src/http/routes/index.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

const EXAMPLE = JSON.parse(readFileSync(new URL('../../examples/ai-api-catalog.json', import.meta.url), 'utf8'))
const MARCH_15 = Date.UTC(2025, 2, 15, 12)
const FOREVER_MS = 253_402_300_799_999
const UNLIMITED = Number.MAX_SAFE_INTEGER

/** A feature counting events (no aggregationField), one with no description, and a plan on it. */
const EXTRA = {
  features: [{ slug: 'calls', title: 'Calls', unitOfMeasure: 'calls' }],
  planVersions: [
    {
      plan: 'free',
      version: 2,
      status: 'published',
      title: 'Free with calls',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      features: [{ featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' } }],
    },
  ],
  customers: [{ id: 'caller' }],
  subscriptions: [{ id: 'sub_caller', customerId: 'caller', phases: [{ plan: 'free', version: 2, startAt: Date.UTC(2025, 0, 1) }] }],
}

/** Places in a value that are placeholders rather than values. */
function placeholders(value: unknown, path = '$', found: string[] = []): string[] {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) placeholders(v, `${path}[${i}]`, found)
  } else if (value !== null && typeof value === 'object') {
    const planOrVersion = 'planId' in value || 'defaultPlan' in value
    for (const [k, v] of Object.entries(value)) {
      const at = `${path}.${k}`
      if (v === '' && !(k === 'description' && planOrVersion)) found.push(`${at}: ""`)
      if (v === 0 && /(At|_at)$/.test(k)) found.push(`${at}: 0`)
      if (typeof v === 'number' && (v === FOREVER_MS || v >= UNLIMITED)) found.push(`${at}: ${v}`)
      if (typeof v === 'string' && /^[0-9]{16,}$/.test(v) && BigInt(v) >= BigInt(UNLIMITED)) found.push(`${at}: "${v}"`)
      placeholders(v, at, found)
    }
  }
  return found
}

const compiled = new Map<TSchema, ReturnType<typeof TypeCompiler.Compile>>()
const checks = (schema: TSchema, value: unknown) => {
  let c = compiled.get(schema)
  if (!c) {
    c = TypeCompiler.Compile(schema)
    compiled.set(schema, c)
  }
  return c.Check(value)
}

/**
 * Properties of the value the schema does not declare (objects with `properties`; a union takes
 * the first branch the value passes, an intersection every branch's properties; records and
 * free-form objects declare anything).
 */
function undeclared(schema: TSchema, value: unknown, path = '$', found: string[] = []): string[] {
  if (schema.anyOf) {
    const branch = (schema.anyOf as TSchema[]).find((s) => checks(s, value))
    if (branch) undeclared(branch, value, path, found)
  } else if (schema.allOf) {
    const merged = { [Kind]: 'Object', type: 'object', properties: Object.assign({}, ...(schema.allOf as TSchema[]).map((s) => s.properties ?? {})) }
    undeclared(merged as unknown as TSchema, value, path, found)
  } else if (schema.type === 'array' && Array.isArray(value)) {
    for (const [i, v] of value.entries()) undeclared(schema.items as TSchema, v, `${path}[${i}]`, found)
  } else if (schema.type === 'object' && schema.properties && value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const declared = (schema.properties as Record<string, TSchema>)[k]
      if (declared) undeclared(declared, v, `${path}.${k}`, found)
      else if (schema.additionalProperties !== true && !schema.patternProperties) found.push(`${path}.${k}`)
    }
  }
  return found
}

let gw: TestGateway
let key: string
const seen = new Set<string>()

/** Calls a route and checks its answer as sent: its schema holds, nothing undeclared, no placeholders. */
async function answer(method: 'GET' | 'POST', path: string, body?: unknown): Promise<any> {
  const res = method === 'GET' ? await gw.get(path, key) : await gw.post(path, body, key)
  expect(res.status, `${path}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(200)
  const route = routes.find((r) => r.method === method && new RegExp(`^${r.path.replace(/:\w+/g, '[^/]+')}$`).test(path.split('?')[0]!))!
  const check = TypeCompiler.Compile(route.response)
  expect(
    [...check.Errors(res.body)].slice(0, 3).map((e) => `${e.path}: ${e.message}`),
    route.operationId,
  ).toEqual([])
  expect(undeclared(route.response, res.body), route.operationId).toEqual([])
  expect(placeholders(res.body), route.operationId).toEqual([])
  seen.add(route.operationId)
  return res.body
}

beforeAll(async () => {
  gw = await startTestGateway({}, MARCH_15)
  ;({ apiKey: key } = await gw.project())
  for (const doc of [EXAMPLE, EXTRA]) expect((await gw.post('/v1/config/apply', doc, key)).status).toBe(200)
})
afterAll(async () => {
  await gw?.close()
})

describe('answers as sent: described by their schema, no placeholders', () => {
  test('catalog: features, plan versions, entitlements, subscriptions', async () => {
    await answer('GET', '/v1/features/list')
    const list = await answer('POST', '/v1/plan-versions/list', {})
    await answer('POST', '/v1/plans/versions/list', { onlyLatest: true })
    for (const pv of list.planVersions.filter((v: { status?: string; publishedAt: number | null }) => v.publishedAt !== null)) {
      await answer('GET', `/v1/plan-versions/get/${pv.id}`)
    }
    for (const customerId of ['acme', 'globex', 'caller']) {
      await answer('POST', '/v1/access/entitlements/list', { customerId })
      await answer('POST', '/v1/entitlements/get', { customerId })
      await answer('POST', '/v1/subscriptions/get', { customerId })
    }
  })

  test('runs and wallet: a root run and a child, consumed and ended; credits and cash', async () => {
    await answer('POST', '/v1/wallet/top-up', { customerId: 'acme', amount: '20', idempotencyKey: 'cash' })
    // The runs reserve from the credit first ($6); the rest of it pays invoice lines.
    await answer('POST', '/v1/wallet/credits/grant', { customerId: 'acme', amount: '50', source: 'refund', idempotencyKey: 'refund' })
    const root = await answer('POST', '/v1/runs/start', { customerId: 'acme', budgetAmountMinor: 500, idempotencyKey: 'root' })
    const child = await answer('POST', '/v1/runs/start', { customerId: 'acme', budgetAmountMinor: 100, idempotencyKey: 'child', parentRunId: root.runId })
    await answer('POST', `/v1/runs/consume/${child.runId}`, { featureSlug: 'tokens', idempotencyKey: 't1', properties: { total_tokens: 10 } })
    await answer('GET', `/v1/runs/get/${root.runId}`)
    await answer('POST', `/v1/runs/end/${child.runId}`, { status: 'completed' })
    await answer('GET', `/v1/wallet/balance?customerId=acme`)
  })

  test('invoices: closed, listed and read, with lines paid by a credit, by cash, and due', async () => {
    gw.clock.set(Date.UTC(2025, 4, 2))
    const closed = await answer('POST', '/v1/invoices/close', {})
    expect(closed.created.length).toBeGreaterThan(0)
    const { invoices } = await answer('POST', '/v1/invoices/list', { limit: 100 })
    expect(invoices.length).toBe(closed.created.length)
    const sources = new Set<string>()
    for (const invoice of invoices) {
      const { lines } = await answer('GET', `/v1/invoices/get/${invoice.id}`)
      for (const l of lines) sources.add(l.settlement_source)
    }
    // The wallet paid some lines (a credit, then cash) and left others due.
    expect([...sources].sort()).toEqual(expect.arrayContaining(['cash_wallet', 'manual', 'provider']))
  })

  test('the checks catch what they look for', () => {
    const run = routes.find((r) => r.operationId === 'runs.get')!.response
    const sample = { runId: 'run_1', status: 'running', customerId: 'c', currency: 'USD', workloadId: null, traceId: null, parentRunId: null }
    expect(undeclared(run, { ...sample, budgetAmount: 5 })).toEqual(['$.budgetAmount'])
    expect(placeholders({ ...sample, parentRunId: '', endedAt: 0, lines: [{ sent_at: 0, limit: UNLIMITED, endAt: FOREVER_MS }] })).toEqual([
      '$.parentRunId: ""',
      '$.endedAt: 0',
      '$.lines[0].sent_at: 0',
      '$.lines[0].limit: 9007199254740991',
      '$.lines[0].endAt: 253402300799999',
    ])
  })

  test('every route above was seen', () => {
    expect([...seen].sort()).toEqual(
      [
        'features.list',
        'planVersions.list',
        'plans.versions.list',
        'planVersions.get',
        'access.entitlements.list',
        'entitlements.get',
        'subscriptions.get',
        'wallet.topUp',
        'wallet.credits.grant',
        'runs.start',
        'runs.consume',
        'runs.get',
        'runs.end',
        'wallet.balance',
        'invoices.close',
        'invoices.list',
        'invoices.get',
      ].sort(),
    )
  })
})
