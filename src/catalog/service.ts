import { budgetRuleIssues, resolveHolds, type BudgetService } from '../budgets/service.js'
import type { Clock } from '../kernel/clock.js'
import { failure, success, type Failure, type Result } from '../kernel/errors.js'
import { formatUnits, parseAmount } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { changeOf } from './canonical.js'
import { buildCustomers, customersToRead } from './customers.js'
import { documentValidator, type BudgetDoc, type ConfigDocument } from './document.js'
import { configFailure, Issues } from './issues.js'
import { buildCatalog, emptyChanges, firstOfEach } from './plans.js'
import * as store from './redis.js'
import type {
  AccessUpdateRequest,
  FeaturesListResponse,
  PlanVersionDetail,
  PlanVersionsListRequest,
  PlanVersionsListResponse,
  Subscription,
} from './schemas.js'
import type { AccessFlags, ApplyResult, ChangeLists, CustomerView } from './types.js'
import { featureListItem, filterPlanVersions, planVersionDetail, planVersionListItem, subscriptionAt } from './views.js'

/**
 * The catalog's stored state as other domains and workers read it (invoices close cycles from
 * it, the ingest worker counts usage against it), so none of them reads the catalog's keys.
 */
export class CatalogReads {
  constructor(private readonly redis: RedisClient) {}

  /** The catalog and the index of its customers. */
  state(projectId: string): Promise<store.CatalogState> {
    return store.readCatalogState(this.redis, projectId)
  }

  /** A customer's read document and access flags; undefined when the customer does not exist. */
  customer(projectId: string, customerId: string): Promise<{ view: CustomerView; flags: AccessFlags } | undefined> {
    return store.readCustomer(this.redis, projectId, customerId)
  }

  /** Read documents and access flags of some customers, in one round trip. */
  customers(projectId: string, customerIds: string[]): Promise<Map<string, { view: CustomerView; flags: AccessFlags }>> {
    return store.readCustomerViews(this.redis, projectId, customerIds)
  }
}

/**
 * The product catalog (src/catalog/README.md): a project's features, plans and plan versions,
 * its customers' subscriptions and grants, and what they are entitled to. Applies validate in
 * TypeScript and write with one script; reads of a customer are one HGETALL.
 */
export class CatalogService {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly budgets: BudgetService,
  ) {}

  /**
   * Applies a config document (or, with dryRun, reports what it would change). `actor` is who
   * applies it (a key id, or `cli`): it becomes publishedBy and archivedBy.
   */
  async apply(projectId: string, body: unknown, actor: string): Promise<Result<ApplyResult>> {
    const named = typeof body === 'object' && body !== null ? (body as { projectId?: unknown }).projectId : undefined
    const refused = typeof named === 'string' ? checkProject(named, projectId) : undefined
    if (refused) return refused
    if (!documentValidator.check(body)) {
      return configFailure(documentValidator.issues(body).map((issue) => ({ ...issue, kind: 'invalid_config' as const })))
    }
    const doc = body as ConfigDocument
    const now = this.clock()
    const state = await store.readCatalogState(this.redis, projectId)
    const issues = new Issues()
    const catalog = buildCatalog(projectId, state.catalog, doc, now, actor, issues)
    const sources = await store.readSources(this.redis, projectId, customersToRead(doc, state.index, catalog.touchedPlanVersionIds))
    const customers = buildCustomers(projectId, catalog.catalog, state.index, sources, doc, now, catalog.touchedPlanVersionIds, issues)
    const budgets = checkBudgets(doc.budgets ?? [], issues)
    if (issues.any) return configFailure(issues.list, issues.truncated)

    const budgetChanges = await this.budgetChanges(projectId, budgets)
    const summary = { ...catalog.summary, ...customers.summary, budgets: emptyChanges() }
    for (const { input, change } of budgetChanges) summary.budgets[change].push(input.key)
    if (doc.dryRun) return success({ dryRun: true, catalogVersion: state.version, summary })

    let version = state.version
    if (catalog.changed || customers.writes.length > 0) {
      const written = await store.applyCatalog(this.redis, projectId, state.version, catalog.catalog, customers.index, customers.writes)
      if (written.status === 'version_conflict') {
        return failure(
          'conflict',
          'catalog_changed',
          `The catalog changed while this document was applied (version ${state.version} → ${written.version}); nothing was applied. Apply it again.`,
        )
      }
      version = written.version
    }
    // Budgets live under their own hash tags, so they cannot join the catalog script. They were
    // checked with the rest of the document; a crash here leaves them to the next apply of it.
    for (const { input, change } of budgetChanges) {
      if (change === 'unchanged') continue
      const upserted = await this.budgets.upsert(projectId, input)
      if (!upserted.ok) return upserted
    }
    return success({ dryRun: false, catalogVersion: version, summary })
  }

  /** POST /v1/subscriptions/get. A disabled customer's subscription is shown (customer.active false). */
  async getSubscription(projectId: string, customerId: string): Promise<Result<Subscription>> {
    const customer = await store.readCustomer(this.redis, projectId, customerId)
    if (!customer) return customerNotFound(customerId)
    const subscription = subscriptionAt(customer.view, customer.flags, this.clock())
    if (!subscription) return failure('not_found', 'subscription_not_found', `Customer ${customerId} has no subscription in effect now.`)
    return success(subscription)
  }

  /** POST /v1/plans/versions/list and /v1/plan-versions/list. */
  async listPlanVersions(projectId: string, filters: PlanVersionsListRequest): Promise<Result<PlanVersionsListResponse>> {
    const catalog = await store.readCatalog(this.redis, projectId)
    return success({ planVersions: filterPlanVersions(catalog, filters).map((pv) => planVersionListItem(pv, catalog)) })
  }

  /** A published plan version in full (GET /v1/plan-versions/get/:planVersionId answers it as `{planVersion}`). */
  async getPlanVersion(projectId: string, planVersionId: string): Promise<Result<PlanVersionDetail>> {
    const catalog = await store.readCatalog(this.redis, projectId)
    const pv = catalog.planVersions.find((v) => v.id === planVersionId && v.status === 'published')
    if (!pv) return failure('not_found', 'plan_version_not_found', `No published plan version ${planVersionId} in this project.`)
    return success(planVersionDetail(pv, catalog))
  }

  /** GET /v1/features/list. */
  async listFeatures(projectId: string): Promise<Result<FeaturesListResponse>> {
    const catalog = await store.readCatalog(this.redis, projectId)
    return success({ features: catalog.features.map(featureListItem) })
  }

  /** POST /v1/access/update. */
  async updateAccess(projectId: string, request: AccessUpdateRequest): Promise<Result<Record<string, never>>> {
    const fields: Record<string, string> = {}
    const { customerDisabled, customerUsageLimitReached, subscriptionStatus } = request.updates
    if (customerDisabled !== undefined) fields.customerDisabled = customerDisabled ? '1' : '0'
    if (customerUsageLimitReached !== undefined) fields.customerUsageLimitReached = customerUsageLimitReached ? '1' : '0'
    if (subscriptionStatus !== undefined) fields.subscriptionStatus = subscriptionStatus
    const status = await store.updateAccess(this.redis, projectId, request.customerId, fields)
    return status === 'ok' ? success({}) : customerNotFound(request.customerId)
  }

  /** POST /v1/customers/list: the ids of the project's customers (those config documents created), sorted. */
  async listCustomerIds(projectId: string): Promise<string[]> {
    const { index } = await store.readCatalogState(this.redis, projectId)
    return Object.keys(index.customers).sort()
  }

  /** For the usage and run paths: one HGET. A customer that does not exist is not disabled. */
  isCustomerDisabled(projectId: string, customerId: string): Promise<boolean> {
    return store.readCustomerDisabled(this.redis, projectId, customerId)
  }

  /** Whether each budget of the document is new, changed or as stored (one read per budget, side by side). */
  private budgetChanges(projectId: string, budgets: BudgetDoc[]): Promise<{ input: BudgetDoc; change: keyof ChangeLists }[]> {
    return Promise.all(
      budgets.map(async (input) => {
        const stored = await this.budgets.get(projectId, input.key)
        if (!stored.ok) return { input, change: 'created' as const }
        const { key, unit, limits, holds, closesAt } = stored.value
        return { input, change: changeOf(budgetConfig(input), { key, unit, limits, holds, closesAt }) }
      }),
    )
  }
}

/** A body's `projectId`, when given, must be the key's project: 403 otherwise. */
export function checkProject(named: string | undefined, projectId: string): Failure | undefined {
  if (named === undefined || named === projectId) return undefined
  return failure('forbidden', 'other_project', `The body names project ${named}; this key belongs to another project.`)
}

export function customerDisabled(customerId: string): Failure {
  return failure('forbidden', 'customer_disabled', `Customer ${customerId} is disabled (POST /v1/access/update); its entitlements are refused.`)
}

export function customerNotFound(customerId: string): Failure {
  return failure('not_found', 'customer_not_found', `Customer ${customerId} does not exist in this project.`)
}

/** A budget of the document as BudgetService stores it: defaults filled in, amounts canonical. */
function budgetConfig(b: BudgetDoc) {
  return {
    key: b.key,
    unit: b.unit ?? '',
    limits: b.limits.map((l) => ({
      id: l.id,
      window: l.window,
      enforce: l.enforce,
      amount: formatUnits(parseAmount(l.amount)!),
      ...(l.anchor === undefined ? {} : { anchor: l.anchor }),
    })),
    holds: resolveHolds(b.holds),
    closesAt: b.closesAt ?? null,
  }
}

/**
 * The rules BudgetService.upsert enforces, checked here first with the document's paths:
 * budgets are written after the catalog, so one that would fail there must stop the apply
 * before anything is written. A limit id used twice is a slug_conflict here. Returns the
 * budgets to go on with.
 */
function checkBudgets(budgets: BudgetDoc[], issues: Issues): BudgetDoc[] {
  return firstOfEach(
    budgets,
    (b) => b.key,
    (i, first) => issues.conflict(`$.budgets[${i}].key`, `budget ${budgets[i]!.key} is already defined at $.budgets[${first}]`),
  ).map(([b, i]) => {
    for (const issue of budgetRuleIssues(b, `$.budgets[${i}]`)) {
      if (issue.duplicate) issues.conflict(issue.path, issue.message)
      else issues.invalid(issue.path, issue.message)
    }
    return b
  })
}
