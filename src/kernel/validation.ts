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
  for (const raw of pointer.slice(1).split('/')) path += pathSegment(raw.replace(/~1/g, '/').replace(/~0/g, '~'))
  return path
}

/** One step of a JSON path: `[0]` for an index, `.name` for an identifier, `["a b"]` otherwise. */
function pathSegment(part: string): string {
  if (/^(0|[1-9][0-9]*)$/.test(part)) return `[${part}]`
  if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(part)) return `.${part}`
  return `[${JSON.stringify(part)}]`
}

/**
 * How deeply objects and arrays may nest in a JSON body (the body itself is level 1). Far more
 * than any document of the API needs, and far less than what overflows the stack of the
 * recursive functions a body meets later (JSON.stringify of event properties fails near 5,000
 * levels): past it, a body is refused before anything else looks at it.
 */
export const MAX_JSON_DEPTH = 64

/** An object or array being walked by depthIssue: its keys (undefined for an array) and the next one to look at. */
interface Frame {
  node: object
  keys: string[] | undefined
  next: number
}

const frameOf = (node: object): Frame => ({ node, keys: Array.isArray(node) ? undefined : Object.keys(node), next: 0 })

/**
 * The first value (in document order) nested deeper than `maxDepth` levels in `value`, as an
 * issue at its JSON path under `at`; undefined when there is none. Iterative, so a value of any
 * depth walks in constant stack, and it stops at that first value: a deep document costs at
 * most the nodes before it.
 */
export function depthIssue(value: unknown, at = '$', maxDepth = MAX_JSON_DEPTH): Issue | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const frames: Frame[] = [frameOf(value)]
  while (frames.length > 0) {
    const top = frames[frames.length - 1]!
    const { node, keys } = top
    if (top.next >= (keys === undefined ? (node as unknown[]).length : keys.length)) {
      frames.pop()
      continue
    }
    const child = keys === undefined ? (node as unknown[])[top.next] : (node as Record<string, unknown>)[keys[top.next]!]
    top.next++
    if (typeof child !== 'object' || child === null) continue
    if (frames.length >= maxDepth) return { path: framesPath(at, frames), message: `nests deeper than ${maxDepth} levels of objects and arrays` }
    frames.push(frameOf(child))
  }
  return undefined
}

/** The path of the value each frame is at (the one before `next`), under `at`. */
function framesPath(at: string, frames: Frame[]): string {
  let path = at
  for (const { keys, next } of frames) path += pathSegment(keys === undefined ? String(next - 1) : keys[next - 1]!)
  return path
}

/**
 * Body schemas whose route's handler checks the nesting depth itself, part by part, instead of
 * the request pipeline checking the whole body: a batch checks each element as a document of
 * its own, so that one deep element is refused alone, and a valid batch is walked only once.
 */
const depthCheckedByHandler = new WeakSet<TSchema>()

/** Marks `schema` (a route's body) as one whose handler checks depth (depthIssue) itself. */
export function handlerChecksDepth<T extends TSchema>(schema: T): T {
  depthCheckedByHandler.add(schema)
  return schema
}

export function checksDepthInHandler(schema: TSchema): boolean {
  return depthCheckedByHandler.has(schema)
}
