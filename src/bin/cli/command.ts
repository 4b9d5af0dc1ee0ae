// The command table of `npm run cli`: each command is a noun, an optional verb, its arguments and
// options with one line of help each, and a handler. The parser and every usage text come from
// the table, so a command cannot exist without its --help.

import { parseArgs } from 'node:util'
import type { Context } from './context.js'

export interface OptionSpec {
  type: 'string' | 'boolean'
  /** The value's placeholder in usage lines (`ID`, `a,b`); string options only. */
  value?: string
  help: string
  required?: boolean
}

export interface ArgumentSpec {
  name: string
  help: string
  /** Default true. */
  required?: boolean
  /** Takes every remaining argument (the last one only). */
  variadic?: boolean
}

export interface Input {
  args: string[]
  options: Record<string, string | boolean | undefined>
}

export interface Command {
  noun: string
  /** Absent for the one-word commands (`apply`, `sql`). */
  verb?: string
  summary: string
  /** More lines for `--help`. */
  details?: readonly string[]
  args?: readonly ArgumentSpec[]
  options?: Readonly<Record<string, OptionSpec>>
  /** The exit code: 0 done, 1 failed (the handler printed why). */
  run(ctx: Context, input: Input): Promise<number>
}

/** A command line that names no command, or does not fit the one it names: usage on stderr, exit 2. */
export class UsageError extends Error {
  override name = 'UsageError'
  constructor(
    message: string,
    /** Whose usage to print: a command, a noun's commands, or (undefined) every command. */
    readonly topic?: Command | string,
  ) {
    super(message)
  }
}

/** A command's name as typed: `key create`, `sql`. */
export const nameOf = (c: Command): string => (c.verb ? `${c.noun} ${c.verb}` : c.noun)

/** `key create --project ID [--scopes a,b]`: the name, the arguments, then the options, the required ones first. */
export function synopsis(c: Command): string {
  const args = (c.args ?? []).map((a) => {
    const name = a.variadic ? `${a.name}...` : a.name
    return a.required === false ? `[${name}]` : name
  })
  const options = Object.entries(c.options ?? {})
    .sort(([, a], [, b]) => Number(Boolean(b.required)) - Number(Boolean(a.required)))
    .map(([name, o]) => {
      const text = o.type === 'string' ? `--${name} ${o.value ?? 'VALUE'}` : `--${name}`
      return o.required ? text : `[${text}]`
    })
  return [nameOf(c), ...args, ...options].join(' ')
}

/** Parses the words after the command's name; UsageError for an unknown option, a missing value or a missing argument. */
export function parseInput(c: Command, words: string[]): Input {
  const specs = c.options ?? {}
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args: words,
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries(Object.entries(specs).map(([name, o]) => [name, { type: o.type }])),
    })
  } catch (err) {
    throw new UsageError((err instanceof Error ? err.message : String(err)).replace(/\. To specify a positional[\s\S]*$/, ''), c)
  }
  const options = parsed.values as Input['options']
  for (const [name, o] of Object.entries(specs)) {
    if (o.required && options[name] === undefined) throw new UsageError(`Missing --${name} ${o.value ?? ''}`.trimEnd(), c)
  }
  const args = parsed.positionals
  const specArgs = c.args ?? []
  const required = specArgs.filter((a) => a.required !== false).length
  if (args.length < required) throw new UsageError(`Missing ${specArgs[args.length]!.name}`, c)
  if (!specArgs.some((a) => a.variadic) && args.length > specArgs.length) throw new UsageError(`Unexpected argument: ${args[specArgs.length]}`, c)
  return { args, options }
}

/** A string option's value (undefined when not given). */
export function stringOption(input: Input, name: string): string | undefined {
  const value = input.options[name]
  return typeof value === 'string' ? value : undefined
}

/** An integer option's value within [min, max]; UsageError otherwise (undefined when not given). */
export function intOption(input: Input, name: string, min: number, max: number): number | undefined {
  const text = stringOption(input, name)
  if (text === undefined) return undefined
  const value = Number(text)
  if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError(`--${name} takes an integer from ${min} to ${max}; got ${JSON.stringify(text)}`)
  }
  return value
}
