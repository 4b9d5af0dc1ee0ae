import { Kind, type TSchema } from '@sinclair/typebox'
import { namedSchemas } from '../kernel/schema.js'
import { WEBHOOK_PAYLOADS } from '../notifications/schemas.js'
import { COMMON_ERROR_STATUSES, ErrorEnvelope } from './errors.js'
import type { AnyRoute } from './route.js'

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })

const isNamed = (value: unknown): value is TSchema & { $id: string } =>
  typeof value === 'object' && value !== null && typeof (value as { $id?: unknown }).$id === 'string' && Kind in value

/**
 * The JSON Schema of a TypeBox schema as the document shows it: TypeBox's symbol keys dropped,
 * every schema named by `$id` below the top (or, unless `inline`, the top one too) replaced by a
 * `$ref` to its component, and no `$id` left (inside a component it would change the base URI
 * the `$ref`s resolve against).
 */
function jsonSchema(schema: TSchema, inline = false): unknown {
  return JSON.parse(
    JSON.stringify(schema, function (key, value: unknown) {
      if (key === '$id' && typeof value === 'string' && isNamed(this)) return undefined
      if (isNamed(value) && !(inline && value === schema)) return ref(value.$id)
      return value
    }),
  )
}

const ERROR_TEXT: Record<number, string> = {
  400: 'Malformed JSON, wrong content type, unknown properties, wrong types or out-of-range values; details.issues names each JSON path.',
  401: 'Missing, malformed, unknown, revoked or expired key.',
  402: 'Not enough budget or funds (error.code BUDGET_EXCEEDED, details.reason); a hard limit of a budget that cannot take the amount is named in details.blocked, with details.balance.',
  403: "The key lacks the route's scope, or names another project.",
  404: 'Not found.',
  409: 'Conflict with the current state (details.reason, e.g. idempotency_conflict).',
  412: 'Precondition failed: what the request needs is not configured on this gateway (details.reason).',
  413: 'Body larger than the configured limit.',
  429: 'Per-key request rate limit; see Retry-After.',
  500: 'Internal error.',
  503: 'A store the service needs (Redis, ClickHouse) cannot be reached right now (error.code SERVICE_UNAVAILABLE); retry the same request, with the same idempotency key, after Retry-After seconds.',
}

/**
 * The OpenAPI 3.1 document, built from the same schemas that validate requests. Every schema with
 * an `$id` met in the routes' schemas (at any depth) is emitted once under components.schemas
 * and referenced wherever it appears; the error statuses of an operation are the common ones and
 * those its route declares in `errors`, each answering the ErrorEnvelope component.
 */
export function buildOpenApi(routes: readonly AnyRoute[]): Record<string, unknown> {
  // Every named schema first: one name standing for two different schemas throws here.
  const named = namedSchemas(ErrorEnvelope)
  for (const route of routes) for (const schema of [route.body, route.query, route.response]) if (schema) namedSchemas(schema, named)
  for (const schema of Object.values(WEBHOOK_PAYLOADS)) namedSchemas(schema, named)

  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}')
    const responses: Record<string, unknown> = {
      200: { description: 'Success', content: { 'application/json': { schema: jsonSchema(route.response) } } },
    }
    const statuses = [...new Set<number>([...COMMON_ERROR_STATUSES, ...(route.errors ?? [])])].sort((a, b) => a - b)
    for (const status of statuses) {
      const description = ERROR_TEXT[status]
      if (description === undefined) throw new Error(`${route.operationId}: no description for error status ${status}`)
      responses[status] = { description, content: { 'application/json': { schema: ref(ErrorEnvelope.$id!) } } }
    }
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      tags: route.tags,
      responses,
    }
    if (route.description) operation.description = route.description
    if (route.access.kind === 'public') operation.security = []
    const parameters: unknown[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string', minLength: 1 },
    }))
    if (route.query) {
      // The query object itself is never a $ref: its properties are the parameters.
      const query = jsonSchema(route.query, true) as { properties?: Record<string, unknown>; required?: string[] }
      for (const [name, schema] of Object.entries(query.properties ?? {}))
        parameters.push({ name, in: 'query', required: query.required?.includes(name) ?? false, schema })
    }
    if (parameters.length > 0) operation.parameters = parameters
    if (route.body) operation.requestBody = { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } }
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation }
  }

  const schemas: Record<string, unknown> = {}
  for (const name of [...named.keys()].sort()) schemas[name] = jsonSchema(named.get(name)!, true)
  return {
    openapi: '3.1.0',
    info: {
      title: 'Metering gateway',
      version: '1.0.0',
      description: 'Usage metering and billing: budgets with holds, usage, entitlements, invoices, wallets.',
    },
    paths,
    webhooks: webhooksOf(),
    components: {
      schemas,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' } },
    },
    security: [{ bearer: [] }],
  }
}

/**
 * OpenAPI 3.1 `webhooks`: what the gateway POSTs to a project's endpoints, one entry per
 * notification type (src/notifications/README.md), its body the type's payload component.
 */
function webhooksOf(): Record<string, unknown> {
  const webhooks: Record<string, unknown> = {}
  for (const [type, schema] of Object.entries(WEBHOOK_PAYLOADS)) {
    webhooks[type] = {
      post: {
        operationId: `webhook_${type.replace('.', '_')}`,
        summary: schema.description,
        tags: ['webhooks'],
        description:
          'Headers: `x-metering-event` (the type), `x-metering-delivery` (the same on every attempt: dedup by it), `x-metering-signature` (`t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" with the endpoint secret>`). Retried with exponential backoff until a 2xx.',
        requestBody: { required: true, content: { 'application/json': { schema: ref(schema.$id!) } } },
        responses: { '2XX': { description: 'Delivered; any other answer (or none within the timeout) is retried.' } },
      },
    }
  }
  return webhooks
}
