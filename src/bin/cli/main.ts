// `npm run cli -- <command>`: finds the command in the table, prints usage where asked (exit 0)
// or where the command line does not fit (stderr, exit 2), runs it (exit 0, or 1 with why).

import { applyCommands } from './apply.js'
import { nameOf, parseInput, synopsis, UsageError, type Command } from './command.js'
import { Context, type CliIo } from './context.js'
import { deadLetterCommands } from './deadLetters.js'
import { invoiceCommands } from './invoices.js'
import { keyCommands } from './keys.js'
import { rebuildAggregatesCommands } from './rebuildAggregates.js'
import { sqlCommands } from './sql.js'

/** Every command, in the order usage lists them. */
export const COMMANDS: readonly Command[] = [
  ...keyCommands,
  ...applyCommands,
  ...invoiceCommands,
  ...deadLetterCommands,
  ...sqlCommands,
  ...rebuildAggregatesCommands,
]

const HELP = new Set(['help', '--help', '-h'])
const PROGRAM = 'npm run cli --'

const WHERE = [
  'Where it works:',
  '  Redis       REDIS_URL; else the redis-server the gateway started on METERING_DATA_DIR (./data), or one',
  '              started there for the command.',
  '  ClickHouse  (sql, invoices close) CLICKHOUSE_URL; else the gateway running on METERING_DATA_DIR, asked',
  '              with METERING_ROOT_KEY (it holds chDB, one process per data directory); else chDB there.',
  'Answers go to stdout (JSON), logs and failures to stderr. Exit 0: done; 1: failed; 2: usage.',
]

function lines(commands: readonly Command[]): string[] {
  const width = Math.min(48, Math.max(...commands.map((c) => synopsis(c).length)))
  return commands.map((c) => {
    const head = synopsis(c)
    return head.length > width ? `  ${head}\n  ${' '.repeat(width)}  ${c.summary}` : `  ${head.padEnd(width)}  ${c.summary}`
  })
}

/** Every command, one line each (`--help`, `help`, or no command). */
export function generalUsage(): string {
  return [
    `Usage: ${PROGRAM} <command> [options]     (a command's options: ${PROGRAM} <command> --help)`,
    '',
    'Commands:',
    ...lines(COMMANDS),
    '',
    ...WHERE,
  ].join('\n')
}

/** The commands of one noun (`key --help`). */
export function nounUsage(noun: string): string {
  return [
    `Usage: ${PROGRAM} ${noun} <${COMMANDS.filter((c) => c.noun === noun)
      .map((c) => c.verb)
      .join('|')}> [options]`,
    '',
    ...lines(COMMANDS.filter((c) => c.noun === noun)),
  ].join('\n')
}

/** One command: its synopsis, what it does, its arguments and options. */
export function commandUsage(c: Command): string {
  const rows: [string, string][] = [
    ...(c.args ?? []).map((a): [string, string] => [a.name, a.help]),
    ...Object.entries(c.options ?? {}).map(([name, o]): [string, string] => [
      o.type === 'string' ? `--${name} ${o.value ?? 'VALUE'}` : `--${name}`,
      o.required ? `${o.help} (required)` : o.help,
    ]),
    ['-h, --help', 'this help'],
  ]
  const width = Math.max(...rows.map(([k]) => k.length))
  return [
    `Usage: ${PROGRAM} ${synopsis(c)}`,
    '',
    `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.`,
    ...(c.details ?? []),
    '',
    ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`),
  ].join('\n')
}

function usageOf(topic: Command | string | undefined): string {
  if (topic === undefined) return generalUsage()
  return typeof topic === 'string' ? nounUsage(topic) : commandUsage(topic)
}

type Resolved = { help: string } | { command: Command; words: string[] }

/** What the words name: a usage to print (asked for), or a command and the words after its name. */
function resolve(argv: readonly string[]): Resolved {
  const [first, ...rest] = argv
  if (first === undefined) throw new UsageError('No command given.')
  if (HELP.has(first)) {
    if (rest.length === 0) return { help: generalUsage() }
    const found = resolve(rest)
    return 'help' in found ? found : { help: commandUsage(found.command) }
  }
  const ofNoun = COMMANDS.filter((c) => c.noun === first)
  if (ofNoun.length === 0) throw new UsageError(`Unknown command: ${first}`)
  const single = ofNoun.find((c) => c.verb === undefined)
  if (single) return rest.some((w) => HELP.has(w) && w !== 'help') ? { help: commandUsage(single) } : { command: single, words: rest }
  const [verb, ...words] = rest
  if (verb === undefined) throw new UsageError(`${first}: which one?`, first)
  if (HELP.has(verb)) return { help: nounUsage(first) }
  const command = ofNoun.find((c) => c.verb === verb)
  if (!command) throw new UsageError(`Unknown command: ${first} ${verb}`, first)
  return words.some((w) => w === '--help' || w === '-h') ? { help: commandUsage(command) } : { command, words }
}

/** Runs one command line; the exit code. Never throws: a failure is printed (without a stack trace) and is exit 1. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let command: Command | undefined
  try {
    const resolved = resolve(argv)
    if ('help' in resolved) {
      io.out(resolved.help)
      return 0
    }
    command = resolved.command
    const input = parseInput(command, resolved.words)
    const ctx = new Context(io)
    try {
      return await command.run(ctx, input)
    } finally {
      await ctx.close()
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n\n${usageOf(err.topic ?? command)}`)
      return 2
    }
    io.err(`${command ? `${nameOf(command)}: ` : ''}${err instanceof Error ? err.message : String(err)}`)
    return 1
  }
}
