// Benchmark entry point: `npm run bench -- <scenario> [options]`.
//
// Prints figures and writes them to bench/results/; it is a measurement, not
// a pass/fail test (targets are labelled PASS/MISS for information and the
// exit code does not depend on them).

import { OPTIONS_HELP, parseOptions, type BenchOptions } from './lib/options.js'
import { stopAll } from './lib/proc.js'

// Scenarios are loaded lazily so one scenario's imports cannot break another.
const SCENARIOS: Record<string, { about: string; run: (o: BenchOptions) => Promise<void> }> = {
  authorize: {
    about: 'authorize (+settle) through the gateway vs a uWS hello-world vs Fastify+rate-limiter-flexible',
    run: async (o) => {
      await (await import('./authorize.js')).runAuthorize(o)
    },
  },
  ingest: {
    about: 'usage events: accepted/s (record, record-batch), drained/s into ClickHouse, lag p99, vs BullMQ add and ClickHouse insert',
    run: async (o) => {
      await (await import('./ingest.js')).runIngest(o)
    },
  },
  cluster: {
    about: 'N gateways + M workers on Redis Clusters of 1, 2, 3 masters: authorize/s per master, no hard limit passed, exactly-once ingestion',
    run: async (o) => (await import('./cluster.js')).runCluster(o),
  },
  targets: {
    about: 'every issue-11 target with PASS/MISS in one run (authorize -r 3 + ingest, 5 s legs) and a cost model',
    run: async (o) => (await import('./targets.js')).runTargets(o),
  },
}

/** The targets scenario's defaults (about 5 minutes): 5 s legs, 1 s warm-ups, 3 authorize rounds; env and flags win. */
const TARGETS_DEFAULTS: Record<string, string> = { DURATION: '5', WARMUP: '1', ROUNDS: '3' }

function usage(): string {
  const list = Object.entries(SCENARIOS)
    .map(([name, s]) => `  ${name.padEnd(10)} ${s.about}`)
    .join('\n')
  return `usage: npm run bench -- <scenario> [options]\n\nscenarios:\n${list}\n\n${OPTIONS_HELP}`
}

/** Moves `--store`, `--batch-size`, `--batch-connections` into STORE, BATCH_SIZE, BATCH_CONNECTIONS (or `map`'s flags); returns the rest. */
function ingestFlags(
  argv: string[],
  map: Record<string, string> = { '--store': 'STORE', '--batch-size': 'BATCH_SIZE', '--batch-connections': 'BATCH_CONNECTIONS' },
): string[] {
  const rest: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    const eq = a.indexOf('=')
    const flag = eq > 0 ? a.slice(0, eq) : a
    const env = map[flag]
    if (!env) {
      rest.push(a)
      continue
    }
    const v = eq > 0 ? a.slice(eq + 1) : argv[++i]
    if (v === undefined) throw new Error(`missing value for ${flag}`)
    process.env[env] = v
  }
  return rest
}

async function main(): Promise<number> {
  const [name, ...rest] = process.argv.slice(2)
  if (name === '-h' || name === '--help') {
    console.log(usage())
    return 0
  }
  const scenario = name ? SCENARIOS[name] : undefined
  if (!scenario) {
    console.error(`${name ? `unknown scenario: ${name}\n\n` : ''}${usage()}`)
    return 2
  }
  let opts: BenchOptions
  try {
    // The ingest scenario's own flags go through the environment (see bench/README.md).
    if (name === 'ingest' || name === 'targets') rest.splice(0, rest.length, ...ingestFlags(rest))
    if (name === 'cluster') rest.splice(0, rest.length, ...ingestFlags(rest, { '--masters': 'MASTERS', '--gateways': 'GATEWAYS', '--workers': 'WORKERS' }))
    opts = parseOptions(rest, name === 'targets' ? { ...TARGETS_DEFAULTS, ...process.env } : process.env)
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${usage()}`)
    return 2
  }
  if (opts.pipelining !== 1) {
    console.warn(
      `warning: pipelining ${opts.pipelining}: uWS does not pipeline async responses and settle needs the ` +
        `authorize's holdId first, so figures will not be comparable; use -p 1`,
    )
  }
  // Ctrl-C: stop the servers we started before leaving.
  process.once('SIGINT', () => {
    void stopAll().finally(() => process.exit(130))
  })
  await scenario.run(opts)
  return 0
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err)
    await stopAll()
    process.exit(1)
  },
)
