// Each domain's script statuses are one typed union translated by one table (src/<domain>/errors.ts).
// Proven here against the Lua itself: every status a script's code can return is in its header and
// in the adapter's list for it (and nothing more), every refusing status of the union translates
// to the documented failure (exact kind, reason, message and details), and each domain README's
// result codes name every status of the union.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  BUDGET_FAILURE_STATUSES,
  BUDGET_SCRIPT_STATUSES,
  budgetFailure,
  type BudgetFailureContext,
  type BudgetFailureStatus,
} from '../../src/budgets/errors.js'
import type { BudgetState } from '../../src/budgets/types.js'
import type { Failure } from '../../src/kernel/errors.js'
import { RUN_FAILURE_STATUSES, RUN_SCRIPT_STATUSES, runFailure, type RunFailureContext, type RunFailureStatus } from '../../src/runs/errors.js'
import { CONSUME_REASONS, type Run } from '../../src/runs/types.js'
import { WALLET_FAILURE_STATUSES, WALLET_SCRIPT_STATUSES, walletFailure, type WalletFailureStatus } from '../../src/wallet/errors.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { authorizeHold, getBudget } from '../../src/budgets/redis.js'
import { consumeRun, endRun } from '../../src/runs/redis.js'
import { grantCredit, topUp } from '../../src/wallet/redis.js'
import { REPO_ROOT } from '../support/processes.js'

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), 'utf8')

/** A script's header: its leading comment block (`--[[ … ]]` or `--` lines), without the `--@include` lines. */
function headerOf(source: string): string {
  const block = /^--\[\[([\s\S]*?)\]\]/.exec(source)
  if (block) return block[1]!
  const lines: string[] = []
  for (const line of source.split('\n')) {
    if (!line.startsWith('--')) break
    if (!line.startsWith('--@include')) lines.push(line.slice(2))
  }
  return lines.join('\n')
}

/**
 * The statuses a script's code can return: the quoted codes where a status is made (`answer(…)`,
 * `return { '…'`, `status = …`, and the reply builders' status argument), comments left out.
 */
function statusesInCode(source: string): string[] {
  const code = source.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--[^\n]*/g, '')
  const found = new Set<string>()
  const at = /(?:answer\(|return \{ |status(?:, \w+)? = |budgetReply\(b, |runReply\(r, \{ |walletReply\(w, )([^)}\n]*)/g
  for (const [, args] of code.matchAll(at)) for (const [, status] of args!.matchAll(/'([a-z][a-z_]*)'/g)) found.add(status!)
  return [...found].sort()
}

const sorted = (statuses: Iterable<string>) => [...new Set(statuses)].sort()

/** Each domain's scripts with a status, by the adapter functions that run them. */
const DOMAINS = {
  budgets: {
    statuses: BUDGET_SCRIPT_STATUSES as Record<string, readonly string[]>,
    scripts: {
      'upsertBudget-4': ['upsertBudget'],
      'getBudget-4': ['getBudget'],
      'authorizeHold-4': ['authorizeHold'],
      'settleHold-4': ['closeHold'],
      'chargeBudget-4': ['chargeBudget'],
      'expireHolds-4': ['expireHolds'],
      'leaseBudget-4': ['openLease', 'reportLease'],
    } as Record<string, string[]>,
    include: 'budget',
  },
  runs: {
    statuses: RUN_SCRIPT_STATUSES as Record<string, readonly string[]>,
    scripts: { 'startRun-9': ['startRun'], 'consumeRun-12': ['consumeRun'], 'endRun-7': ['endRun'] } as Record<string, string[]>,
    include: 'runs',
  },
  wallet: {
    statuses: WALLET_SCRIPT_STATUSES as Record<string, readonly string[]>,
    scripts: { 'getWallet-3': ['getWallet'], 'topUpWallet-3': ['topUp'], 'grantCredit-4': ['grantCredit'] } as Record<string, string[]>,
    include: 'wallet',
  },
}

describe.each(Object.entries(DOMAINS))('%s: the Lua scripts and the union', (_domain, d) => {
  it('every adapter function with a status list names its script here', () => {
    expect(sorted(Object.values(d.scripts).flat())).toEqual(sorted(Object.keys(d.statuses)))
  })

  it.each(Object.keys(d.scripts))("%s: what its code returns = what its header lists ⊆ the header, = the adapter's list", (script) => {
    const source = read(`lua/${script}.lua`)
    const returned = statusesInCode(source)
    expect(returned.length).toBeGreaterThan(0)
    const header = headerOf(source)
    const returns = header.slice(header.indexOf('Returns'))
    expect(header.indexOf('Returns'), 'the header says what the script returns').toBeGreaterThanOrEqual(0)
    for (const status of returned) expect(returns, `${script}'s header lists ${status}`).toMatch(new RegExp(`\\b${status}\\b`))
    expect(sorted(d.scripts[script]!.flatMap((fn) => d.statuses[fn]!))).toEqual(returned)
  })

  it(`lua/includes/${d.include}.lua answers no status of its own (the scripts' headers are the whole list)`, () => {
    expect(statusesInCode(read(`lua/includes/${d.include}.lua`))).toEqual([])
  })
})

describe('the finder finds what it looks for', () => {
  it('a status returned but missing from a header is caught', () => {
    const source = "--[[\n  Returns ok | replayed.\n]]\nif x then return answer('amount_overflow') end\nreturn answer('ok')\n"
    expect(statusesInCode(source)).toEqual(['amount_overflow', 'ok'])
    expect(headerOf(source)).not.toMatch(/\bamount_overflow\b/)
  })
})

// Budgets ------------------------------------------------------------------------------------------

const UNIT = 100_000_000n
const state: BudgetState = {
  s: ['', '', '5000', '', '', '', '', ''],
  held: 0n,
  limits: [{ id: 'day', window: 'day', enforce: 'hard', anchor: '', amount: 10n * UNIT, consumed: 9n * UNIT, resetsAt: 1_000, crossed: false }],
}
const budget = (op: BudgetFailureContext['op'], extra: Partial<BudgetFailureContext> = {}): BudgetFailureContext => ({
  op,
  key: 'team',
  snap: state,
  now: 500,
  amount: 2n * UNIT,
  ...extra,
})
const denied = {
  kind: 'budget_exceeded',
  blocked: { limitId: 'day', window: 'day', remaining: '1', held: '0', resetsAt: 1_000, remedy: 'wait_for_reset' },
  balance: {
    remaining: '1',
    held: '0',
    asOf: 500,
    limits: [{ id: 'day', window: 'day', enforce: 'hard', amount: '10', consumed: '9', held: '0', remaining: '1', resetsAt: 1_000 }],
  },
}
const ttlIssue = (message: string) => ({ issues: [{ path: '$.ttlMs', message }] })

/** Every refusing status with every context its message depends on, and the failure the service answered before the table. */
const BUDGET_CASES: Record<BudgetFailureStatus, [BudgetFailureContext, Omit<Failure, 'ok'>][]> = {
  budget_not_found: [
    [budget('get'), { kind: 'not_found', reason: 'budget_not_found', message: 'Budget team does not exist in this project.' }],
    [budget('settle', { id: 'h_3' }), { kind: 'not_found', reason: 'budget_not_found', message: 'Budget team does not exist in this project.' }],
  ],
  idempotency_conflict: [
    [
      budget('authorize'),
      { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey was used with a different request (amount or ttlMs).' },
    ],
    [
      budget('lease'),
      { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey started another run of this customer with a different request.' },
    ],
    [budget('charge'), { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey was used with a different request.' }],
    [budget('record'), { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey was used with a different request.' }],
  ],
  unit_mismatch: [
    [
      budget('lease', { currency: 'EUR' }),
      {
        kind: 'conflict',
        reason: 'budget_unit_mismatch',
        message: "Budget team does not count in EUR: a run leases from a budget whose unit is the run's currency (ISO code).",
      },
    ],
  ],
  budget_closed: [
    [budget('authorize'), { kind: 'conflict', reason: 'budget_closed', message: 'Budget team is past its closesAt and takes no new holds.' }],
    [budget('lease'), { kind: 'conflict', reason: 'budget_closed', message: 'Budget team is past its closesAt and takes no new leases.' }],
    [budget('charge'), { kind: 'conflict', reason: 'budget_closed', message: 'Budget team is past its closesAt.' }],
  ],
  ttl_exceeds_max: [
    [
      budget('authorize'),
      {
        kind: 'invalid',
        reason: 'invalid_request',
        message: 'The request is not valid.',
        details: ttlIssue("must not exceed the budget's holds.maxTtlMs (5000)"),
      },
    ],
    [
      budget('lease'),
      {
        kind: 'invalid',
        reason: 'invalid_request',
        message: 'The request is not valid.',
        details: ttlIssue("must not exceed budget team's holds.maxTtlMs (5000)"),
      },
    ],
  ],
  budget_exceeded: [
    [
      budget('authorize'),
      { kind: 'budget_exceeded', reason: 'budget_exceeded', message: 'Limit day (day) cannot take 2; remedy: wait_for_reset.', details: denied },
    ],
    [
      budget('charge'),
      { kind: 'budget_exceeded', reason: 'budget_exceeded', message: 'Limit day (day) cannot take 2; remedy: wait_for_reset.', details: denied },
    ],
  ],
  amount_overflow: [
    [
      budget('record'),
      {
        kind: 'conflict',
        reason: 'amount_overflow',
        message: 'Budget team cannot count this amount exactly on top of its totals (about 9·10^21 of its unit): nothing was changed.',
      },
    ],
  ],
  hold_not_found: [
    [
      budget('release', { id: 'h_3' }),
      { kind: 'not_found', reason: 'hold_not_found', message: 'Hold h_3 does not exist on budget team (or was forgotten after its retention).' },
    ],
  ],
  exceeds_hold_amount: [
    [
      budget('settle', { id: 'h_3' }),
      {
        kind: 'conflict',
        reason: 'exceeds_hold_amount',
        message: 'The amount is more than hold h_3 reserved; record the excess with /v1/budgets/record.',
      },
    ],
  ],
  hold_already_released: [[budget('settle', { id: 'h_3' }), { kind: 'conflict', reason: 'hold_already_released', message: 'Hold h_3 was released.' }]],
  hold_expired: [
    [
      budget('release', { id: 'h_3' }),
      {
        kind: 'conflict',
        reason: 'hold_expired',
        message: 'Hold h_3 expired and was settled at its full amount; only that amount settles it.',
      },
    ],
  ],
  hold_already_settled: [
    [budget('settle', { id: 'h_3' }), { kind: 'conflict', reason: 'hold_already_settled', message: 'Hold h_3 is already settled for another amount.' }],
    [budget('release', { id: 'h_3' }), { kind: 'conflict', reason: 'hold_already_settled', message: 'Hold h_3 is already settled.' }],
  ],
  lease_not_found: [
    [
      budget('report', { id: 'l_4' }),
      { kind: 'not_found', reason: 'lease_not_found', message: 'Lease l_4 does not exist on budget team (or was forgotten after its retention).' },
    ],
  ],
}

const BUDGET_SUCCESS = ['ok', 'replayed', 'created', 'updated']

describe('budgets: one table translates every refusing status', () => {
  const union = sorted(Object.values(BUDGET_SCRIPT_STATUSES).flat())

  it("the table covers exactly the union's refusing statuses", () => {
    expect(sorted(BUDGET_FAILURE_STATUSES)).toEqual(union.filter((s) => !BUDGET_SUCCESS.includes(s)))
    expect(sorted(Object.keys(BUDGET_CASES))).toEqual(sorted(BUDGET_FAILURE_STATUSES))
  })

  it.each(Object.entries(BUDGET_CASES).flatMap(([status, cases]) => cases.map(([c, expected]) => [status, c.op, c, expected] as const)))(
    '%s (%s)',
    (status, _op, context, expected) => {
      expect(budgetFailure(status as BudgetFailureStatus, context)).toStrictEqual({ ok: false, ...expected })
    },
  )

  it("src/budgets/README.md's result codes name every status of the union", () => {
    const readme = read('src/budgets/README.md')
    const section = readme.slice(readme.indexOf('## Result codes'), readme.indexOf('\n## ', readme.indexOf('## Result codes') + 1))
    for (const status of union) expect(section, status).toContain(`\`${status}\``)
    expect(section).toContain('errors.ts')
  })
})

// Runs ---------------------------------------------------------------------------------------------

const endedRun = { runId: 'run_7', status: 'completed' } as Run
const start: RunFailureContext = { customerId: 'acme', parentRunId: '', currency: 'USD', budgetAmountMinor: 1000, budgetKey: 'agents' }
const child: RunFailureContext = { ...start, parentRunId: 'run_1' }

const RUN_CASES: Record<RunFailureStatus, [RunFailureContext, Omit<Failure, 'ok'>][]> = {
  idempotency_conflict: [
    [
      start,
      { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey started another run of this customer with a different request.' },
    ],
  ],
  parent_not_found: [[child, { kind: 'not_found', reason: 'parent_not_found', message: 'Run run_1 is not a run of customer acme.' }]],
  parent_not_running: [
    [child, { kind: 'conflict', reason: 'parent_not_running', message: 'Run run_1 is not running: a child run reserves from a running parent.' }],
  ],
  currency_mismatch: [
    [child, { kind: 'conflict', reason: 'currency_mismatch', message: 'The parent run is not in USD.' }],
    [start, { kind: 'conflict', reason: 'currency_mismatch', message: "The customer's wallet is not in USD." }],
    [
      { runId: 'run_7', currency: 'USD', featureSlug: 'tokens', pricedIn: 'EUR' },
      {
        kind: 'conflict',
        reason: 'currency_mismatch',
        message: 'Feature tokens is priced in EUR; run run_7 is in USD.',
      },
    ],
  ],
  insufficient_funds: [
    [
      start,
      {
        kind: 'budget_exceeded',
        reason: 'insufficient_funds',
        message: "The customer's wallet has less than 1000 minor units of USD available (GET /v1/wallet/balance).",
      },
    ],
  ],
  insufficient_budget: [[child, { kind: 'budget_exceeded', reason: 'insufficient_budget', message: 'Run run_1 has less than 1000 minor units remaining.' }]],
  lease_closed: [
    [
      start,
      {
        kind: 'conflict',
        reason: 'lease_closed',
        message: 'The lease this idempotencyKey took on budget agents ended before its run started; start the run with a new idempotencyKey.',
      },
    ],
  ],
  run_not_found: [[{ runId: 'run_7' }, { kind: 'not_found', reason: 'run_not_found', message: 'Run run_7 does not exist in this project.' }]],
  run_not_running: [
    [
      { runId: 'run_7', run: endedRun },
      { kind: 'conflict', reason: 'run_not_running', message: 'Run run_7 already ended as completed.', details: { run: endedRun } },
    ],
  ],
  stale: [
    [
      { runId: 'run_7', attempts: 3 },
      { kind: 'conflict', reason: 'run_busy', message: 'Run run_7 changed under this event 3 times; send it again.' },
    ],
  ],
  stale_usage: [
    [
      { runId: 'run_7', attempts: 200 },
      { kind: 'conflict', reason: 'run_busy', message: 'Run run_7 changed under this event 200 times; send it again.' },
    ],
  ],
}

describe('runs: one table translates every refusing status', () => {
  const union = sorted(Object.values(RUN_SCRIPT_STATUSES).flat())
  // A consume's reasons are 200 answers, but insufficient_budget also refuses a child's start.
  const success = ['ok', 'replayed', ...CONSUME_REASONS.filter((r) => r !== 'insufficient_budget')]

  it("the table covers exactly the union's refusing statuses", () => {
    expect(sorted(RUN_FAILURE_STATUSES)).toEqual(union.filter((s) => !success.includes(s)))
    expect(sorted(Object.keys(RUN_CASES))).toEqual(sorted(RUN_FAILURE_STATUSES))
  })

  it('consumeRun answers every consume reason, and the reasons are its statuses less the three the gateway acts on', () => {
    expect(sorted(RUN_SCRIPT_STATUSES.consumeRun)).toEqual(sorted([...CONSUME_REASONS, 'run_not_found', 'stale', 'stale_usage']))
  })

  it.each(Object.entries(RUN_CASES).flatMap(([status, cases]) => cases.map(([c, expected], i) => [status, i, c, expected] as const)))(
    '%s (case %i)',
    (status, _i, context, expected) => {
      expect(runFailure(status as RunFailureStatus, context)).toStrictEqual({ ok: false, ...expected })
    },
  )

  it("src/runs/README.md's result codes name every status of the union", () => {
    const readme = read('src/runs/README.md')
    const section = readme.slice(readme.indexOf('## Result codes'), readme.indexOf('\n## ', readme.indexOf('## Result codes') + 1))
    for (const status of union) expect(section, status).toContain(`\`${status}\``)
    expect(section).toContain('errors.ts')
  })
})

// Wallet -------------------------------------------------------------------------------------------

const WALLET_CASES: Record<WalletFailureStatus, Omit<Failure, 'ok'>> = {
  idempotency_conflict: { kind: 'conflict', reason: 'idempotency_conflict', message: 'This idempotencyKey was used for a different request.' },
  currency_mismatch: { kind: 'conflict', reason: 'currency_mismatch', message: 'The wallet holds USD; it cannot take EUR.' },
}

describe('wallet: one table translates every refusing status', () => {
  it("the table covers exactly the union's refusing statuses", () => {
    const union = sorted(Object.values(WALLET_SCRIPT_STATUSES).flat())
    expect(sorted(WALLET_FAILURE_STATUSES)).toEqual(union.filter((s) => s !== 'ok' && s !== 'replayed'))
    expect(sorted(Object.keys(WALLET_CASES))).toEqual(sorted(WALLET_FAILURE_STATUSES))
  })

  it.each(Object.entries(WALLET_CASES))('%s', (status, expected) => {
    expect(walletFailure(status as WalletFailureStatus, { walletCurrency: 'USD', currency: 'EUR' })).toStrictEqual({ ok: false, ...expected })
  })
})

// The adapters ------------------------------------------------------------------------------------

/** A client whose every script call answers `reply` (Script.run only calls `call` on a client that is not ready). */
const answering = (reply: unknown[]) => ({ call: async () => reply }) as unknown as RedisClient

describe('the storage adapters take no status their script does not answer', () => {
  it('budgets: an unknown status, or one of another script, is thrown naming the script', async () => {
    await expect(authorizeHold(answering(['bogus']), '{p/k}', 0, 0, 1n, undefined, 'k')).rejects.toThrow('authorizeHold-4 answered an unknown status: bogus')
    await expect(authorizeHold(answering(['created']), '{p/k}', 0, 0, 1n, undefined, 'k')).rejects.toThrow(
      'authorizeHold-4 answered an unknown status: created',
    )
    await expect(getBudget(answering(['budget_not_found']), '{p/k}', 0, 0)).resolves.toMatchObject({ status: 'budget_not_found' })
  })

  it('runs: the same for each script', async () => {
    await expect(endRun(answering(['gone']), 'p', 'c', 0, 'run_1', 'get')).rejects.toThrow('endRun-7 answered an unknown status: gone')
    await expect(endRun(answering(['run_not_found']), 'p', 'c', 0, 'run_1', 'get')).resolves.toEqual({ status: 'run_not_found' })
    const args = {
      idempotencyKey: 'k',
      featureSlug: 'f',
      entitled: true,
      mode: 'add' as const,
      ledger: 0n,
      catalogVersion: '',
      subscriptionStatus: '',
      usageBefore: '0',
      usageAfter: '0',
      row: '{}',
    }
    await expect(consumeRun(answering(['ok', 0]), 'p', 'c', 0, 'run_1', args)).rejects.toThrow('consumeRun-12 answered an unknown status: ok')
  })

  it('wallet: the same for each script', async () => {
    await expect(topUp(answering(['refused', '', 0, 0, 0, 0]), 'p', 'c', 0, 'k', 'USD', 1n, 'f')).rejects.toThrow(
      'topUpWallet-3 answered an unknown status: refused',
    )
    const grant = { idempotencyKey: 'k', currency: 'USD', amount: 1n, source: 'promo', priority: 50, expiresAtMs: 0, fingerprint: 'f' }
    await expect(grantCredit(answering(['cr_1', 'currency_mismatch', 'EUR', 0, 0, 0, 0]), 'p', 'c', 0, grant)).resolves.toMatchObject({
      wallet: { status: 'currency_mismatch' },
    })
  })
})
