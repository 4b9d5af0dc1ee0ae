import type { TSchema } from '@sinclair/typebox'
import { TypeCompiler, ValueErrorType, type TypeCheck, type ValueError } from '@sinclair/typebox/compiler'
import type { Issue } from './errors.js'
import { namedSchemas } from './schema.js'

/** A validator compiled once, at route registration. */
export interface Validator {
  check(value: unknown): boolean
  issues(value: unknown): Issue[]
}

/**
 * The spec counts string lengths in characters (and so does JSON Schema), TypeBox in UTF-16
 * code units: a maxLength failure is real only if the string has more code points than allowed.
 * Looked at only after the compiled check fails, so valid requests pay nothing for it.
 */
function isRealError(error: ValueError): boolean {
  if (error.type !== ValueErrorType.StringMaxLength || typeof error.value !== 'string') return true
  let codePoints = 0
  for (const _ of error.value) codePoints++
  return codePoints > (error.schema.maxLength as number)
}

/**
 * `maxIssues`: a request names at most that many problems (a large document may have many).
 * Schemas named by `$id` (OpenAPI components) compile as they are: TypeCompiler checks each in a
 * function of its own, and error paths and messages are those of the unnamed schema. A name
 * given to two different schemas throws here (namedSchemas), not in a request.
 */
export function compile(schema: TSchema, maxIssues = 50): Validator {
  namedSchemas(schema)
  const checker: TypeCheck<TSchema> = TypeCompiler.Compile(schema)
  const realErrors = (value: unknown) => [...checker.Errors(value)].filter(isRealError)
  return {
    check: (value) => checker.Check(value) || realErrors(value).length === 0,
    issues(value) {
      // One message per path, the first TypeBox gives: unions report every branch otherwise.
      const byPath = new Map<string, string>()
      for (const error of realErrors(value)) {
        const path = toJsonPath(error.path)
        if (!byPath.has(path)) byPath.set(path, error.message)
        if (byPath.size >= maxIssues) break
      }
      return [...byPath].map(([path, message]) => ({ path, message }))
    },
  }
}

/** `/limits/0/amount` → `$.limits[0].amount`; names that are not identifiers use brackets. */
export function toJsonPath(pointer: string): string {
  let path = '$'
  if (pointer === '') return path
  for (const raw of pointer.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    if (/^(0|[1-9][0-9]*)$/.test(part)) path += `[${part}]`
    else if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(part)) path += `.${part}`
    else path += `[${JSON.stringify(part)}]`
  }
  return path
}
