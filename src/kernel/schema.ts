import { Kind, Type, type TSchema } from '@sinclair/typebox'
import { AMOUNT_PATTERN } from './money.js'

/**
 * Domain-free building blocks of schemas. Descriptions document the API (they end up in OpenAPI).
 * A schema given `$id` becomes a named component of the OpenAPI document (src/http/openapi.ts
 * emits `$ref: '#/components/schemas/<$id>'` wherever it appears); validation is the same with
 * or without it.
 */

export const Amount = Type.String({
  pattern: AMOUNT_PATTERN,
  description: 'Decimal amount: 1 to 19 digits, optionally a dot and 1 to 8 fractional digits.',
  examples: ['12.5'],
})

/** Amounts the service answers with: canonical decimals, negative where a limit was passed. */
export const SignedAmount = Type.String({ pattern: '^-?[0-9]+(\\.[0-9]{1,8})?$', description: 'Decimal amount (may be negative).' })

export const IdempotencyKey = Type.String({ minLength: 1, maxLength: 256, description: 'Retries with the same key and request replay the first answer.' })

export const EpochMs = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Epoch milliseconds.' })

export function strictObject<T extends Parameters<typeof Type.Object>[0]>(properties: T, options: { description?: string; $id?: string } = {}) {
  return Type.Object(properties, { additionalProperties: false, ...options })
}

/** The JSON Schema a TypeBox schema stands for: its string keys (TypeBox's symbol keys dropped). */
const jsonOf = (schema: TSchema) => JSON.stringify(schema)

/**
 * Every schema named by `$id` in `schema` (itself included), by name, first occurrence first.
 * A name stands for one schema: a second, different schema under a name throws, since
 * TypeCompiler would check it with the first one's code and OpenAPI would show the first one.
 * Copies that differ only in TypeBox's symbol keys (Type.Optional(X)) are the same schema.
 */
export function namedSchemas(schema: unknown, into = new Map<string, TSchema>()): Map<string, TSchema> {
  const seen = new Set<object>()
  const visit = (node: unknown): void => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return
    seen.add(node)
    if (Array.isArray(node)) {
      for (const item of node) visit(item)
      return
    }
    const id = (node as { $id?: unknown }).$id
    if (typeof id === 'string' && Kind in node) {
      const named = into.get(id)
      if (named === undefined) into.set(id, node as TSchema)
      else if (named !== node && (named[Kind] !== (node as TSchema)[Kind] || jsonOf(named) !== jsonOf(node as TSchema))) {
        throw new Error(`$id ${id} names two different schemas`)
      }
    }
    for (const value of Object.values(node)) visit(value)
  }
  visit(schema)
  return into
}

export type { TSchema }
