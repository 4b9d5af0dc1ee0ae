import type { BudgetService } from '../budgets/service.js'
import { catalogKey, customerKey } from '../catalog/keys.js'
import type { Entitlement } from '../catalog/schemas.js'
import type { AccessFlags, CustomerView } from '../catalog/types.js'
import { entitlementsAt } from '../catalog/views.js'
import type { Clock } from '../kernel/clock.js'
import type { UsageEventRow } from '../events/types.js'
import { failure, invalid, success, type Failure, type Result } from '../kernel/errors.js'
import { prepareEntitlementUsage, reachedDecisionOf, type CountedEntitlement, type LimitReachedDecision } from '../entitlements/usage.js'
import { formatUnits } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { CURRENCIES, DEFAULT_CURRENCY, type WalletCurrency } from '../wallet/types.js'
import { runFailure } from './errors.js'
import { pricingOf, quantityOf, type FeaturePricing } from './pricing.js'
import * as store from './redis.js'
import { DEFAULT_RUN_TTL_MS, LEASE_GRACE_MS, type ConsumeReason, type ConsumeResponse, type EndStatus, type Run, type RunMeta } from './types.js'

export interface StartInput {
  customerId: string
  budgetAmountMinor: number
  currency?: WalletCurrency
  idempotencyKey: string
  workloadType?: string
  workloadId?: string
  traceId?: string
  parentRunId?: string
  budgetKey?: string
  ttlMs?: number
}

export interface ConsumeInput {
  featureSlug: string
  idempotencyKey: string
  id?: string
  eventSlug?: string
  timestamp?: number
  properties?: Record<string, unknown>
}

/** A customer's catalog state as a consume prices with it; the script checks it is still current. */
interface CustomerPricing {
  catalogVersion: string
  subscriptionStatus: string
  view: CustomerView | undefined
  flags: AccessFlags
}

/** One attempt of a consume, priced: the script's arguments, and the usage cache's key of the run's feature. */
interface PricedEvent {
  args: store.ConsumeArgs
  usageKey: string
  /** The entitlement the consume counts against, when it has one in effect (limit.reached names it). */
  counted?: CountedEntitlement
}

const CACHE_MAX = 10_000
/** Rounds of 'stale_usage' a consume retries before giving up (concurrent consumes of one tiered feature of one run). */
const MAX_USAGE_RETRIES = 200

function bounded<K, V>(map: Map<K, V>, key: K, value: V): V {
  if (map.size >= CACHE_MAX) map.clear()
  map.set(key, value)
  return value
}

/**
 * Runs (src/runs/README.md): leases on a customer's wallet with a budget in minor currency units.
 * Each operation is one script over the customer's keys under the project's hash tag.
 */
export class RunService {
  /** runId → its customer and currency (immutable), per project. */
  private readonly index = new Map<string, { customerId: string; currency: string }>()
  /** (project, customer) → the catalog state consume priced with last. */
  private readonly pricing = new Map<string, CustomerPricing>()
  /** (project, run, feature) → the run's quantity of a tiered/package feature, as last seen. */
  private readonly usage = new Map<string, string>()

  /**
   * `budgets`: where runs started with budgetKey lease from (without it, budgetKey is 412).
   * `onLimitReached`: told when a consume's count took the customer's usage of the feature to
   * its limit for the first time in the period (the script's decision; limit.reached).
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly budgets?: BudgetService,
    private readonly onLimitReached?: (projectId: string, runId: string, decision: LimitReachedDecision) => void,
  ) {}

  /** POST /v1/runs/start. */
  async start(projectId: string, input: StartInput): Promise<Result<Run>> {
    const refused = this.leaseRefusal(input)
    if (refused) return refused
    const now = this.clock()
    let currency: string = input.currency ?? DEFAULT_CURRENCY
    if (input.parentRunId !== undefined && input.currency === undefined) {
      const parent = await this.runIndex(projectId, input.parentRunId)
      if (parent) currency = parent.currency
    }
    const exponent = CURRENCIES[currency as WalletCurrency].exponent
    const parentRunId = input.parentRunId ?? ''
    const meta = runMetaOf(input, parentRunId, now)
    const fingerprint = startFingerprint(input, currency, meta)
    const x = 8 - exponent
    const ttlMs = input.ttlMs ?? DEFAULT_RUN_TTL_MS
    let deadline = now + ttlMs
    let lease: { budgetKey: string; number: string; open: boolean; created: boolean } | undefined
    if (input.budgetKey !== undefined) {
      // The lease first (the budget's slot), then the run that names it (the project's slot).
      const leased = await this.budgets!.openLease(projectId, input.budgetKey, {
        amount: BigInt(input.budgetAmountMinor) * 10n ** BigInt(x),
        ttlMs,
        expiresAt: deadline + LEASE_GRACE_MS,
        currency,
        requestKey: `${input.customerId}|${input.idempotencyKey}`,
        fingerprint,
      })
      if (!leased.ok) return leased
      const l = leased.value
      lease = { budgetKey: input.budgetKey, number: l.number, open: l.state === 'open', created: !l.replayed }
      // A retried start keeps the first attempt's deadline: the run never outlives its lease.
      deadline = l.expiresAt - LEASE_GRACE_MS
    }
    const started = await store.startRun(this.redis, projectId, input.customerId, now, {
      idempotencyKey: input.idempotencyKey,
      fingerprint,
      budget: input.budgetAmountMinor,
      x,
      currency,
      parentRunId,
      deadline,
      meta,
      lease,
    })
    if (lease?.created && started.status !== 'ok') {
      // No run took the lease this call opened (a replayed run names an earlier lease): give it
      // back at once, else its deadline would.
      await this.budgets!.reportLease(projectId, lease.budgetKey, lease.number, 0n, 'end').catch(() => undefined)
    }
    if (started.status !== 'ok' && started.status !== 'replayed') {
      return runFailure(started.status, {
        customerId: input.customerId,
        parentRunId,
        currency,
        budgetAmountMinor: input.budgetAmountMinor,
        budgetKey: input.budgetKey,
      })
    }
    await this.settleIfEnded(projectId, started.run!)
    return success(toRun(started.run!, now))
  }

  /** A start with budgetKey: only for a root run, and only where budgets are wired in. */
  private leaseRefusal(input: StartInput): Failure | undefined {
    if (input.budgetKey === undefined) return undefined
    if (input.parentRunId !== undefined) {
      return invalid([
        { path: '$.budgetKey', message: 'a child run reserves from its parent (and so from the budget its root leases from); budgetKey is for root runs' },
      ])
    }
    if (!this.budgets) {
      return failure(
        'precondition_failed',
        'budget_leases_not_supported',
        "Runs leasing from a budget (budgetKey) are not available here: start the run without budgetKey to reserve from the customer's wallet.",
      )
    }
    return undefined
  }

  /** GET /v1/runs/get/{runId} (a run past its deadline is expired on the way). */
  async get(projectId: string, runId: string): Promise<Result<Run>> {
    const index = await this.runIndex(projectId, runId)
    if (!index) return runFailure('run_not_found', { runId })
    const now = this.clock()
    const read = await store.endRun(this.redis, projectId, index.customerId, now, runId, 'get')
    if (!read.run) return runFailure('run_not_found', { runId })
    await this.settleIfEnded(projectId, read.run)
    return success(toRun(read.run, now))
  }

  /** POST /v1/runs/end/{runId}. */
  async end(projectId: string, runId: string, status: EndStatus): Promise<Result<Run>> {
    const index = await this.runIndex(projectId, runId)
    if (!index) return runFailure('run_not_found', { runId })
    const now = this.clock()
    const ended = await store.endRun(this.redis, projectId, index.customerId, now, runId, status)
    if (!ended.run) return runFailure('run_not_found', { runId })
    await this.settleIfEnded(projectId, ended.run)
    if (ended.status === 'run_not_running') return runFailure(ended.status, { runId, run: toRun(ended.run, now) })
    return success(toRun(ended.run, now))
  }

  /** POST /v1/runs/consume/{runId}: priced from the customer's catalog state, applied by one script (retried when that state moved). */
  async consume(projectId: string, runId: string, input: ConsumeInput): Promise<Result<ConsumeResponse>> {
    const index = await this.runIndex(projectId, runId)
    if (!index) return runFailure('run_not_found', { runId })
    const { customerId } = index
    const now = this.clock()
    let state = await this.customerPricing(projectId, customerId, false)
    for (let attempt = 0; ; attempt++) {
      const priced = this.priceEvent(projectId, runId, index, state, input, now)
      if (!priced.ok) return priced
      const applied = await store.consumeRun(this.redis, projectId, customerId, now, runId, priced.value.args)
      const { reason } = applied
      if (reason === 'run_not_found') return runFailure(reason, { runId })
      if (reason === 'stale' && attempt < 3) {
        state = await this.customerPricing(projectId, customerId, true)
        continue
      }
      if (reason === 'stale_usage' && attempt < MAX_USAGE_RETRIES) {
        bounded(this.usage, priced.value.usageKey, applied.usage!)
        continue
      }
      if (reason === 'stale' || reason === 'stale_usage') return runFailure(reason, { runId, attempts: attempt })
      return success(await this.consumed(projectId, reason, applied, priced.value, now))
    }
  }

  /**
   * Prices one attempt of a consume with the customer's catalog state: the consume script's
   * arguments, or why the event is refused before any script runs.
   */
  private priceEvent(
    projectId: string,
    runId: string,
    index: { customerId: string; currency: string },
    state: CustomerPricing,
    input: ConsumeInput,
    now: number,
  ): Result<PricedEvent> {
    const entitlement = entitlementOf(state, input.featureSlug, now)
    const pricing = entitlement ? pricingOf(entitlement) : undefined
    if (pricing && pricing.currency !== index.currency) {
      return runFailure('currency_mismatch', { runId, currency: index.currency, featureSlug: input.featureSlug, pricedIn: pricing.currency })
    }
    let quantity = 0n
    if (pricing) {
      const q = quantityOf(pricing.meter, input.properties)
      if (typeof q !== 'bigint') return invalid([q])
      quantity = q
    }
    const usageKey = `${projectId}\n${runId}\n${input.featureSlug}`
    const usageBefore = pricing && !pricing.linear ? (this.usage.get(usageKey) ?? '0') : '0'
    const usageAfter = pricing && !pricing.linear ? (BigInt(usageBefore) + quantity).toString() : '0'
    const ledger = !pricing ? 0n : pricing.linear ? pricing.cost(quantity) : pricing.cost(BigInt(usageAfter))
    // No run holds more than 2^53 − 1 minor units: an event (or, tiered, the feature's total)
    // costing more can never fit, and its cost would not stay exact in Lua, so it is refused here.
    if (ledger > MAX_RUN_LEDGER[exponentOf(index.currency)]!) {
      const path = pricing!.meter.aggregationMethod === 'count' ? '$.featureSlug' : `$.properties.${pricing!.meter.aggregationField}`
      return invalid([{ path, message: 'the event would cost more than any run can hold (2^53 − 1 minor units)' }])
    }
    const usageRow = usageRowOf(projectId, index.customerId, runId, input, pricing, quantity, now)
    // The quantity against the customer's grants (src/entitlements): checked, and counted when accepted, in the same script.
    const counted =
      entitlement && state.view
        ? prepareEntitlementUsage(projectId, { view: state.view, flags: state.flags }, input.featureSlug, quantity, now, 'check', usageRow.ts_ms)
        : undefined
    const counting = counted?.args
    return success({
      usageKey,
      ...(counted ? { counted } : {}),
      args: {
        idempotencyKey: input.idempotencyKey,
        featureSlug: input.featureSlug,
        entitled: pricing !== undefined,
        mode: pricing && !pricing.linear ? 'set' : 'add',
        ledger,
        catalogVersion: state.catalogVersion,
        subscriptionStatus: state.subscriptionStatus,
        usageBefore,
        usageAfter,
        row: JSON.stringify(usageRow),
        ...(counting ? { counting } : {}),
      },
    })
  }

  /**
   * The answer to a consume the script decided: a tiered feature's new quantity remembered, then
   * the tree's consumption reported to the budget it leases from, or an expired run's lease settled.
   */
  private async consumed(projectId: string, reason: ConsumeReason, applied: store.ConsumeOutcome, priced: PricedEvent, now: number): Promise<ConsumeResponse> {
    if (reason === 'accepted' && priced.args.mode === 'set') bounded(this.usage, priced.usageKey, priced.args.usageAfter)
    const run = applied.run!
    if (applied.reached && priced.counted) this.onLimitReached?.(projectId, run.runId, reachedDecisionOf(priced.counted, applied.reached))
    if (run.lease && applied.treeConsumed !== undefined && applied.cost > 0) {
      // The tree's consumption so far into the budget: a second round trip (another slot). A
      // report that fails is repaired by the next one or by the end's settlement (each carries
      // the total, not a difference), so the accepted event stands.
      await this.budgets
        ?.reportLeaseProgress(projectId, run.lease.budgetKey, run.lease.number, BigInt(applied.treeConsumed) * 10n ** BigInt(8 - exponentOf(run.currency)))
        .catch(() => undefined)
    } else if (reason === 'expired') {
      await this.settleIfEnded(projectId, run)
    }
    return { accepted: reason === 'accepted' || reason === 'duplicate', reason, run: toRun(run, now), costAmountMinor: applied.cost }
  }

  /**
   * Settles at their budgets the leases of ended leasing roots of the project (the sweep, after
   * expiring; also repairs a settlement a gateway could not make). Returns how many it settled.
   */
  async settleLeases(projectId: string): Promise<number> {
    let settled = 0
    for (const s of await store.leaseSettlements(this.redis, projectId)) {
      if (await this.settleLease(projectId, s)) settled++
    }
    return settled
  }

  /** An ended leasing root: its lease settled at the budget with the run's final consumed, if not yet. */
  private async settleIfEnded(projectId: string, run: store.RunState): Promise<void> {
    if (!run.lease || run.status === 'running' || run.lease.rootRunId !== run.runId) return
    // The run has ended whatever happens here: a settlement that fails stays pending for the sweep.
    try {
      const [pending] = await store.leaseSettlements(this.redis, projectId, `${run.meta.customerId}\t${run.runId}`)
      if (pending) await this.settleLease(projectId, pending)
    } catch {
      // settleLeases (the sweep) retries it.
    }
  }

  private async settleLease(projectId: string, s: Awaited<ReturnType<typeof store.leaseSettlements>>[number]): Promise<boolean> {
    if (!this.budgets) return false
    const ended = await this.budgets.reportLease(projectId, s.budgetKey, s.number, BigInt(s.consumed) * 10n ** BigInt(s.x), 'end')
    // Settled, or nothing left to settle it into (the budget or its lease are gone).
    if (ended.ok || ended.reason === 'budget_not_found' || ended.reason === 'lease_not_found') {
      await store.dropLeaseSettlement(this.redis, projectId, s.field)
      return ended.ok
    }
    return false
  }

  /** Expires the given runs of a customer that are past their deadline (the sweep, src/workers/runExpiry.ts). */
  expire(projectId: string, customerId: string, runIds: string[]): Promise<number> {
    return store.expireRuns(this.redis, projectId, customerId, this.clock(), runIds)
  }

  /** Forgets an ended root run's tree when its retention is over (the sweep). */
  purge(projectId: string, customerId: string, rootRunId: string): Promise<number> {
    return store.purgeRunTree(this.redis, projectId, customerId, this.clock(), rootRunId)
  }

  now(): number {
    return this.clock()
  }

  private async runIndex(projectId: string, runId: string): Promise<{ customerId: string; currency: string } | undefined> {
    const key = `${projectId}\n${runId}`
    const cached = this.index.get(key)
    if (cached) return cached
    const found = await store.indexOfRun(this.redis, projectId, runId)
    return found ? bounded(this.index, key, found) : undefined
  }

  /** The customer's catalog document, flags and the catalog version, read together (MULTI: one slot). */
  private async customerPricing(projectId: string, customerId: string, refresh: boolean): Promise<CustomerPricing> {
    const key = `${projectId}\n${customerId}`
    const cached = refresh ? undefined : this.pricing.get(key)
    if (cached) return cached
    const replies = await this.redis.multi().hget(catalogKey(projectId), 'version').hgetall(customerKey(projectId, customerId)).exec()
    if (!replies) throw new Error('customer read was aborted')
    const version = (replies[0]![1] as string | null) ?? ''
    const hash = (replies[1]![1] as Record<string, string> | null) ?? {}
    return bounded(this.pricing, key, {
      catalogVersion: version,
      subscriptionStatus: hash.subscriptionStatus ?? '',
      view: hash.doc === undefined ? undefined : (JSON.parse(hash.doc) as CustomerView),
      flags: {
        customerDisabled: hash.customerDisabled === '1',
        customerUsageLimitReached: hash.customerUsageLimitReached === '1',
        subscriptionStatus: (hash.subscriptionStatus || null) as AccessFlags['subscriptionStatus'],
      },
    })
  }
}

/** The customer's entitlement to the feature in effect at `now`, if any. */
function entitlementOf(state: CustomerPricing, featureSlug: string, now: number): Entitlement | undefined {
  if (!state.view) return undefined
  const view = { ...state.view, entitlements: state.view.entitlements.filter((e) => e.featurePlanVersion.feature.slug === featureSlug) }
  if (view.entitlements.length === 0) return undefined
  return entitlementsAt(view, state.flags, now)[0]
}

/**
 * The usage_events row an accepted consume journals (src/runs/README.md "Reasons", accepted).
 * JSON.stringify recurses into `properties`, whose depth the HTTP pipeline bounded before the
 * route ran (MAX_JSON_DEPTH, src/kernel/validation.ts).
 */
function usageRowOf(
  projectId: string,
  customerId: string,
  runId: string,
  input: ConsumeInput,
  pricing: FeaturePricing | undefined,
  quantity: bigint,
  now: number,
): UsageEventRow {
  return {
    event_id: input.id ?? `${runId}:${input.idempotencyKey}`,
    project_id: projectId,
    customer_id: customerId,
    event_slug: input.eventSlug ?? pricing?.meter.eventSlug ?? input.featureSlug,
    feature_slug: input.featureSlug,
    value: formatUnits(quantity),
    properties: JSON.stringify(input.properties ?? {}),
    ts_ms: input.timestamp ?? now,
    // Written only when the consume accepted the usage (a refused consume is answered so, and stores nothing).
    status: 'accepted',
    decision: `consume:${runId}`,
  }
}

/** The answer of a run as the script that read or moved it at `asOf` (the now it ran with) left it. */
export function toRun(r: store.RunState, asOf: number): Run {
  return {
    runId: r.runId,
    status: r.status,
    customerId: r.meta.customerId,
    currency: r.currency,
    // Stored as "" when not given (the run's meta and its idempotency fingerprint); answered null.
    workloadId: r.meta.workloadId === '' ? null : r.meta.workloadId,
    traceId: r.meta.traceId === '' ? null : r.meta.traceId,
    parentRunId: r.meta.parentRunId === '' ? null : r.meta.parentRunId,
    workloadType: r.meta.workloadType,
    budgetAmountMinor: r.budget,
    consumedAmountMinor: r.consumed,
    remainingAmountMinor: r.budget - r.consumed - r.childHeld,
    ...(r.status === 'running' ? {} : { endedAt: r.endedAt }),
    startedAt: r.meta.startedAt,
    expiresAt: r.deadline,
    ...(r.lease ? { budgetKey: r.lease.budgetKey, leaseId: `l_${r.lease.number}` } : {}),
    asOf,
  }
}

/** 2^53 − 1 minor units at ledger scale 8, by the currency's exponent. */
const MAX_RUN_LEDGER = [0, 1, 2, 3, 4, 5, 6, 7, 8].map((x) => BigInt(Number.MAX_SAFE_INTEGER) * 10n ** BigInt(8 - x))

function exponentOf(currency: string): number {
  return CURRENCIES[currency as WalletCurrency]?.exponent ?? 2
}

/** The static fields a started run keeps beside its counters. */
function runMetaOf(input: StartInput, parentRunId: string, now: number): RunMeta {
  return {
    customerId: input.customerId,
    workloadType: input.workloadType ?? 'agent',
    workloadId: input.workloadId ?? '',
    traceId: input.traceId ?? '',
    parentRunId,
    startedAt: now,
  }
}

/** What makes two starts with one idempotency key the same request. */
function startFingerprint(input: StartInput, currency: string, meta: RunMeta): string {
  return JSON.stringify([
    input.budgetAmountMinor,
    currency,
    meta.parentRunId,
    input.ttlMs ?? null,
    meta.workloadType,
    meta.workloadId,
    meta.traceId,
    ...(input.budgetKey === undefined ? [] : [input.budgetKey]),
  ])
}
