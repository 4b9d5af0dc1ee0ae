import { usageKey } from '../entitlements/keys.js'
import { toPair } from '../kernel/money.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { walletKeys } from '../wallet/keys.js'
import { RUN_SCRIPT_STATUSES, type RunScript, type StatusOf } from './errors.js'
import { consumeKeys, leaseSettlementsKey, purgesKey, runDataKey, runIndexKey, runKeys } from './keys.js'
import type { RunMeta, RunStatus } from './types.js'

/** Storage adapter of runs: one script per function, each one round trip. */
const scripts = {
  start: new Script('startRun-9'),
  consume: new Script('consumeRun-12'),
  end: new Script('endRun-7'),
  expire: new Script('expireRuns-7'),
  purge: new Script('purgeRuns-N'),
}

/** Each adapter function's statuses as a set: a reply's status is checked against its script's. */
const KNOWN = {} as Record<RunScript, ReadonlySet<string>>
for (const fn of Object.keys(RUN_SCRIPT_STATUSES) as RunScript[]) KNOWN[fn] = new Set(RUN_SCRIPT_STATUSES[fn])

/** The reply's status, when its script answers it; a status the script is not known to answer is a bug, thrown. */
function statusOf<F extends RunScript>(fn: F, script: Script, reply: unknown[]): StatusOf<F> {
  const status = String(reply[0])
  if (!KNOWN[fn].has(status)) throw new Error(`${script.name} answered an unknown status: ${status}`)
  return status as StatusOf<F>
}

export interface RunState {
  runId: string
  status: RunStatus
  budget: number
  consumed: number
  childHeld: number
  deadline: number
  endedAt: number
  currency: string
  meta: RunMeta
  /** The lease of a run tree that leases from a budget (on its root and every descendant). */
  lease?: RunLease
}

export interface RunLease {
  budgetKey: string
  /** The lease number n of lease id `l_<n>` on the budget. */
  number: string
  rootRunId: string
}

/** Reads runReply (lua/includes/runs.lua) from `at`. */
function readRun(runId: string, reply: unknown[], at: number): RunState {
  const run: RunState = {
    runId,
    status: String(reply[at]) as RunStatus,
    budget: Number(reply[at + 1]),
    consumed: Number(reply[at + 2]),
    childHeld: Number(reply[at + 3]),
    deadline: Number(reply[at + 4]),
    endedAt: Number(reply[at + 5]),
    currency: String(reply[at + 6]),
    meta: JSON.parse(String(reply[at + 7])) as RunMeta,
  }
  const ls = String(reply[at + 8] ?? '')
  if (ls !== '') {
    const [number, rootRunId] = ls.split('|', 2) as [string, string]
    run.lease = { number, rootRunId, budgetKey: ls.slice(number.length + rootRunId.length + 2) }
  }
  return run
}

const keyList = (projectId: string, customerId: string) => {
  const k = runKeys(projectId, customerId)
  return [k.runs, k.wallet, k.credits, k.journal, k.deadlines, k.purges, k.leases]
}

export async function startRun(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  input: {
    idempotencyKey: string
    fingerprint: string
    budget: number
    x: number
    currency: string
    parentRunId: string
    deadline: number
    meta: RunMeta
    /** A root run leasing from a budget: the lease taken for it, and whether it is still open. */
    lease?: { budgetKey: string; number: string; open: boolean }
  },
): Promise<{ status: StatusOf<'startRun'>; run?: RunState }> {
  const keys = [...keyList(projectId, customerId), walletKeys(projectId, customerId).counters, runIndexKey(projectId)]
  const lease = input.lease ? `${input.lease.number}|${input.lease.budgetKey}` : ''
  const args = [
    projectId,
    customerId,
    nowMs,
    input.idempotencyKey,
    input.fingerprint,
    input.budget,
    input.x,
    input.currency,
    input.parentRunId,
    input.deadline,
    JSON.stringify(input.meta),
    lease,
    input.lease?.open ? '1' : '0',
  ]
  const reply = await scripts.start.run(redis, keys, args)
  const status = statusOf('startRun', scripts.start, reply)
  return reply.length > 2 ? { status, run: readRun(String(reply[1]), reply, 2) } : { status }
}

/** The customer and currency of a run (the run index): undefined for a run that does not exist. */
export async function indexOfRun(redis: RedisClient, projectId: string, runId: string): Promise<{ customerId: string; currency: string } | undefined> {
  const value = await redis.hget(runIndexKey(projectId), runId)
  if (value === null) return undefined
  const bar = value.indexOf('|')
  return { currency: value.slice(0, bar), customerId: value.slice(bar + 1) }
}

export async function endRun(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  runId: string,
  action: 'get' | RunStatus,
): Promise<{ status: StatusOf<'endRun'>; run?: RunState }> {
  const reply = await scripts.end.run(redis, keyList(projectId, customerId), [projectId, customerId, nowMs, runId, action])
  const status = statusOf('endRun', scripts.end, reply)
  return reply.length > 1 ? { status, run: readRun(runId, reply, 1) } : { status }
}

export interface ConsumeArgs {
  idempotencyKey: string
  featureSlug: string
  entitled: boolean
  mode: 'add' | 'set'
  /** add: the event's cost; set: the feature's new cost total (ledger scale 8). */
  ledger: bigint
  catalogVersion: string
  subscriptionStatus: string
  usageBefore: string
  usageAfter: string
  row: string
  /** The entitlementUsage arguments (mode check) of the event's quantity, when the feature has an entitlement in effect. */
  counting?: readonly string[]
}

/** What consumeRun-12 answered (its header): the reason, the cost (minor units) and the run, or for stale_usage the run's quantity so far. */
export interface ConsumeOutcome {
  reason: StatusOf<'consumeRun'>
  cost: number
  usage?: string
  run?: RunState
  /** For an accepted consume in a tree leasing from a budget, what the tree consumed so far (minor units). */
  treeConsumed?: string
  /**
   * For an accepted consume whose count took the customer's usage of the feature to its limit
   * for the first time in the period: the script's figures (units of 10^-8), limit.reached.
   */
  reached?: { usedUnits: string; limitUnits: string; deniedUntilMs: number }
}

export async function consumeRun(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  runId: string,
  a: ConsumeArgs,
): Promise<ConsumeOutcome> {
  const keys = [...keyList(projectId, customerId), ...consumeKeys(projectId, customerId), runDataKey(projectId, runId), usageKey(projectId, customerId)]
  const [hi, lo] = toPair(a.ledger)
  const args = [
    projectId,
    customerId,
    nowMs,
    runId,
    a.idempotencyKey,
    a.featureSlug,
    a.entitled ? '1' : '0',
    a.mode,
    hi,
    lo,
    a.catalogVersion,
    a.subscriptionStatus,
    a.usageBefore,
    a.usageAfter,
    a.row,
    ...(a.counting ?? []),
  ]
  const reply = await scripts.consume.run(redis, keys, args)
  const reason = statusOf('consumeRun', scripts.consume, reply)
  if (reason === 'stale_usage') return { reason, cost: 0, usage: String(reply[2]) }
  if (reply.length <= 2) return { reason, cost: 0 }
  const out: ConsumeOutcome = { reason, cost: Number(reply[1]), run: readRun(runId, reply, 2) }
  for (const extra of reply.slice(11)) {
    if (Array.isArray(extra)) out.reached = { usedUnits: String(extra[0]), limitUnits: String(extra[1]), deniedUntilMs: Number(extra[2]) }
    else out.treeConsumed = String(extra)
  }
  return out
}

/** The lease settlements an ended leasing root left (`field` → value), all of the project or one run's. */
export async function leaseSettlements(
  redis: RedisClient,
  projectId: string,
  field?: string,
): Promise<{ field: string; customerId: string; runId: string; number: string; consumed: string; x: number; budgetKey: string }[]> {
  const key = leaseSettlementsKey(projectId)
  let entries: [string, string][]
  if (field === undefined) {
    entries = Object.entries(await redis.hgetall(key))
  } else {
    const value = await redis.hget(key, field)
    entries = value === null ? [] : [[field, value]]
  }
  return entries.map(([f, value]) => {
    const [customerId, runId] = f.split('\t', 2) as [string, string]
    const [number, consumed, x] = value.split('|', 3) as [string, string, string]
    return { field: f, customerId, runId, number, consumed, x: Number(x), budgetKey: value.slice(number.length + consumed.length + x.length + 3) }
  })
}

/** Forgets a lease settlement once the budget took it. */
export async function dropLeaseSettlement(redis: RedisClient, projectId: string, field: string): Promise<void> {
  await redis.hdel(leaseSettlementsKey(projectId), field)
}

export async function expireRuns(redis: RedisClient, projectId: string, customerId: string, nowMs: number, runIds: string[]): Promise<number> {
  return Number(await scripts.expire.run(redis, keyList(projectId, customerId), [projectId, customerId, nowMs, ...runIds]))
}

/**
 * Forgets an ended root run and its descendants once their retention is over (the sweep): the
 * tree is read first (each level one HMGET of `kids`), then one script deletes it, checking the
 * root is still due. Returns the number of runs forgotten.
 */
export async function purgeRunTree(redis: RedisClient, projectId: string, customerId: string, nowMs: number, rootId: string): Promise<number> {
  const runsKey = runKeys(projectId, customerId).runs
  const tree = [rootId]
  for (let level = [rootId]; level.length > 0; ) {
    const kids = await redis.hmget(runsKey, ...level.map((id) => `${id}:kids`))
    level = kids.flatMap((k) => (k ?? '').split(',').filter((id) => id !== ''))
    tree.push(...level)
  }
  const keys = [runsKey, purgesKey(projectId), runIndexKey(projectId), ...tree.map((id) => runDataKey(projectId, id))]
  return Number(await scripts.purge.run(redis, keys, [customerId, nowMs, ...tree]))
}
