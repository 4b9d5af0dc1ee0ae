import type { Issue } from '../kernel/errors.js'
import type { Stamps } from './canonical.js'
import type { Cadence } from './cycles.js'
import type {
  CreditLinePolicy,
  Entitlement,
  Feature,
  FeaturePlanVersion,
  GrantType,
  PaymentProvider,
  Plan,
  PlanVersion,
  SubscriptionPhase,
  SubscriptionStatus,
} from './schemas.js'

/** What the catalog keeps in Redis (src/catalog/README.md, "Storage"), and what applies report. */

/** A feature as priced in a plan version, stored without the feature it joins on read. */
export type StoredPlanFeature = Omit<FeaturePlanVersion, 'feature' | 'meterConfig'> & {
  featureSlug: string
  displayFeatureText: string
}

export type StoredPlanVersion = PlanVersion & {
  planSlug: string
  features: StoredPlanFeature[]
}

/** The `catalog` field of the catalog hash. */
export interface StoredCatalog {
  features: Feature[]
  plans: Plan[]
  planVersions: StoredPlanVersion[]
}

/** The `index` field: which customer holds which records, so an apply reads only the customers it touches. */
export interface CatalogIndex {
  customers: Record<string, { planVersionIds: string[]; subscriptionIds: string[]; grantIds: string[] }>
}

export interface StoredItem extends Stamps {
  featureSlug: string
  units: number
}

/** A phase as the document gave it, its defaults filled in and its items expanded to every feature. */
export interface StoredPhase extends Stamps {
  plan: string
  version: number
  startAt: number
  endAt: number | null
  trialUnits: number | null
  billingAnchor: number | 'dayOfCreation' | null
  paymentMethodId: string | null
  paymentProvider: PaymentProvider | null
  creditLinePolicy: CreditLinePolicy
  creditLineAmount: number
  metadata: { note?: string; reason?: string }
  items: StoredItem[]
}

export interface StoredSubscription extends Stamps {
  id: string
  /** null: derived (trialing during the trial, then active). */
  status: SubscriptionStatus | null
  timezone: string
  cancelAt: number | null
  metadata: { reason?: string; note?: string }
  phases: StoredPhase[]
}

export interface StoredGrant extends Stamps {
  id: string
  featureSlug: string
  type: GrantType
  priority: number
  allowanceUnits: number
  effectiveAt: number
  expiresAt: number | null
  metadata: Record<string, string | number | boolean>
  /** The plan version the grant entitles from, resolved when the grant was applied. */
  planVersionId: string
}

export interface StoredCustomer extends Stamps {
  id: string
  name: string
  email: string
  metadata: Record<string, string | number | boolean>
}

/** The `src` field of a customer hash: the customer's records as documents gave them. */
export interface CustomerSource {
  customer: StoredCustomer
  subscriptions: StoredSubscription[]
  grants: StoredGrant[]
}

/** A phase as read: the spec's phase, and what reads need to lay its cycles. */
export type PhaseView = SubscriptionPhase & { planSlug: string; cadence: Cadence; endsAt: number | null }

export interface SubscriptionView extends Stamps {
  id: string
  projectId: string
  customerId: string
  status: SubscriptionStatus | null
  timezone: string
  cancelAt: number | null
  metadata: { reason?: string; note?: string }
  phases: PhaseView[]
}

/**
 * The `doc` field of a customer hash: everything a read of the customer's entitlements or
 * subscription needs, resolved at apply time, so such a read is one HGETALL. Entitlements hold
 * every grant; reads keep those in effect at their `now`.
 */
export interface CustomerView {
  customerId: string
  subscriptions: SubscriptionView[]
  entitlements: Entitlement[]
}

/** Access flags of a customer (fields of its hash beside `src` and `doc`). */
export interface AccessFlags {
  customerDisabled: boolean
  customerUsageLimitReached: boolean
  /** Overrides the status of the customer's current subscription; null when not set. */
  subscriptionStatus: SubscriptionStatus | null
}

export type IssueKind = 'invalid_config' | 'slug_conflict' | 'unresolved_reference'

export interface ConfigIssue extends Issue {
  kind: IssueKind
}

export interface ChangeLists {
  created: string[]
  updated: string[]
  unchanged: string[]
}

export const SUMMARY_KINDS = ['features', 'plans', 'planVersions', 'customers', 'subscriptions', 'grants', 'budgets'] as const
export type SummaryKind = (typeof SUMMARY_KINDS)[number]
export type ApplySummary = Record<SummaryKind, ChangeLists>

export interface ApplyResult {
  dryRun: boolean
  /** The catalog version after the apply (for a dry run, or a document that changed nothing, the current one). */
  catalogVersion: number
  summary: ApplySummary
}
