// The committed openapi.json is what the routes generate (Fastify's validator integrity
// check): change a schema without `npm run openapi` and this fails. The gateway's
// GET /v1/openapi.json is checked against the same document in
// test/integration/http.routes.test.ts (it needs Redis).
import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { routes } from '../../src/http/routes/index.js'
import { OPENAPI_PATH, renderOpenApi } from '../../scripts/openapi.js'

const committed = readFileSync(OPENAPI_PATH, 'utf8')
const doc = JSON.parse(renderOpenApi()) as {
  openapi: string
  info: { version: string }
  paths: Record<string, Record<string, { operationId: string; requestBody?: unknown; responses: Record<string, unknown> }>>
  components: { schemas: Record<string, unknown> }
}

test('the committed openapi.json is up to date', () => {
  // One clear message instead of a 2000-line diff.
  expect(committed === renderOpenApi(), 'openapi.json is stale: run `npm run openapi` and commit the result').toBe(true)
})

test('it is OpenAPI 3.1.0, version 1.0.0', () => {
  expect(doc.openapi).toBe('3.1.0')
  expect(doc.info.version).toBe('1.0.0')
})

test('every route is present with its method, operationId, body and the shared error responses', () => {
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}')
    const operation = doc.paths[path]?.[route.method.toLowerCase()]
    expect(operation, `${route.method} ${path} missing from the document`).toBeDefined()
    expect(operation!.operationId).toBe(route.operationId)
    expect(Boolean(operation!.requestBody), `${route.operationId} requestBody`).toBe(Boolean(route.body))
    for (const status of ['200', '400', '401', '403', '404', '409', '412', '413', '429', '500']) expect(Object.keys(operation!.responses)).toContain(status)
  }
  const operations = Object.values(doc.paths).flatMap((methods) => Object.keys(methods))
  expect(operations.length, 'no operation without a route').toBe(routes.length)
  expect(doc.components.schemas.ErrorEnvelope).toBeDefined()
})

test('authorize and charge also list 402', () => {
  expect(Object.keys(doc.paths['/v1/budgets/authorize']!.post!.responses)).toContain('402')
  expect(Object.keys(doc.paths['/v1/budgets/charge']!.post!.responses)).toContain('402')
})
