import type { TSchema } from '@sinclair/typebox'
import { ERROR_STATUSES } from './errors.js'
import type { AnyRoute } from './route.js'
import { ErrorEnvelope } from '../kernel/schema.js'

/** Strips TypeBox's symbol keys and `$id`s so the schema is plain JSON Schema. */
function plain(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema, (key, value) => (key === '$id' ? undefined : value)))
}

const ERROR_TEXT: Record<number, string> = {
  400: 'Malformed JSON, wrong content type, unknown properties, wrong types or out-of-range values; details.issues names each JSON path.',
  401: 'Missing, malformed, unknown, revoked or expired key.',
  402: 'A hard limit cannot take the amount (error.code BUDGET_EXCEEDED, details.blocked and details.balance).',
  403: "The key lacks the route's scope, or names another project.",
  404: 'Not found.',
  409: 'Conflict with the current state.',
  412: 'Precondition failed.',
  413: 'Body larger than the configured limit.',
  429: 'Per-key request rate limit; see Retry-After.',
  500: 'Internal error.',
}

/** The OpenAPI 3.1 document, built from the same schemas that validate requests. */
export function buildOpenApi(routes: readonly AnyRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}')
    const responses: Record<string, unknown> = {
      200: { description: 'Success', content: { 'application/json': { schema: plain(route.response) } } },
    }
    const statuses: number[] = [...ERROR_STATUSES]
    if (route.operationId === 'budgets.authorize' || route.operationId === 'budgets.charge') statuses.push(402)
    for (const status of statuses.sort()) {
      responses[status] = { description: ERROR_TEXT[status], content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } }
    }
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      tags: route.tags,
      responses,
    }
    if (route.description) operation.description = route.description
    if (route.access.kind === 'public') operation.security = []
    const parameters: unknown[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string', minLength: 1 } }))
    if (route.query) {
      const query = plain(route.query) as { properties?: Record<string, unknown>; required?: string[] }
      for (const [name, schema] of Object.entries(query.properties ?? {})) parameters.push({ name, in: 'query', required: query.required?.includes(name) ?? false, schema })
    }
    if (parameters.length > 0) operation.parameters = parameters
    if (route.body) operation.requestBody = { required: true, content: { 'application/json': { schema: plain(route.body) } } }
    ;(paths[path] ??= {})[route.method.toLowerCase()] = operation
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Metering gateway', version: '1.0.0', description: 'Usage metering and billing: budgets with holds, usage, entitlements, invoices, wallets.' },
    paths,
    components: {
      schemas: { ErrorEnvelope: plain(ErrorEnvelope) },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' } },
    },
    security: [{ bearer: [] }],
  }
}
