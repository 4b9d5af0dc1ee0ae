// The committed openapi.json is what the routes generate (Fastify's validator integrity
// check): change a schema without `npm run openapi` and this fails. The gateway's
// GET /v1/openapi.json is checked against the same document in
// test/integration/http.routes.test.ts (it needs Redis).
import { readFileSync } from 'node:fs'
import type { TSchema } from '@sinclair/typebox'
import { expect, test } from 'vitest'
import { COMMON_ERROR_STATUSES } from '../../src/http/errors.js'
import { routes } from '../../src/http/routes/index.js'
import { namedSchemas } from '../../src/kernel/schema.js'
import { NOTIFICATION_TYPES } from '../../src/notifications/queue.js'
import { WEBHOOK_PAYLOADS } from '../../src/notifications/schemas.js'
import { OPENAPI_PATH, renderOpenApi } from '../../scripts/openapi.js'

interface Response {
  description: string
  content: { 'application/json': { schema: unknown } }
}
interface Operation {
  operationId: string
  requestBody?: { content: { 'application/json': { schema: unknown } } }
  parameters?: { name: string; in: string; required: boolean; schema: unknown }[]
  responses: Record<string, Response>
}

const committed = readFileSync(OPENAPI_PATH, 'utf8')
const doc = JSON.parse(renderOpenApi()) as {
  openapi: string
  info: { version: string }
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, unknown> }
  webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: { $ref: string } } } }; responses: Record<string, unknown> } }>
}
const REF = /^#\/components\/schemas\/(.+)$/

const operationOf = (route: (typeof routes)[number]) => doc.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()]

/** A document schema with every `$ref` replaced by its component (throws on one that resolves to nothing). */
function deref(node: unknown, depth = 0): unknown {
  if (depth > 64) throw new Error('$ref cycle')
  if (Array.isArray(node)) return node.map((n) => deref(n, depth))
  if (typeof node !== 'object' || node === null) return node
  const ref = (node as { $ref?: string }).$ref
  if (ref !== undefined) {
    const name = REF.exec(ref)?.[1]
    if (name === undefined || !(name in doc.components.schemas)) throw new Error(`unresolved $ref ${ref}`)
    return deref(doc.components.schemas[name], depth + 1)
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v, depth)]))
}

/** A TypeBox schema as plain JSON Schema: symbol keys and `$id`s dropped. */
const plain = (schema: TSchema) => JSON.parse(JSON.stringify(schema, (key, value) => (key === '$id' ? undefined : value)))

test('the committed openapi.json is up to date', () => {
  // One clear message instead of a 2000-line diff.
  expect(committed === renderOpenApi(), 'openapi.json is stale: run `npm run openapi` and commit the result').toBe(true)
})

test('it is OpenAPI 3.1.0, version 1.0.0', () => {
  expect(doc.openapi).toBe('3.1.0')
  expect(doc.info.version).toBe('1.0.0')
})

test('every route is present with its method, operationId, body, and exactly the common and its declared error responses', () => {
  for (const route of routes) {
    const operation = operationOf(route)
    expect(operation, `${route.method} ${route.path} missing from the document`).toBeDefined()
    expect(operation!.operationId).toBe(route.operationId)
    expect(Boolean(operation!.requestBody), `${route.operationId} requestBody`).toBe(Boolean(route.body))
    const statuses = ['200', ...[...COMMON_ERROR_STATUSES, ...(route.errors ?? [])].sort((a, b) => a - b).map(String)]
    expect(Object.keys(operation!.responses), route.operationId).toEqual(statuses)
    for (const [status, response] of Object.entries(operation!.responses)) {
      expect(response.description, `${route.operationId} ${status}`).toMatch(/\S/)
      expect(response.content['application/json'].schema, `${route.operationId} ${status}`).toBeDefined()
      if (status !== '200') expect(response.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorEnvelope' })
    }
  }
  const operations = Object.values(doc.paths).flatMap((methods) => Object.keys(methods))
  expect(operations.length, 'no operation without a route').toBe(routes.length)
  expect(doc.components.schemas.ErrorEnvelope).toBeDefined()
})

test('402 is listed by exactly the routes that can answer it', () => {
  expect(routes.filter((r) => r.errors?.includes(402)).map((r) => r.operationId)).toEqual(['budgets.authorize', 'budgets.charge', 'runs.start'])
  for (const path of ['/v1/budgets/authorize', '/v1/budgets/charge', '/v1/runs/start']) expect(Object.keys(doc.paths[path]!.post!.responses)).toContain('402')
  expect(Object.keys(doc.paths['/v1/budgets/record']!.post!.responses)).not.toContain('402')
})

test('each schema named by $id is one component, referenced by $ref wherever it appears, and nothing else is a component', () => {
  const named = new Map<string, TSchema>()
  for (const route of routes) for (const schema of [route.body, route.query, route.response]) if (schema) namedSchemas(schema, named)
  for (const schema of Object.values(WEBHOOK_PAYLOADS)) namedSchemas(schema, named)
  expect(Object.keys(doc.components.schemas).sort()).toEqual([...new Set([...named.keys(), 'ErrorEnvelope'])].sort())
  for (const name of [
    'Balance',
    'Crossed',
    'Limit',
    'Budget',
    'Hold',
    'ErrorEnvelope',
    'Entitlement',
    'PlanVersion',
    'FeatureConfig',
    'Subscription',
    'Invoice',
    'Run',
    'WalletBalance',
    'Webhook',
  ]) {
    expect(doc.components.schemas, name).toHaveProperty(name)
  }
  const json = JSON.stringify(doc)
  expect(json, 'no $id is left in the document').not.toContain('"$id"')
  const referenced = new Set([...json.matchAll(/"\$ref":"([^"]*)"/g)].map((m) => REF.exec(m[1]!)?.[1]))
  expect(referenced.has(undefined), 'every $ref points into components.schemas').toBe(false)
  for (const name of Object.keys(doc.components.schemas)) expect(referenced.has(name), `${name} is referenced`).toBe(true)
  // Inlined, a route's schemas are still the same: no component's content lost or changed.
  expect(deref(doc.components.schemas.PlanVersion)).toEqual(plain(named.get('PlanVersion')!))
})

test('with its $refs resolved, every body, query and answer is the schema that validates or describes it', () => {
  for (const route of routes) {
    const operation = operationOf(route)!
    expect(deref(operation.responses['200']!.content['application/json'].schema), route.operationId).toEqual(plain(route.response))
    if (route.body) expect(deref(operation.requestBody!.content['application/json'].schema), route.operationId).toEqual(plain(route.body))
    if (route.query) {
      const query = plain(route.query) as { properties: Record<string, unknown>; required?: string[] }
      const parameters = (operation.parameters ?? []).filter((p) => p.in === 'query')
      expect(
        parameters.map((p) => [p.name, p.required, deref(p.schema)]),
        route.operationId,
      ).toEqual(Object.entries(query.properties).map(([name, schema]) => [name, query.required?.includes(name) ?? false, schema]))
    }
  }
})

test('every notification type is a webhook whose body is its payload schema, with the envelope every delivery has', () => {
  expect(Object.keys(doc.webhooks).sort()).toEqual([...NOTIFICATION_TYPES].sort())
  for (const type of NOTIFICATION_TYPES) {
    const post = doc.webhooks[type]!.post
    const body = post.requestBody.content['application/json'].schema
    const schema = WEBHOOK_PAYLOADS[type]
    expect(body).toEqual({ $ref: `#/components/schemas/${schema.$id}` })
    expect(deref(body)).toEqual(plain(schema))
    expect((deref(body) as { properties: Record<string, unknown> }).properties.type).toEqual({ const: type, type: 'string' })
    expect(Object.keys(post.responses)).toEqual(['2XX'])
  }
})
