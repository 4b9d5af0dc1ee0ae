import { Kind, Type, type Static, type TSchema } from '@sinclair/typebox'
import { BudgetUpsertSchema } from '../budgets/schemas.js'
import { EpochMs, strictObject } from '../kernel/schema.js'
import { compile } from '../kernel/validation.js'
import { CreditDocInput } from '../wallet/document.js'
import {
  AggregationMethodSchema,
  BillingIntervalSchema,
  CollectionMethodSchema,
  CreditLinePolicySchema,
  CurrencySchema,
  DueBehaviourSchema,
  FeatureTypeSchema,
  GrantTypeSchema,
  OverageStrategySchema,
  PaymentProviderSchema,
  PlanTypeSchema,
  PlanVersionStatusSchema,
  SubscriptionStatusSchema,
  TierModeSchema,
  UsageModeSchema,
  WhenToBillSchema,
  WindowSizeSchema,
} from './schemas.js'

/**
 * The config document of POST /v1/config/apply (and `npm run cli -- apply`): one project's
 * features, plans, plan versions, customers, subscriptions, grants and budgets. Records are named
 * by slugs (features, plans), by plan and version number (plan versions), or by the caller's ids
 * (customers, subscriptions, grants); the service derives every other id from those names.
 * The rules beyond this schema are in src/catalog/README.md.
 */

/** Slugs of features and plans: what documents and callers name them by. */
export const Slug = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[a-z0-9][a-z0-9_-]*$',
  description: 'Lower-case letters, digits, - and _; 1 to 64 characters.',
})

/** Ids the caller chooses (customers, subscriptions, grants): at most 36 characters, like every identifier field of the spec. */
export const CallerId = Type.String({
  minLength: 1,
  maxLength: 36,
  pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$',
  description: 'Letters, digits and _ . : -; 1 to 36 characters; first a letter or digit.',
})

/** Prices are decimal strings in the plan version's currency; the service keeps them exact (dinero snapshots). */
export const PriceText = Type.String({
  pattern: '^[0-9]{1,15}(\\.[0-9]{1,8})?$',
  description: 'Decimal price in the currency of the plan version, e.g. "20" or "0.000002"; at most 8 fractional digits.',
  examples: ['0.002'],
})

const Title = Type.String({ minLength: 1, maxLength: 128 })
const Description = Type.String({ maxLength: 1024 })
const Count = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
const Anchor = Type.Union([Type.Integer({ minimum: 0, maximum: 31 }), Type.Literal('dayOfCreation')], {
  description:
    "Where a cycle starts in its interval: the day of the month (month, year: 1-31, clamped to short months), the ISO weekday (week: 1 Monday to 7), the hour (day: 0-23), in the subscription's time zone; dayOfCreation (default): from the phase start.",
})

/** Event slugs are the `eventSlug` of raw events (4.4): dotted names are common ("llm.completion"). */
export const EventSlug = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$',
  description: 'Letters, digits and _ . : -; 1 to 64 characters.',
})

export const MeterConfigInput = strictObject(
  {
    eventSlug: EventSlug,
    aggregationMethod: Type.Optional(AggregationMethodSchema),
    aggregationField: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'Event property to aggregate; required unless aggregationMethod is count.' }),
    ),
    filters: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.Union([Type.String({ maxLength: 256 }), Type.Number(), Type.Boolean()]))),
    groupBy: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 16 })),
    windowSize: Type.Optional(WindowSizeSchema),
  },
  { description: 'How usage is measured. Default: count the events named like the feature, per minute.' },
)

export const FeatureInput = strictObject(
  {
    slug: Slug,
    title: Title,
    description: Type.Optional(Description),
    unitOfMeasure: Type.String({ minLength: 1, maxLength: 32, description: 'What one unit is, e.g. "tokens", "seats".' }),
    code: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'Unique numeric code; by default the next free one.' })),
    meterConfig: Type.Optional(MeterConfigInput),
  },
  { $id: 'FeatureInput', description: 'A feature of the document.' },
)

export const PlanInput = strictObject(
  {
    slug: Slug,
    title: Title,
    description: Type.Optional(Description),
    active: Type.Optional(Type.Boolean({ description: 'Default true.' })),
    defaultPlan: Type.Optional(Type.Boolean({ description: 'At most one plan of the project. Default false.' })),
    enterprisePlan: Type.Optional(Type.Boolean({ description: 'Default false.' })),
    metadata: Type.Optional(strictObject({ externalId: Type.Optional(Type.String({ maxLength: 128 })) })),
  },
  { $id: 'PlanInput', description: 'A plan of the document; its versions are planVersions.' },
)

const CadenceFields = { billingIntervalCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 1.' })) }

export const BillingConfigInput = strictObject({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Default e.g. "monthly", "every 3 months".' })),
  billingInterval: BillingIntervalSchema,
  ...CadenceFields,
  billingAnchor: Type.Optional(Anchor),
  planType: Type.Optional(PlanTypeSchema),
})

export const ResetConfigInput = strictObject(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    resetInterval: BillingIntervalSchema,
    resetIntervalCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 1.' })),
    resetAnchor: Type.Optional(Anchor),
    planType: Type.Optional(PlanTypeSchema),
  },
  { description: "When usage counted against the limit starts again. Default: the feature's billing cadence." },
)

export const TierInput = strictObject({
  firstUnit: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  lastUnit: Type.Union([Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()], {
    description: 'null: open-ended (only the last tier).',
  }),
  unitPrice: PriceText,
  flatPrice: Type.Optional(PriceText),
  label: Type.Optional(Type.String({ maxLength: 64 })),
})

export const PlanFeatureInput = strictObject(
  {
    featureSlug: Slug,
    featureType: FeatureTypeSchema,
    config: strictObject({
      price: Type.Optional(PriceText),
      tiers: Type.Optional(Type.Array(TierInput, { minItems: 1, maxItems: 100 })),
      usageMode: Type.Optional(UsageModeSchema),
      tierMode: Type.Optional(TierModeSchema),
      units: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Units in one package.' })),
    }),
    billingConfig: Type.Optional(BillingConfigInput),
    resetConfig: Type.Optional(ResetConfigInput),
    limit: Type.Optional(Count),
    defaultQuantity: Type.Optional(Count),
    order: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    displayFeatureText: Type.Optional(Type.String({ maxLength: 256 })),
    metadata: Type.Optional(
      strictObject({
        realtime: Type.Optional(Type.Boolean()),
        notifyUsageThreshold: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
        overageStrategy: Type.Optional(OverageStrategySchema),
        blockCustomer: Type.Optional(Type.Boolean()),
        hidden: Type.Optional(Type.Boolean()),
        billingCadenceOverride: Type.Optional(Type.Boolean()),
        resetCadenceOverride: Type.Optional(Type.Boolean()),
      }),
    ),
  },
  { $id: 'PlanFeatureInput', description: 'A feature of a plan version of the document: its price and limits.' },
)

export const PlanVersionInput = strictObject(
  {
    plan: Slug,
    version: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    status: PlanVersionStatusSchema,
    title: Title,
    description: Type.Optional(Description),
    tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 32 })),
    active: Type.Optional(Type.Boolean({ description: 'New subscriptions may use it. Default true. May change on a published version.' })),
    archived: Type.Optional(Type.Boolean({ description: 'Default false. May change on a published version.' })),
    currency: CurrencySchema,
    billingConfig: BillingConfigInput,
    whenToBill: Type.Optional(WhenToBillSchema),
    dueBehaviour: Type.Optional(DueBehaviourSchema),
    paymentProvider: Type.Optional(PaymentProviderSchema),
    gracePeriod: Type.Optional(Type.Integer({ minimum: 0, maximum: 365, description: 'Days. Default 0.' })),
    collectionMethod: Type.Optional(CollectionMethodSchema),
    trialUnits: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: 'Trial length in billing intervals. Default 0.' })),
    autoRenew: Type.Optional(Type.Boolean({ description: 'Default true.' })),
    paymentMethodRequired: Type.Optional(Type.Boolean({ description: 'Default false.' })),
    metadata: Type.Optional(
      strictObject({
        externalId: Type.Optional(Type.String({ maxLength: 128 })),
        includedCreditAmount: Type.Optional(
          Type.Integer({ minimum: 0, maximum: 4503599627370495, description: 'Credit included with every cycle, at ledger scale 8.' }),
        ),
      }),
    ),
    features: Type.Array(PlanFeatureInput, { maxItems: 200 }),
  },
  {
    $id: 'PlanVersionInput',
    description: 'A version of a plan. Published versions are immutable: changing one (anything but active and archived) needs a new version number.',
  },
)

export const CustomerInput = strictObject(
  {
    id: CallerId,
    name: Type.Optional(Type.String({ maxLength: 256 })),
    email: Type.Optional(Type.String({ maxLength: 256 })),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean()]))),
  },
  { $id: 'CustomerInput', description: 'A customer of the document.' },
)

export const ItemInput = strictObject({
  featureSlug: Slug,
  units: Type.Optional(Count),
})

export const PhaseInput = strictObject({
  plan: Slug,
  version: Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'A published version of the plan.' }),
  startAt: EpochMs,
  endAt: Type.Optional(Type.Union([EpochMs, Type.Null()], { description: 'Absent or null: open-ended (only the last phase).' })),
  trialUnits: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: "Default: the plan version's." })),
  billingAnchor: Type.Optional(Anchor),
  paymentMethodId: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()])),
  paymentProvider: Type.Optional(PaymentProviderSchema),
  creditLinePolicy: Type.Optional(CreditLinePolicySchema),
  creditLineAmount: Type.Optional(Count),
  metadata: Type.Optional(strictObject({ note: Type.Optional(Type.String({ maxLength: 1024 })), reason: Type.Optional(Type.String({ maxLength: 256 })) })),
  items: Type.Optional(
    Type.Array(ItemInput, {
      maxItems: 200,
      description: "Units per feature; every feature of the plan version is an item (units: the feature's defaultQuantity) unless named here.",
    }),
  ),
})

export const SubscriptionInput = strictObject(
  {
    id: CallerId,
    customerId: CallerId,
    status: Type.Optional(SubscriptionStatusSchema),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'IANA time zone the cycles are laid in. Default UTC.' })),
    cancelAt: Type.Optional(EpochMs),
    metadata: Type.Optional(strictObject({ reason: Type.Optional(Type.String({ maxLength: 256 })), note: Type.Optional(Type.String({ maxLength: 1024 })) })),
    phases: Type.Array(PhaseInput, { minItems: 1, maxItems: 50, description: 'In order of startAt, without overlap.' }),
  },
  { $id: 'SubscriptionInput', description: 'A subscription of the document: a customer on plan versions, phase by phase.' },
)

export const GrantInput = strictObject(
  {
    id: CallerId,
    customerId: CallerId,
    featureSlug: Slug,
    type: GrantTypeSchema,
    priority: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1000,
        description: 'Higher is consumed first. Default by type: trial 100, promotion 80, manual 60, addon 40 (subscription grants: 20).',
      }),
    ),
    allowanceUnits: Count,
    effectiveAt: EpochMs,
    expiresAt: Type.Optional(Type.Union([EpochMs, Type.Null()], { description: 'Absent or null: never.' })),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean()]))),
    plan: Type.Optional(Slug),
    version: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  },
  {
    $id: 'GrantInput',
    description:
      "Units of a feature for a customer. It adds to the customer's subscription entitlement to the feature at effectiveAt; without one, plan and version name the plan version whose feature it entitles.",
  },
)

export const BudgetInput = BudgetUpsertSchema

export const ConfigDocumentSchema = strictObject(
  {
    dryRun: Type.Optional(Type.Boolean({ description: 'true: validate and report what would change, without applying.' })),
    projectId: Type.Optional(Type.String({ minLength: 1, maxLength: 36, description: "Must be the key's project when given." })),
    features: Type.Optional(Type.Array(FeatureInput, { maxItems: 1000 })),
    plans: Type.Optional(Type.Array(PlanInput, { maxItems: 1000 })),
    planVersions: Type.Optional(Type.Array(PlanVersionInput, { maxItems: 1000 })),
    customers: Type.Optional(Type.Array(CustomerInput, { maxItems: 10_000 })),
    subscriptions: Type.Optional(Type.Array(SubscriptionInput, { maxItems: 10_000 })),
    grants: Type.Optional(Type.Array(GrantInput, { maxItems: 10_000 })),
    budgets: Type.Optional(
      Type.Array(BudgetInput, { maxItems: 1000, description: 'Budgets, as POST /v1/budgets/upsert takes them; applied after the catalog.' }),
    ),
    credits: Type.Optional(
      Type.Array(CreditDocInput, { maxItems: 10_000, description: 'Wallet credits, each granted once by its id, after the catalog (src/wallet/README.md).' }),
    ),
  },
  { $id: 'ConfigDocument', description: "A project's catalog as code. What the document names is created or updated; what it does not name stays as it is." },
)

export type ConfigDocument = Static<typeof ConfigDocumentSchema>
export type FeatureDoc = Static<typeof FeatureInput>
export type PlanDoc = Static<typeof PlanInput>
export type PlanVersionDoc = Static<typeof PlanVersionInput>
export type PlanFeatureDoc = Static<typeof PlanFeatureInput>
export type BillingConfigDoc = Static<typeof BillingConfigInput>
export type ResetConfigDoc = Static<typeof ResetConfigInput>
export type TierDoc = Static<typeof TierInput>
export type CustomerDoc = Static<typeof CustomerInput>
export type SubscriptionDoc = Static<typeof SubscriptionInput>
export type PhaseDoc = Static<typeof PhaseInput>
export type GrantDoc = Static<typeof GrantInput>
export type BudgetDoc = Static<typeof BudgetInput>

/** The catalog service reports schema problems with every other problem, so more than a request's 50. */
export const MAX_ISSUES = 1000
export const documentValidator = compile(ConfigDocumentSchema, MAX_ISSUES)

/**
 * The schema as OpenAPI shows it, for a transport that does not check it: the gateway accepts any
 * JSON here and the catalog service validates the document itself, so that schema problems come
 * back like every other problem of a document (400 with details.kind invalid_config).
 * TypeBox checks the `Unknown` kind as anything; the JSON Schema keywords are only shown.
 */
export function documentedOnly(schema: TSchema): TSchema {
  return Type.Unsafe<unknown>({ ...schema, [Kind]: 'Unknown' })
}
