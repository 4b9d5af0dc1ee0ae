import { fromPair, toPair } from '../kernel/money.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { BUDGET_SCRIPT_STATUSES, type BudgetScript, type BudgetScriptStatus, type StatusOf } from './errors.js'
import { budgetKeys } from './keys.js'
import type { BudgetState, Enforce, LimitState, Window } from './types.js'

/** Storage adapter: one script per function. Every function is one round trip to Redis. */
const scripts = {
  upsert: new Script('upsertBudget-4'),
  get: new Script('getBudget-4'),
  authorize: new Script('authorizeHold-4'),
  settle: new Script('settleHold-4'),
  charge: new Script('chargeBudget-4'),
  expire: new Script('expireHolds-4'),
  lease: new Script('leaseBudget-4'),
}

/** A budget as one script left it: the script's status (one it is known to answer), the operation's own values, and every counter. */
export interface Snapshot<S extends BudgetScriptStatus = BudgetScriptStatus> extends BudgetState {
  status: S
}

/** Each adapter function's statuses as a set: a reply's status is checked against its script's. */
const KNOWN = {} as Record<BudgetScript, ReadonlySet<string>>
for (const fn of Object.keys(BUDGET_SCRIPT_STATUSES) as BudgetScript[]) KNOWN[fn] = new Set(BUDGET_SCRIPT_STATUSES[fn])

/** The reply's status, when its script answers it; a status the script is not known to answer is a bug, thrown. */
function statusOf<F extends BudgetScript>(fn: F, script: Script, reply: unknown[]): StatusOf<F> {
  const status = String(reply[0])
  if (!KNOWN[fn].has(status)) throw new Error(`${script.name} answered an unknown status: ${status}`)
  return status as StatusOf<F>
}

interface LimitConfigState {
  id: string
  window: Window
  enforce: Enforce
  anchor: string
  amount: bigint
}

/**
 * Parsed `cfg` fields ("id|window|enforce|anchor|amount hi|amount lo;" per limit), by their
 * text: a budget's configuration changes rarely, so most calls parse nothing.
 */
const parsedConfigs = new Map<string, LimitConfigState[]>()
function parseConfig(cfg: string): LimitConfigState[] {
  let limits = parsedConfigs.get(cfg)
  if (limits) return limits
  limits = cfg
    .split(';')
    .slice(0, -1)
    .map((text) => {
      const [id, window, enforce, anchor, ah, al] = text.split('|') as [string, Window, Enforce, string, string, string]
      return { id, window, enforce, anchor, amount: fromPair(ah, al) }
    })
  if (parsedConfigs.size >= 10_000) parsedConfigs.clear()
  parsedConfigs.set(cfg, limits)
  return limits
}

/**
 * Reads a budget reply (lua/includes/budget.lua): status, `cfg`, crossed ('' or one '0' or '1'
 * per limit), k and the operation's k own values, held, then consumed and resetsAt per limit
 * (anything after the last limit is ignored).
 */
function readSnapshot<F extends BudgetScript>(fn: F, script: Script, reply: unknown[]): Snapshot<StatusOf<F>> {
  const status = statusOf(fn, script, reply)
  if (reply.length === 1) return { status, s: [], held: 0n, limits: [] }
  const configs = parseConfig(String(reply[1]))
  const crossed = String(reply[2])
  const k = Number(reply[3])
  const s: string[] = new Array(k)
  for (let i = 0; i < k; i++) s[i] = String(reply[4 + i])
  const held = fromPair(reply[4 + k] as number, reply[5 + k] as number)
  const limits: LimitState[] = new Array(configs.length)
  for (let i = 0, at = 6 + k; i < configs.length; i++, at += 3) {
    // Built field by field: an object spread here was the adapter's largest cost in profiles.
    const c = configs[i]!
    const resetsAt = reply[at + 2] as number
    limits[i] = {
      id: c.id,
      window: c.window,
      enforce: c.enforce,
      anchor: c.anchor,
      amount: c.amount,
      consumed: fromPair(reply[at] as number, reply[at + 1] as number),
      resetsAt: resetsAt < 0 ? null : resetsAt,
      crossed: crossed.charCodeAt(i) === 49,
    }
  }
  return { status, s, held, limits }
}

const pairArgs = (units: bigint) => toPair(units).map(String)

export interface LimitInput {
  id: string
  window: Window
  enforce: Enforce
  anchor?: number
  amount: bigint
}

export async function upsertBudget(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  config: { unit: string; defaultTtlMs: number; maxTtlMs: number; closesAt: number | null; limits: LimitInput[] },
): Promise<Snapshot<StatusOf<'upsertBudget'>>> {
  const k = budgetKeys(tag)
  const args: (string | number)[] = [nowMs, retentionMs, config.unit, config.defaultTtlMs, config.maxTtlMs, config.closesAt ?? '', config.limits.length]
  for (const l of config.limits) args.push(l.id, l.window, l.enforce, l.anchor ?? '', ...pairArgs(l.amount))
  return readSnapshot('upsertBudget', scripts.upsert, await scripts.upsert.run(redis, [k.budget, k.open, k.purge, k.journal], args))
}

export async function getBudget(redis: RedisClient, tag: string, nowMs: number, retentionMs: number): Promise<Snapshot<StatusOf<'getBudget'>>> {
  const k = budgetKeys(tag)
  return readSnapshot('getBudget', scripts.get, await scripts.get.run(redis, [k.budget, k.open, k.purge, k.journal], [nowMs, retentionMs]))
}

export async function authorizeHold(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  amount: bigint,
  ttlMs: number | undefined,
  requestKey: string,
): Promise<Snapshot<StatusOf<'authorizeHold'>>> {
  const k = budgetKeys(tag)
  return readSnapshot(
    'authorizeHold',
    scripts.authorize,
    await scripts.authorize.run(redis, [k.budget, k.open, k.purge, k.journal], [nowMs, ...pairArgs(amount), ttlMs ?? '', retentionMs, requestKey]),
  )
}

export async function closeHold(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  holdNumber: string,
  action: 'settle' | 'release',
  usage: bigint,
): Promise<Snapshot<StatusOf<'closeHold'>>> {
  const k = budgetKeys(tag)
  const args = [nowMs, holdNumber, action, ...pairArgs(usage), retentionMs]
  return readSnapshot('closeHold', scripts.settle, await scripts.settle.run(redis, [k.budget, k.open, k.purge, k.journal], args))
}

export async function chargeBudget(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  amount: bigint,
  mode: 'charge' | 'record',
  requestKey: string,
): Promise<Snapshot<StatusOf<'chargeBudget'>>> {
  const k = budgetKeys(tag)
  return readSnapshot(
    'chargeBudget',
    scripts.charge,
    await scripts.charge.run(redis, [k.budget, k.open, k.purge, k.journal], [nowMs, ...pairArgs(amount), mode, retentionMs, requestKey]),
  )
}

export async function expireHolds(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  max: number,
): Promise<Snapshot<StatusOf<'expireHolds'>>> {
  const k = budgetKeys(tag)
  return readSnapshot('expireHolds', scripts.expire, await scripts.expire.run(redis, [k.budget, k.open, k.purge, k.journal], [nowMs, retentionMs, max]))
}

/**
 * Opens a lease for a run (lua/leaseBudget-4.lua): `requestKey` is `<customerId>|<idempotency
 * key>` of the run's start, `fingerprint` its request, so a retried start finds its lease.
 */
export async function openLease(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  lease: { amount: bigint; ttlMs: number; expiresAt: number; currency: string; requestKey: string; fingerprint: string },
): Promise<Snapshot<StatusOf<'openLease'>>> {
  const k = budgetKeys(tag)
  const args = [nowMs, retentionMs, 'open', ...pairArgs(lease.amount), lease.ttlMs, lease.expiresAt, lease.currency, lease.requestKey, lease.fingerprint]
  return readSnapshot('openLease', scripts.lease, await scripts.lease.run(redis, [k.budget, k.open, k.purge, k.journal], args))
}

/** Reports a lease's run's consumed total (`report`), or its final total and closes it (`end`). */
export async function reportLease(
  redis: RedisClient,
  tag: string,
  nowMs: number,
  retentionMs: number,
  leaseNumber: string,
  action: 'report' | 'end',
  total: bigint,
): Promise<Snapshot<StatusOf<'reportLease'>>> {
  const k = budgetKeys(tag)
  return readSnapshot(
    'reportLease',
    scripts.lease,
    await scripts.lease.run(redis, [k.budget, k.open, k.purge, k.journal], [nowMs, retentionMs, action, leaseNumber, ...pairArgs(total)]),
  )
}
