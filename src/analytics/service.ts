import { rate, toQuantityUnits } from '../billing/rating.js'
import { FOREVER_MS, cycleAt } from '../catalog/cycles.js'
import type { Entitlement } from '../catalog/schemas.js'
import type { BudgetService } from '../budgets/service.js'
import { checkProject, type CatalogService } from '../catalog/service.js'
import type { EntitlementService } from '../entitlements/service.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import type { Clock } from '../kernel/clock.js'
import { success, type Result } from '../kernel/errors.js'
import { formatUnits } from '../kernel/money.js'
import { dailyUsageOfFeature, hourlyUsageByFeature, newestEventMs, rawUsageByFeature, type FeatureUsage } from './clickhouse.js'
import { accumulateDaily, forecastUsage, forecastWindow, type ForecastLimit } from './forecast.js'
import { horizonDaysOf, type UsageForecastRequest, type UsageForecastResponse, type UsageGetRequest, type UsageGetResponse } from './schemas.js'
import { addDecimals, shapeUsageRows, usageWindow, type PricedUsage } from './usage.js'

const HOUR_MS = 3_600_000
/** Budget keys as POST /v1/budgets/upsert takes them (src/kernel/schema.ts BudgetKey). */
const BUDGET_KEY = /^[A-Za-z0-9][A-Za-z0-9:/_.@-]*$/

/** A customer's entitlement limit for a feature in the period holding `now`, with the period's usage so far. */
export type EntitlementLimit = ForecastLimit & { kind: 'entitlement'; id: string; amount: number; used: number; window: string; resetsAt: number | null }

/**
 * POST /v1/analytics/usage/get and /forecast: reads the aggregates from ClickHouse and hands them
 * to the pure functions of this folder (README.md). Without a store (a gateway started without
 * ClickHouse, as most tests do) every read is empty: no usage, a forecast without data.
 */
export class AnalyticsService {
  constructor(
    private readonly store: ClickHouseStore | undefined,
    private readonly clock: Clock,
    private readonly catalog: CatalogService,
    private readonly entitlements: EntitlementService,
    /** Budgets the forecast looks at (budgetLimits); none without. */
    private readonly budgets?: BudgetService,
  ) {}

  /**
   * The limits of the customer's budget for a feature, as forecast limits. A budget has no
   * customer or feature of its own, so the relation is by key: the budget whose key is
   * `<customerId>/<featureSlug>` (that feature's budget for that customer, counted in the
   * feature's usage units), else the budget `<customerId>` when its `unit` is the feature's slug.
   * Its hard limits (all its limits when it has none); `used` = consumed + held (what the budget
   * counts against each limit now), `resetsAt` = the end of the limit's current period.
   */
  async budgetLimits(projectId: string, customerId: string, featureSlug: string): Promise<ForecastLimit[]> {
    if (!this.budgets) return []
    const candidates: [key: string, unitMustBe?: string][] = [[`${customerId}/${featureSlug}`], [customerId, featureSlug]]
    for (const [key, unitMustBe] of candidates) {
      if (!BUDGET_KEY.test(key) || key.length > 128) continue
      const got = await this.budgets.get(projectId, key)
      if (!got.ok || (unitMustBe !== undefined && got.value.unit !== unitMustBe)) continue
      const limits = got.value.balance.limits
      const hard = limits.filter((l) => l.enforce === 'hard')
      // consumed + held summed exactly; numbers only at the forecast's boundary (it projects in numbers).
      return (hard.length > 0 ? hard : limits).map((l) => ({
        kind: 'budget',
        budgetKey: key,
        id: l.id,
        window: l.window,
        amount: Number(l.amount),
        used: Number(formatUnits(toQuantityUnits(l.consumed) + toQuantityUnits(l.held))),
        resetsAt: l.resetsAt,
      }))
    }
    return []
  }

  /**
   * Per-feature usage of a customer with `from ≤ ts_ms < to`, exact to the millisecond: whole
   * hours from the hourly aggregates, the partial hours at both ends from the raw events. With
   * `newest`, also the newest event's timestamp in that range (null: none): the trailing partial
   * hour's read gives it when it has events, else newestEventMs looks before it.
   */
  private async usageBetween(projectId: string, customerId: string, from: number, to: number, newest = false): Promise<UsageRead> {
    if (!this.store || to <= from) return { rows: [], newestMs: null }
    const q = { projectId, customerId }
    const firstHour = Math.ceil(from / HOUR_MS) * HOUR_MS
    const lastHour = Math.max(firstHour, Math.floor(to / HOUR_MS) * HOUR_MS)
    const [hourly, leading, trailing] = await Promise.all([
      hourlyUsageByFeature(this.store, { ...q, fromMs: Math.min(firstHour, lastHour), toMs: lastHour }),
      rawUsageByFeature(this.store, { ...q, fromMs: from, toMs: Math.min(firstHour, to) }),
      rawUsageByFeature(this.store, { ...q, fromMs: Math.max(lastHour, from), toMs: to }),
    ])
    const rows = [...hourly, ...leading, ...trailing]
    if (!newest) return { rows, newestMs: null }
    if (trailing.length > 0) return { rows, newestMs: Math.max(...trailing.map((r) => Number(r.newest))) }
    if (rows.length === 0) return { rows, newestMs: null }
    return { rows, newestMs: (await newestEventMs(this.store, { ...q, fromMs: from, toMs: Math.min(lastHour, to) })) ?? null }
  }

  /**
   * The customer's entitlement limit for a usage feature, when the catalog gives one: the units
   * of the entitlement's grants in effect now (its subscription grant is the plan feature's
   * `limit`), counted over the current reset period (the plan feature's resetConfig, laid from
   * the entitlement's start in the subscription's time zone), with the usage of that period so
   * far as `used`. None for a feature without a finite limit or without an entitlement.
   * Also the limit check of limit.reached notifications (src/notifications/limits.ts).
   */
  async entitlementLimit(projectId: string, customerId: string, featureSlug: string, now: number): Promise<EntitlementLimit | undefined> {
    const entitlements = await this.entitlements.listEntitlements(projectId, customerId)
    if (!entitlements.ok) return undefined
    const e = usageEntitlement(entitlements.value, featureSlug)
    if (!e) return undefined
    const grants = e.grants ?? []
    const amount = grants.length > 0 ? grants.reduce((sum, g) => sum + g.allowanceUnits, 0) : e.featurePlanVersion.limit
    if (!Number.isFinite(amount) || amount >= Number.MAX_SAFE_INTEGER) return undefined
    const subscription = e.subscriptionId === null ? undefined : await this.catalog.getSubscription(projectId, customerId)
    const zone = subscription?.ok ? subscription.value.timezone : 'UTC'
    const reset = e.featurePlanVersion.resetConfig
    const cycle = cycleAt(now, e.effectiveAt, e.expiresAt, { interval: reset.resetInterval, count: reset.resetIntervalCount, anchor: reset.resetAnchor }, zone)
    // Summed exactly (0.7 + 0.2 + 0.1 must reach a limit of 1); a number only once summed.
    const used = Number(
      (await this.usageBetween(projectId, customerId, cycle.start, now)).rows
        .filter((row) => row.feature_slug === featureSlug)
        .reduce((sum, row) => addDecimals(sum, row.usage), '0'),
    )
    return { kind: 'entitlement', id: e.id, amount, used, window: reset.resetInterval, resetsAt: cycle.end >= FOREVER_MS ? null : cycle.end }
  }

  /**
   * Usage per feature over `[now − range, now)` (usageBetween), each feature's spending priced
   * from the customer's plan: the customer's current entitlement to the feature (the lookup of
   * entitlementLimit: a `usage` feature in effect now) rates the range's usage with its feature
   * plan version (src/billing/rating.ts, no included units: a usage grant is a limit, not free
   * units), in the plan version's currency, displayed like the catalog's prices. Zero (USD)
   * without such an entitlement (no catalog, no subscription, a disabled customer).
   */
  async usage(projectId: string, body: UsageGetRequest): Promise<Result<UsageGetResponse>> {
    const refused = checkProject(body.project_id, projectId)
    if (refused) return refused
    const now = this.clock()
    const { from, to } = usageWindow(body.range, now)
    const { rows, newestMs } = await this.usageBetween(projectId, body.customer_id, from, to, true)
    const price = rows.length === 0 ? undefined : await this.spendingPricer(projectId, body.customer_id)
    const usage = shapeUsageRows({ projectId, customerId: body.customer_id, rows, ...(price ? { price } : {}) })
    return success({ usage, asOf: now, usageAsOf: newestMs })
  }

  /** The price callback of usage(): reads the entitlements and their plan versions' currencies once, then rates synchronously. */
  private async spendingPricer(
    projectId: string,
    customerId: string,
  ): Promise<((row: { feature_slug: string; usage: number; exact: string }) => PricedUsage | null) | undefined> {
    const entitlements = await this.entitlements.listEntitlements(projectId, customerId)
    if (!entitlements.ok) return undefined
    const currencies = new Map<string, string>()
    for (const e of entitlements.value) {
      const id = e.featurePlanVersion.planVersionId
      if (e.featurePlanVersion.featureType !== 'usage' || currencies.has(id)) continue
      const pv = await this.catalog.getPlanVersion(projectId, id)
      currencies.set(id, pv.ok ? pv.value.currency : (e.featurePlanVersion.config.price?.dinero.currency.code ?? 'USD'))
    }
    return ({ feature_slug, exact }) => {
      const e = usageEntitlement(entitlements.value, feature_slug)
      if (!e) return null
      const fpv = e.featurePlanVersion
      // Rated from the exact decimal total, never from the float the row carries.
      const rated = rate({ featureType: fpv.featureType, config: fpv.config, quantity: exact.startsWith('-') ? '0' : exact })
      return { amount: formatUnits(rated.amount), currency: currencies.get(fpv.planVersionId) ?? 'USD' }
    }
  }

  /**
   * The forecast of DESIGN.md over the 14 UTC days before today: the daily aggregates of the
   * feature, accumulated into the cumulative series (days between two days with usage count as
   * zero-usage days), then forecastUsage(), with the customer's entitlement limit for the feature
   * when there is one (entitlementLimit) and its budget for the feature (budgetLimits), so the
   * answer says when each runs out.
   */
  async forecast(projectId: string, body: UsageForecastRequest): Promise<Result<UsageForecastResponse>> {
    const now = this.clock()
    const { from, to } = forecastWindow(now)
    const days = this.store
      ? await dailyUsageOfFeature(this.store, { projectId, customerId: body.customer_id, featureSlug: body.feature_slug, fromMs: from, toMs: to })
      : []
    const dailyCumulative = accumulateDaily(days.map((d) => ({ dayStartMs: Date.parse(`${d.day}T00:00:00Z`), usage: Number(d.usage) })))
    const [limit, budgetLimits, newestMs] = await Promise.all([
      this.entitlementLimit(projectId, body.customer_id, body.feature_slug, now),
      this.budgetLimits(projectId, body.customer_id, body.feature_slug),
      this.store ? newestEventMs(this.store, { projectId, customerId: body.customer_id, featureSlug: body.feature_slug, fromMs: from, toMs: now }) : undefined,
    ])
    const result = forecastUsage({
      dailyCumulative,
      now,
      horizonDays: horizonDaysOf(body),
      featureSlug: body.feature_slug,
      ...(body.period_key === undefined ? {} : { periodKey: body.period_key }),
      ...(limit ? { limit } : {}),
      ...(budgetLimits.length > 0 ? { budgetLimits } : {}),
    })
    return success({
      ...result,
      project_id: projectId,
      customer_id: body.customer_id,
      feature_slug: body.feature_slug,
      asOf: now,
      usageAsOf: newestMs ?? null,
    })
  }
}

/** What usageBetween read: the rows of its three parts, and the newest event's timestamp when asked (else null). */
interface UsageRead {
  rows: FeatureUsage[]
  newestMs: number | null
}

/** The customer's entitlement to a usage feature, among those in effect now (first match). */
function usageEntitlement(entitlements: Entitlement[], featureSlug: string): Entitlement | undefined {
  return entitlements.find((x) => x.featurePlanVersion.feature.slug === featureSlug && x.featurePlanVersion.featureType === 'usage')
}

/** The body's project_id, when it names another project than the key's: 403 (main projects do not exist yet). */
