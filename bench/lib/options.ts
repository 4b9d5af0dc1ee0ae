// Benchmark options, from flags or the environment (flags win).
//
//   -d, --duration <s>     DURATION     measured seconds per leg      (10)
//   -w, --warmup <s>       WARMUP       unmeasured warm-up per leg    (2)
//   -c, --connections <n>  CONNECTIONS  concurrent connections        (64)
//   -p, --pipelining <n>   PIPELINING   requests in flight per conn   (1)
//   -b, --budgets <n>      BUDGETS      budget keys spread over       (64)
//   -l, --legs <list>      LEGS         comma list of legs to run     (all)
//   -r, --rounds <n>       ROUNDS       repeat all legs n times, report the median (1)

export interface BenchOptions {
  durationS: number
  warmupS: number
  connections: number
  pipelining: number
  budgets: number
  /** Leg ids to run; empty = all the scenario has. */
  legs: string[]
  /** Times the whole set of legs is run (alternating); each leg reports its median round. */
  rounds: number
}

const FLAGS: Record<string, keyof BenchOptions> = {
  '-d': 'durationS',
  '--duration': 'durationS',
  '-w': 'warmupS',
  '--warmup': 'warmupS',
  '-c': 'connections',
  '--connections': 'connections',
  '-p': 'pipelining',
  '--pipelining': 'pipelining',
  '-b': 'budgets',
  '--budgets': 'budgets',
  '-l': 'legs',
  '--legs': 'legs',
  '-r': 'rounds',
  '--rounds': 'rounds',
}

export const OPTIONS_HELP = `options (flag or env):
  -d, --duration <s>     DURATION     measured seconds per leg   (default 10)
  -w, --warmup <s>       WARMUP       warm-up seconds per leg    (default 2)
  -c, --connections <n>  CONNECTIONS  concurrent connections     (default 64)
  -p, --pipelining <n>   PIPELINING   keep 1: uWS does not pipeline async responses (default 1)
  -b, --budgets <n>      BUDGETS      budget keys, picked at random per authorize (default 64)
  -l, --legs <list>      LEGS         e.g. hello,peer,ours-authorize,ours-pair (default all)
  -r, --rounds <n>       ROUNDS       run all legs n times, alternating, and report each leg's
                                      median round (odd n is best): on a shared machine, noise
                                      comes in bursts (default 1)`

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): BenchOptions {
  const num = (v: string | undefined, d: number, name: string): number => {
    if (v === undefined || v === '') return d
    const n = Number(v)
    if (!Number.isFinite(n) || n < 0) throw new Error(`bad value for ${name}: ${v}`)
    return n
  }
  const raw: Partial<Record<keyof BenchOptions, string | undefined>> = {
    durationS: env.DURATION,
    warmupS: env.WARMUP,
    connections: env.CONNECTIONS,
    pipelining: env.PIPELINING,
    budgets: env.BUDGETS,
    legs: env.LEGS,
    rounds: env.ROUNDS,
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined]
    const key = FLAGS[flag]
    if (!key) throw new Error(`unknown option: ${a}`)
    const v = inline ?? argv[++i]
    if (v === undefined) throw new Error(`missing value for ${flag}`)
    raw[key] = v
  }
  const o: BenchOptions = {
    durationS: num(raw.durationS, 10, 'duration'),
    warmupS: num(raw.warmupS, 2, 'warmup'),
    connections: Math.max(1, Math.round(num(raw.connections, 64, 'connections'))),
    pipelining: Math.max(1, Math.round(num(raw.pipelining, 1, 'pipelining'))),
    budgets: Math.max(1, Math.round(num(raw.budgets, 64, 'budgets'))),
    legs: (raw.legs ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    rounds: Math.max(1, Math.round(num(raw.rounds, 1, 'rounds'))),
  }
  if (o.durationS < 1) throw new Error('duration must be at least 1 s')
  return o
}
