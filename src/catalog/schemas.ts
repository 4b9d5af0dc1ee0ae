import { Type, type Static } from '@sinclair/typebox'

/**
 * Schemas of the catalog resources (spec 2.2, 2.3) as the read routes answer them (4.2, 4.3,
 * 4.10, 4.14), and the bodies of those routes (4.2, 4.3, 4.8, 4.10). Descriptions document the API
 * (they end up in OpenAPI). Every schema is self-contained (no `$ref`); those a client would import
 * by name carry an `$id`, which makes them named components of the OpenAPI document.
 *
 * Conventions:
 * - Answers are not strict about additional properties (they may grow); request bodies are.
 * - Timestamps are integer epoch ms.
 * - Every field the spec lists is present, except fields of a `metadata` object: a metadata object
 *   carries what was set, so its known fields are optional and others may appear.
 * - No sentinels (README.md, "Shapes"): what has no end, no limit or no value is `null` (or, for
 *   `aggregationField` of a count meter, absent), never `""`, `0` or a far-future number.
 * - These are the shapes as answered. The catalog keeps its records in the stored shapes (the
 *   types `MeterConfig`, `Feature`, `FeaturePlanVersion`, `Grant`, `Entitlement` below: numbers
 *   for "never" and "unlimited", `""` for no field), which the domains compute with; views.ts
 *   projects them into these answers.
 * - Value sets the spec shows only one value of are completed from DESIGN.md.
 * - The reduced and list variants are derived from the full schemas (Type.Omit, Type.Composite), so
 *   a field added to a full schema reaches its variants.
 */

// ---------------------------------------------------------------------------------------------
// Building blocks

const EpochMs = (description = 'Epoch milliseconds.') => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description })

const NullableEpochMs = (description: string) => Type.Union([EpochMs(), Type.Null()], { description })

const NullableString = (description: string) => Type.Union([Type.String(), Type.Null()], { description })

/** Identifier fields of entitlements and subscriptions: at most 36 characters (spec 2.2, 2.3, 8). */
const Id36 = (description?: string) => Type.String({ maxLength: 36, ...(description ? { description } : {}) })

const NullableId36 = (description: string) => Type.Union([Id36(), Type.Null()], { description })

const FreeForm = (description: string) => Type.Record(Type.String(), Type.Unknown(), { description })

/** Identifiers in request bodies: 1 to 36 characters. */
const RequestId = (description: string) => Type.String({ minLength: 1, maxLength: 36, description })

const CreatedAtM = () => EpochMs('When the record was created, epoch ms.')
const UpdatedAtM = () => EpochMs('When the record was last changed, epoch ms.')

// ---------------------------------------------------------------------------------------------
// Value sets (spec 2.2, 2.3, 4.10; the full sets from DESIGN.md)

export const OverageStrategySchema = Type.Union([Type.Literal('none'), Type.Literal('last-call'), Type.Literal('always')], {
  $id: 'OverageStrategy',
  description:
    'What happens at the limit: none denies usage past it; last-call lets the call that crosses it through and denies the next; always allows usage past it (billed as overage).',
})
export type OverageStrategy = Static<typeof OverageStrategySchema>

export const FeatureTypeSchema = Type.Union([Type.Literal('flat'), Type.Literal('tier'), Type.Literal('package'), Type.Literal('usage')], {
  $id: 'FeatureType',
  description: 'flat: a fixed price; tier: priced by quantity tiers; package: priced per package of `config.units`; usage: priced by metered usage.',
})
export type FeatureType = Static<typeof FeatureTypeSchema>

export const UsageModeSchema = Type.Union([Type.Literal('tier'), Type.Literal('package'), Type.Literal('unit')], {
  $id: 'UsageMode',
  description: 'How usage is priced: by tiers, per package of `units`, or per unit.',
})
export type UsageMode = Static<typeof UsageModeSchema>

export const TierModeSchema = Type.Union([Type.Literal('volume'), Type.Literal('graduated')], {
  $id: 'TierMode',
  description: 'volume: every unit is priced at the tier the total falls in; graduated: each unit is priced at the tier it falls in.',
})
export type TierMode = Static<typeof TierModeSchema>

export const AggregationMethodSchema = Type.Union([Type.Literal('sum'), Type.Literal('count'), Type.Literal('max'), Type.Literal('latest')], {
  $id: 'AggregationMethod',
  description: 'How the events of a window become usage: sum or max of `aggregationField`, count of events, or the latest value.',
})
export type AggregationMethod = Static<typeof AggregationMethodSchema>

export const WindowSizeSchema = Type.Union([Type.Literal('MINUTE'), Type.Literal('HOUR'), Type.Literal('DAY')], {
  $id: 'WindowSize',
  description: 'Size of the aggregation windows of the meter.',
})
export type WindowSize = Static<typeof WindowSizeSchema>

export const BillingIntervalSchema = Type.Union(
  [Type.Literal('month'), Type.Literal('year'), Type.Literal('week'), Type.Literal('day'), Type.Literal('minute'), Type.Literal('onetime')],
  { $id: 'BillingInterval', description: 'Length of one cycle; onetime: a single charge with no cycle.' },
)
export type BillingInterval = Static<typeof BillingIntervalSchema>

export const PlanTypeSchema = Type.Union([Type.Literal('recurring'), Type.Literal('onetime')], {
  $id: 'PlanType',
  description: 'recurring: every interval; onetime: once.',
})
export type PlanType = Static<typeof PlanTypeSchema>

export const GrantTypeSchema = Type.Union(
  [Type.Literal('subscription'), Type.Literal('manual'), Type.Literal('promotion'), Type.Literal('trial'), Type.Literal('addon')],
  { $id: 'GrantType', description: 'Where the grant comes from.' },
)
export type GrantType = Static<typeof GrantTypeSchema>

export const PlanVersionStatusSchema = Type.Union([Type.Literal('draft'), Type.Literal('published')], {
  $id: 'PlanVersionStatus',
  description: 'draft: still editable; published: immutable and available to subscriptions.',
})
export type PlanVersionStatus = Static<typeof PlanVersionStatusSchema>

export const DueBehaviourSchema = Type.Union([Type.Literal('cancel'), Type.Literal('downgrade')], {
  $id: 'DueBehaviour',
  description: 'What happens to a subscription whose invoice stays unpaid past the grace period: it is canceled, or downgraded to the default plan.',
})
export type DueBehaviour = Static<typeof DueBehaviourSchema>

export const WhenToBillSchema = Type.Union([Type.Literal('pay_in_advance'), Type.Literal('pay_in_arrear')], {
  $id: 'WhenToBill',
  description: 'Whether a cycle is invoiced at its start (in advance) or at its end (in arrear).',
})
export type WhenToBill = Static<typeof WhenToBillSchema>

export const CurrencySchema = Type.Union([Type.Literal('USD'), Type.Literal('EUR')], { $id: 'Currency', description: 'ISO 4217 currency code.' })
export type Currency = Static<typeof CurrencySchema>

export const CollectionMethodSchema = Type.Union([Type.Literal('charge_automatically'), Type.Literal('send_invoice')], {
  $id: 'CollectionMethod',
  description: "charge_automatically: the customer's payment method is charged; send_invoice: the invoice is sent to be paid by the customer.",
})
export type CollectionMethod = Static<typeof CollectionMethodSchema>

export const PaymentProviderSchema = Type.Union([Type.Literal('sandbox'), Type.Literal('stripe'), Type.Literal('square')], {
  $id: 'PaymentProvider',
  description: 'Payment provider; sandbox works locally without credentials.',
})
export type PaymentProvider = Static<typeof PaymentProviderSchema>

export const CreditLinePolicySchema = Type.Union([Type.Literal('capped'), Type.Literal('uncapped')], {
  $id: 'CreditLinePolicy',
  description: 'capped: usage on credit stops at `creditLineAmount`; uncapped: no ceiling.',
})
export type CreditLinePolicy = Static<typeof CreditLinePolicySchema>

export const SubscriptionStatusSchema = Type.Union(
  [
    Type.Literal('active'),
    Type.Literal('trialing'),
    Type.Literal('pending_payment'),
    Type.Literal('pending_activation'),
    Type.Literal('canceled'),
    Type.Literal('expired'),
    Type.Literal('past_due'),
  ],
  { $id: 'SubscriptionStatus', description: 'State of the subscription.' },
)
export type SubscriptionStatus = Static<typeof SubscriptionStatusSchema>

/** A cycle anchor: a number, or `dayOfCreation`. */
const Anchor = (description: string) => Type.Union([Type.Number(), Type.Literal('dayOfCreation')], { description })

// ---------------------------------------------------------------------------------------------
// Prices, meters, features (spec 2.2)

export const PriceSchema = Type.Object(
  {
    dinero: Type.Object(
      {
        amount: Type.Integer({ description: 'The price in units of base^-scale of the currency: amount 2 at scale 3 is 0.002.' }),
        currency: Type.Object({
          code: Type.String({ description: 'ISO 4217 currency code, e.g. USD.' }),
          base: Type.Integer({ description: 'Base of the currency (10).' }),
          exponent: Type.Integer({ description: 'Digits of the minor unit (2 for USD and EUR).' }),
        }),
        scale: Type.Integer({ minimum: 0, description: 'Decimal places of `amount`.' }),
      },
      { description: 'A dinero.js snapshot: the exact amount as an integer and a scale, never a float.' },
    ),
    displayAmount: Type.String({
      pattern: '^[0-9]+(\\.[0-9]+)?$',
      description:
        'The price as a plain decimal string in the currency, e.g. "20", "0.002", "20.50" (whole amounts without decimals, else at least the currency\'s minor digits).',
    }),
  },
  { $id: 'Price', description: 'A price.' },
)
export type Price = Static<typeof PriceSchema>

export const TierSchema = Type.Object(
  {
    unitPrice: PriceSchema,
    flatPrice: PriceSchema,
    firstUnit: Type.Number({ description: 'First unit of the tier (inclusive).' }),
    lastUnit: Type.Union([Type.Number(), Type.Null()], { description: 'Last unit of the tier (inclusive); null for an open last tier.' }),
    label: Type.String({ description: 'Name of the tier for people.' }),
  },
  { $id: 'Tier', description: 'A quantity tier: each unit costs `unitPrice`, and reaching the tier costs `flatPrice` once.' },
)
export type Tier = Static<typeof TierSchema>

export const MeterConfigSchema = Type.Object(
  {
    eventId: Type.String({ description: 'Identifier of the event definition the meter reads.' }),
    eventSlug: Type.String({ description: 'Slug of the raw events (`eventSlug` of 4.4) the meter aggregates.' }),
    aggregationMethod: AggregationMethodSchema,
    aggregationField: Type.Optional(Type.String({ minLength: 1, description: 'Event property that is aggregated; absent for a count meter.' })),
    filters: FreeForm('Event properties and the values an event must have to be counted.'),
    groupBy: Type.Array(Type.String(), { description: 'Event properties usage is grouped by.' }),
    windowSize: WindowSizeSchema,
  },
  { $id: 'MeterConfig', description: 'How usage of a feature is measured from raw events.' },
)
export type MeterConfigAnswer = Static<typeof MeterConfigSchema>

export const FeatureSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    slug: Type.String({ minLength: 1, description: 'Unique within the project; how callers name the feature.' }),
    code: Type.Number({ description: 'Numeric code of the feature, unique within the project.' }),
    unitOfMeasure: Type.String({ description: 'What one unit is, e.g. "tokens", "seats".' }),
    title: Type.String(),
    description: NullableString('What the feature is; null when none was given.'),
    meterConfig: MeterConfigSchema,
  },
  { $id: 'Feature', description: 'A feature of the project (something plans price and entitle).' },
)
export type FeatureAnswer = Static<typeof FeatureSchema>

export const FeatureListItemSchema = Type.Omit(FeatureSchema, ['createdAtM', 'updatedAtM'], {
  description: 'A feature as GET /v1/features/list answers it: without createdAtM and updatedAtM.',
})
export type FeatureListItem = Static<typeof FeatureListItemSchema>

export const FeaturesListResponseSchema = Type.Object({ features: Type.Array(FeatureListItemSchema) }, { description: 'Features of the project.' })
export type FeaturesListResponse = Static<typeof FeaturesListResponseSchema>

// ---------------------------------------------------------------------------------------------
// Feature plan version: a feature as priced in one plan version (spec 2.2)

export const BillingConfigSchema = Type.Object(
  {
    name: Type.String({ description: 'Name of the billing cadence, e.g. "monthly".' }),
    billingInterval: BillingIntervalSchema,
    billingIntervalCount: Type.Integer({ minimum: 1, description: 'Intervals per billing cycle.' }),
    billingAnchor: Anchor(
      'Where a cycle starts within its interval (for monthly cycles, the day of the month), or dayOfCreation: the day the subscription started.',
    ),
    planType: PlanTypeSchema,
  },
  { $id: 'BillingConfig', description: 'When the plan version (or a feature overriding it) is billed.' },
)
export type BillingConfig = Static<typeof BillingConfigSchema>

export const ResetConfigSchema = Type.Object(
  {
    name: Type.String({ description: 'Name of the reset cadence, e.g. "daily".' }),
    resetInterval: BillingIntervalSchema,
    resetIntervalCount: Type.Integer({ minimum: 1, description: 'Intervals per usage period.' }),
    resetAnchor: Anchor('Where a usage period starts within its interval, or dayOfCreation: the day the subscription started.'),
    planType: PlanTypeSchema,
  },
  { $id: 'ResetConfig', description: 'When the usage counted against the limit starts again from zero.' },
)
export type ResetConfig = Static<typeof ResetConfigSchema>

export const FeatureConfigSchema = Type.Object(
  {
    price: Type.Optional(PriceSchema),
    tiers: Type.Optional(Type.Array(TierSchema, { description: 'Ordered, contiguous tiers (tier features, and usage features priced by tier).' })),
    usageMode: Type.Optional(UsageModeSchema),
    tierMode: Type.Optional(TierModeSchema),
    units: Type.Optional(Type.Number({ description: 'Units in one package (package pricing).' })),
  },
  { $id: 'FeatureConfig', description: 'Pricing of the feature: `price` for flat, package and unit pricing, `tiers` and `tierMode` for tiered pricing.' },
)
export type FeatureConfig = Static<typeof FeatureConfigSchema>

export const FeaturePlanVersionMetadataSchema = Type.Object(
  {
    realtime: Type.Optional(Type.Boolean({ description: 'Usage is checked against the limit on every call instead of from aggregates.' })),
    notifyUsageThreshold: Type.Optional(Type.Number({ description: 'Percentage of the limit at which a usage notification is sent.' })),
    overageStrategy: Type.Optional(OverageStrategySchema),
    blockCustomer: Type.Optional(Type.Boolean({ description: "Reaching the limit blocks the customer's access." })),
    hidden: Type.Optional(Type.Boolean({ description: 'Not shown on pricing pages.' })),
    billingCadenceOverride: Type.Optional(Type.Boolean({ description: "The feature is billed on its own billingConfig instead of the plan version's." })),
    resetCadenceOverride: Type.Optional(Type.Boolean({ description: "Usage resets on the feature's own resetConfig instead of with the billing cycle." })),
  },
  { $id: 'FeaturePlanVersionMetadata', description: 'Settings of the feature in this plan version.' },
)
export type FeaturePlanVersionMetadata = Static<typeof FeaturePlanVersionMetadataSchema>

export const FeaturePlanVersionSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    planVersionId: Type.String(),
    featureId: Type.String(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    type: Type.Literal('feature'),
    featureType: FeatureTypeSchema,
    unitOfMeasure: Type.String({ description: 'What one unit is, e.g. "tokens", "seats".' }),
    config: FeatureConfigSchema,
    billingConfig: BillingConfigSchema,
    metadata: FeaturePlanVersionMetadataSchema,
    order: Type.Number({ description: 'Position of the feature in the plan version.' }),
    feature: FeatureSchema,
    resetConfig: ResetConfigSchema,
    defaultQuantity: Type.Number({ description: 'Quantity a subscription item gets when none is given.' }),
    limit: Type.Union([Type.Number(), Type.Null()], { description: 'Usage allowed per reset period; null when there is no limit.' }),
    meterConfig: MeterConfigSchema,
  },
  { $id: 'FeaturePlanVersion', description: 'A feature as priced and limited in one plan version.' },
)
export type FeaturePlanVersionAnswer = Static<typeof FeaturePlanVersionSchema>

// ---------------------------------------------------------------------------------------------
// Entitlements and grants (spec 2.2, 4.2)

export const GrantSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    customerEntitlementId: Type.String({ description: 'The entitlement the grant adds to.' }),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    effectiveAt: EpochMs('When the grant starts to count, epoch ms.'),
    expiresAt: NullableEpochMs('When the grant stops counting, epoch ms; null when it never expires.'),
    type: GrantTypeSchema,
    priority: Type.Number({ description: "Consumption order among the entitlement's grants." }),
    allowanceUnits: Type.Union([Type.Number(), Type.Null()], {
      description: "Units the grant allows; null for no limit (a subscription's grant to a usage feature without a limit).",
    }),
    metadata: FreeForm('Free-form.'),
  },
  { $id: 'Grant', description: 'An allowance of units toward an entitlement.' },
)
export type GrantAnswer = Static<typeof GrantSchema>

const DecimalUnits = (description: string) => Type.String({ pattern: '^-?[0-9]+(\\.[0-9]+)?$', description })

/** An entitlement's `metadata.usage` as answered (src/entitlements/usage.ts UsageSummary, projected by views.ts). */
export const EntitlementUsageSchema = Type.Object(
  {
    usage: DecimalUnits('Usage counted in the current reset period (for max and latest: the aggregate).'),
    limit: Type.Union([DecimalUnits('The allowances of the grants in effect, summed.'), Type.Null()], { description: 'null: no limit.' }),
    remaining: Type.Union([DecimalUnits('limit − usage (negative past the limit).'), Type.Null()], { description: 'null: no limit.' }),
    overage: DecimalUnits('Usage beyond every grant (overage strategies last-call and always).'),
    refused: DecimalUnits('Usage the overage strategy refused this period: never billed.'),
    periodStartAt: Type.Integer({ description: 'The reset period, epoch ms.' }),
    periodEndAt: Type.Integer({ description: 'End of the reset period (exclusive), epoch ms.' }),
    denied: Type.Boolean({ description: 'Usage is denied until periodEndAt.' }),
    asOf: Type.Integer({ description: 'When these counters were read, epoch ms.' }),
    usageAsOf: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'When the gateway accepted the newest event counted this period, epoch ms (raw events are counted by the ingest worker); null when none yet.',
    }),
  },
  { $id: 'EntitlementUsage', description: "An entitlement's usage in its current reset period, counted against the grants in effect." },
)

/** An entitlement's metadata: the access flags and its usage when read with it; other fields as set. */
const EntitlementMetadataSchema = Type.Object(
  {
    usage: Type.Optional(EntitlementUsageSchema),
    customerDisabled: Type.Optional(Type.Boolean()),
    customerUsageLimitReached: Type.Optional(Type.Boolean()),
    subscriptionStatus: Type.Optional(Type.Union([SubscriptionStatusSchema, Type.Null()])),
  },
  { additionalProperties: true, description: 'The access flags and `usage` (when answered with usage); other fields as they were set.' },
)

export const EntitlementSchema = Type.Object(
  {
    id: Id36(),
    projectId: Id36(),
    customerId: Id36(),
    featurePlanVersionId: Id36(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    subscriptionId: NullableId36('The subscription that gives the entitlement; null when it comes from elsewhere.'),
    subscriptionPhaseId: NullableId36('The subscription phase that gives the entitlement, or null.'),
    subscriptionItemId: NullableId36('The subscription item that gives the entitlement, or null.'),
    effectiveAt: EpochMs('When the entitlement starts, epoch ms.'),
    expiresAt: NullableEpochMs('When the entitlement ends, epoch ms; null when open-ended.'),
    overageStrategy: OverageStrategySchema,
    metadata: EntitlementMetadataSchema,
    featurePlanVersion: FeaturePlanVersionSchema,
    grants: Type.Optional(Type.Array(GrantSchema, { description: 'Grants toward the entitlement.' })),
    subscriptionPhase: Type.Optional(
      Type.Object(
        { creditLinePolicy: Type.Optional(CreditLinePolicySchema) },
        { description: 'Of the subscription phase, what the entitlement needs; may be empty.' },
      ),
    ),
  },
  { $id: 'Entitlement', description: "A customer's right to use a feature, with its grants." },
)
export type EntitlementAnswer = Static<typeof EntitlementSchema>

// ---------------------------------------------------------------------------------------------
// Stored shapes: what the catalog keeps and the domains compute with (never answered as is)

/** A meter as stored: `aggregationField` is "" for a count meter. */
export type MeterConfig = Omit<MeterConfigAnswer, 'aggregationField'> & { aggregationField: string }
/** A feature as stored: `description` "" when none. */
export type Feature = Omit<FeatureAnswer, 'meterConfig' | 'description'> & { meterConfig: MeterConfig; description: string }
/** A feature plan version as stored: `limit` is UNLIMITED (2^53 − 1, src/catalog/plans.ts) when there is none. */
export type FeaturePlanVersion = Omit<FeaturePlanVersionAnswer, 'limit' | 'feature' | 'meterConfig'> & {
  limit: number
  feature: Feature
  meterConfig: MeterConfig
}
/** A grant as stored: `expiresAt` FOREVER_MS (src/catalog/cycles.ts) when it never expires, `allowanceUnits` UNLIMITED when unlimited. */
export type Grant = Omit<GrantAnswer, 'expiresAt' | 'allowanceUnits'> & { expiresAt: number; allowanceUnits: number }
/** An entitlement as stored (its feature plan version and grants in their stored shapes). */
export type Entitlement = Omit<EntitlementAnswer, 'featurePlanVersion' | 'grants'> & { featurePlanVersion: FeaturePlanVersion; grants?: Grant[] }

export const EntitlementsListResponseSchema = Type.Array(EntitlementSchema, { description: 'Active entitlements of the customer with their grants.' })
export type EntitlementsListResponse = Static<typeof EntitlementsListResponseSchema>

/** The reduced meter config of /v1/entitlements/get. */
export const MeterConfigReducedSchema = Type.Omit(MeterConfigSchema, ['aggregationMethod', 'windowSize'], {
  $id: 'MeterConfigReduced',
  description: 'A meter config without aggregationMethod and windowSize.',
})
export type MeterConfigReduced = Static<typeof MeterConfigReducedSchema>

/**
 * The feature plan version of /v1/entitlements/get (4.2): it and its nested configs omit `type`,
 * `featureType`, `usageMode`, `tierMode`, `billingInterval`, `planType`, `resetInterval`,
 * `aggregationMethod` and `windowSize`, at every depth (the feature's own meterConfig too).
 */
export const FeaturePlanVersionReducedSchema = Type.Composite(
  [
    Type.Omit(FeaturePlanVersionSchema, ['type', 'featureType', 'config', 'billingConfig', 'resetConfig', 'meterConfig', 'feature']),
    Type.Object({
      config: Type.Omit(FeatureConfigSchema, ['usageMode', 'tierMode']),
      billingConfig: Type.Omit(BillingConfigSchema, ['billingInterval', 'planType']),
      resetConfig: Type.Omit(ResetConfigSchema, ['resetInterval', 'planType']),
      meterConfig: MeterConfigReducedSchema,
      feature: Type.Composite([Type.Omit(FeatureSchema, ['meterConfig']), Type.Object({ meterConfig: MeterConfigReducedSchema })], {
        description: 'The feature, its meterConfig reduced.',
      }),
    }),
  ],
  {
    $id: 'FeaturePlanVersionReduced',
    description:
      'A feature plan version without type, featureType, usageMode, tierMode, billingInterval, planType, resetInterval, aggregationMethod and windowSize.',
  },
)
export type FeaturePlanVersionReduced = Static<typeof FeaturePlanVersionReducedSchema>

export const GrantReducedSchema = Type.Omit(GrantSchema, ['type'], { $id: 'GrantReduced', description: 'A grant without its type.' })
export type GrantReduced = Static<typeof GrantReducedSchema>

/** An entitlement as /v1/entitlements/get answers it (4.2). */
export const EntitlementReducedSchema = Type.Composite(
  [
    Type.Omit(EntitlementSchema, ['featurePlanVersion', 'grants', 'subscriptionPhase']),
    Type.Object({
      featurePlanVersion: FeaturePlanVersionReducedSchema,
      grants: Type.Optional(Type.Array(GrantReducedSchema, { description: 'Grants toward the entitlement, without their type.' })),
      subscriptionPhase: Type.Object({}, { additionalProperties: false, description: 'Always an empty object in this variant.' }),
    }),
  ],
  { $id: 'EntitlementReduced', description: "A customer's right to use a feature, in the reduced shape of /v1/entitlements/get." },
)
export type EntitlementReduced = Static<typeof EntitlementReducedSchema>

export const EntitlementsGetResponseSchema = Type.Array(EntitlementReducedSchema, { description: 'Active entitlements of the customer, reduced.' })
export type EntitlementsGetResponse = Static<typeof EntitlementsGetResponseSchema>

// ---------------------------------------------------------------------------------------------
// Plans and plan versions (spec 2.3, 4.10)

export const PlanVersionSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    planId: Type.String(),
    description: Type.String({ description: 'Empty when none.' }),
    latest: Type.Boolean({ description: 'The newest published version of its plan.' }),
    title: Type.String(),
    tags: Type.Array(Type.String()),
    active: Type.Boolean({ description: 'New subscriptions may use it.' }),
    status: PlanVersionStatusSchema,
    publishedAt: NullableEpochMs('When it was published, epoch ms; null for a draft.'),
    publishedBy: NullableString('Who published it; null for a draft.'),
    archived: Type.Boolean(),
    archivedAt: NullableEpochMs('When it was archived, epoch ms; null unless archived.'),
    archivedBy: NullableString('Who archived it; null unless archived.'),
    paymentProvider: PaymentProviderSchema,
    dueBehaviour: DueBehaviourSchema,
    currency: CurrencySchema,
    billingConfig: BillingConfigSchema,
    whenToBill: WhenToBillSchema,
    gracePeriod: Type.Number({ description: 'Days an invoice may stay unpaid past its due date before the subscription is past due.' }),
    collectionMethod: CollectionMethodSchema,
    trialUnits: Type.Number({ description: 'Length of the trial in billing intervals; 0 for none.' }),
    autoRenew: Type.Boolean({ description: 'Subscriptions renew at the end of each cycle.' }),
    metadata: Type.Object(
      {
        externalId: Type.Optional(Type.String({ description: "The plan version's identifier in another system." })),
        includedCreditAmount: Type.Optional(Type.Integer({ minimum: 0, maximum: 4503599627370495, description: 'Credit included with every cycle.' })),
      },
      { description: 'Settings of the plan version.' },
    ),
    paymentMethodRequired: Type.Boolean({ description: 'A subscription needs a payment method.' }),
    version: Type.Integer({ minimum: 1, description: 'Number of the version within its plan, from 1.' }),
    configHash: Type.String({ description: 'Hash of the pricing configuration: equal hashes, equal configurations.' }),
  },
  { $id: 'PlanVersion', description: 'A version of a plan: what it costs and what it includes.' },
)
export type PlanVersion = Static<typeof PlanVersionSchema>

export const PlanSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    slug: Type.String({ minLength: 1, description: 'Unique within the project.' }),
    title: Type.String(),
    active: Type.Boolean(),
    description: Type.String({ description: 'Empty when none.' }),
    metadata: Type.Object({ externalId: Type.Optional(Type.String({ description: "The plan's identifier in another system." })) }),
    defaultPlan: Type.Boolean({ description: 'The plan customers get by default (and are downgraded to).' }),
    enterprisePlan: Type.Boolean({ description: 'A custom plan, not offered publicly.' }),
  },
  { $id: 'Plan', description: 'A plan.' },
)
export type Plan = Static<typeof PlanSchema>

/** A feature plan version in the plan version list: no type, featureType, usageMode, tierMode; adds displayFeatureText. */
export const PlanFeatureSchema = Type.Composite(
  [
    Type.Omit(FeaturePlanVersionSchema, ['type', 'featureType', 'config']),
    Type.Object({
      config: Type.Omit(FeatureConfigSchema, ['usageMode', 'tierMode']),
      displayFeatureText: Type.String({ description: 'The feature as a pricing page shows it, e.g. "1M tokens, then $0.002 per 1K".' }),
    }),
  ],
  { $id: 'PlanFeature', description: 'A feature of the plan version.' },
)
export type PlanFeature = Static<typeof PlanFeatureSchema>

export const PlanVersionListItemSchema = Type.Composite(
  [
    Type.Omit(PlanVersionSchema, ['status', 'paymentProvider', 'dueBehaviour', 'currency', 'whenToBill']),
    Type.Object({
      plan: PlanSchema,
      planFeatures: Type.Array(PlanFeatureSchema),
      flatPrice: Type.String({ description: 'Sum of the flat prices of the version, formatted for people, e.g. "$49".' }),
    }),
  ],
  { $id: 'PlanVersionListItem', description: 'A plan version as the list answers it: with its plan and features.' },
)
export type PlanVersionListItem = Static<typeof PlanVersionListItemSchema>

export const PlanVersionsListResponseSchema = Type.Object(
  { planVersions: Type.Array(PlanVersionListItemSchema) },
  { description: 'Plan versions of the project.' },
)
export type PlanVersionsListResponse = Static<typeof PlanVersionsListResponseSchema>

/** A feature of the plan version as GET /v1/plan-versions/get answers it: the full feature plan version, with displayFeatureText. */
export const PlanFeatureDetailSchema = Type.Composite(
  [
    FeaturePlanVersionSchema,
    Type.Object({
      displayFeatureText: Type.String({ description: 'The feature as a pricing page shows it, e.g. "1M tokens, then $0.002 per 1K".' }),
    }),
  ],
  { $id: 'PlanFeatureDetail', description: 'A feature of the plan version, with its full configuration (type, featureType, usageMode, tierMode).' },
)
export type PlanFeatureDetail = Static<typeof PlanFeatureDetailSchema>

/** The plan version of GET /v1/plan-versions/get: every field of PlanVersion, its plan, its features in full, and its flat price. */
export const PlanVersionDetailSchema = Type.Composite(
  [
    PlanVersionSchema,
    Type.Object({
      plan: PlanSchema,
      planFeatures: Type.Array(PlanFeatureDetailSchema),
      flatPrice: Type.String({ description: 'Sum of the flat prices of the version, formatted for people, e.g. "$49".' }),
    }),
  ],
  { $id: 'PlanVersionDetail', description: 'A published plan version with its plan and its features.' },
)
export type PlanVersionDetail = Static<typeof PlanVersionDetailSchema>

export const PlanVersionGetResponseSchema = Type.Object(
  { planVersion: PlanVersionDetailSchema },
  { description: 'A published plan version (GET /v1/plan-versions/get/{planVersionId}).' },
)
export type PlanVersionGetResponse = Static<typeof PlanVersionGetResponseSchema>

// ---------------------------------------------------------------------------------------------
// Subscriptions (spec 2.3, 4.3)

export const SubscriptionItemSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    units: Type.Number({ description: 'Quantity subscribed to, e.g. seats.' }),
    featurePlanVersionId: Type.String(),
    subscriptionPhaseId: Type.String(),
    subscriptionId: Type.String(),
  },
  { $id: 'SubscriptionItem', description: 'A feature plan version a phase subscribes to.' },
)
export type SubscriptionItem = Static<typeof SubscriptionItemSchema>

export const SubscriptionPhaseSchema = Type.Object(
  {
    id: Type.String(),
    projectId: Type.String(),
    subscriptionId: Type.String(),
    planVersionId: Type.String(),
    paymentMethodId: NullableString("The customer's payment method charged in this phase; null when none is set."),
    paymentProvider: PaymentProviderSchema,
    creditLineAmount: Type.Number({ description: 'Usage the customer may run on credit (capped policy).' }),
    billingAnchor: Type.Number({ description: 'Where each cycle starts within its interval (for monthly cycles, the day of the month).' }),
    trialEndsAt: EpochMs('When the trial ends, epoch ms.'),
    startAt: EpochMs('When the phase starts, epoch ms.'),
    endAt: NullableEpochMs('When the phase ends, epoch ms; null when it has no end.'),
    planVersion: PlanVersionSchema,
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    creditLinePolicy: CreditLinePolicySchema,
    trialUnits: Type.Number({ default: 0, description: 'Length of the trial in billing intervals; 0 for none.' }),
    metadata: Type.Object(
      {
        note: Type.Optional(Type.String()),
        reason: Type.Optional(Type.String({ description: 'Why the phase was created or changed.' })),
      },
      { description: 'Notes on the phase.' },
    ),
    items: Type.Array(SubscriptionItemSchema),
  },
  { $id: 'SubscriptionPhase', description: 'A period of a subscription on one plan version.' },
)
export type SubscriptionPhase = Static<typeof SubscriptionPhaseSchema>

export const SubscriptionSchema = Type.Object(
  {
    id: Id36(),
    projectId: Id36(),
    customerId: Id36(),
    createdAtM: CreatedAtM(),
    updatedAtM: UpdatedAtM(),
    status: SubscriptionStatusSchema,
    active: Type.Boolean({ description: 'The subscription gives access now.' }),
    planSlug: Type.String({ minLength: 1, description: 'Slug of the plan of the active phase.' }),
    currentCycleStartAt: EpochMs('Start of the current billing cycle, epoch ms.'),
    currentCycleEndAt: NullableEpochMs('End of the current billing cycle, epoch ms; null when it has no end (a onetime plan).'),
    renewAt: NullableEpochMs('When the subscription next renews (the end of the current cycle), epoch ms; null when no cycle follows this one.'),
    endAt: NullableEpochMs('When the subscription ends, epoch ms; null when it has no end.'),
    timezone: Type.String({ minLength: 1, description: 'IANA time zone cycles are computed in, e.g. "UTC".' }),
    metadata: Type.Object(
      {
        reason: Type.Optional(Type.String({ description: 'Why the subscription is in its status, e.g. payment_failed.' })),
        note: Type.Optional(Type.String()),
        dates: Type.Optional(
          Type.Object({
            lastChangeAt: Type.Optional(EpochMs('When the subscription last changed plan, epoch ms.')),
            cancelAt: Type.Optional(EpochMs('When the subscription is to be canceled, epoch ms.')),
          }),
        ),
      },
      { description: 'Notes on the subscription.' },
    ),
    project: Type.Object({ enabled: Type.Boolean() }, { description: "The subscription's project." }),
    customer: Type.Object({ active: Type.Boolean() }, { description: "The subscription's customer." }),
    activePhase: SubscriptionPhaseSchema,
  },
  { $id: 'Subscription', description: "A customer's subscription with its active phase." },
)
export type Subscription = Static<typeof SubscriptionSchema>

// ---------------------------------------------------------------------------------------------
// Request bodies (strict: no other properties allowed)

export const EntitlementsListRequest = Type.Object(
  {
    customerId: RequestId('The customer whose entitlements are listed.'),
    projectId: Type.Optional(RequestId("The customer's project; by default the key's project.")),
  },
  { additionalProperties: false },
)
export type EntitlementsListRequest = Static<typeof EntitlementsListRequest>

export const SubscriptionGetRequest = Type.Object(
  {
    customerId: Type.Optional(RequestId('The customer whose subscription is returned.')),
    projectId: Type.Optional(RequestId("The customer's project; by default the key's project.")),
  },
  { additionalProperties: false },
)
export type SubscriptionGetRequest = Static<typeof SubscriptionGetRequest>

export const PlanVersionsListRequest = Type.Object(
  {
    onlyPublished: Type.Optional(Type.Boolean({ description: 'true: only published plan versions.' })),
    onlyEnterprisePlan: Type.Optional(Type.Boolean({ description: 'true: only versions of enterprise plans.' })),
    onlyLatest: Type.Optional(Type.Boolean({ description: 'true: only the latest version of each plan.' })),
    planVersionIds: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'Only these plan versions.' })),
    billingInterval: Type.Optional(BillingIntervalSchema),
    currency: Type.Optional(CurrencySchema),
  },
  { additionalProperties: false, description: 'Filters; all must hold. An absent or false filter does not filter.' },
)
export type PlanVersionsListRequest = Static<typeof PlanVersionsListRequest>

export const AccessUpdateRequest = Type.Object(
  {
    customerId: RequestId('The customer whose access list is updated.'),
    updates: Type.Object(
      {
        customerUsageLimitReached: Type.Optional(Type.Boolean({ description: 'The customer has reached a usage limit.' })),
        customerDisabled: Type.Optional(Type.Boolean({ description: 'The customer is disabled: every access is denied.' })),
        subscriptionStatus: Type.Optional(SubscriptionStatusSchema),
      },
      { additionalProperties: false, minProperties: 1, description: 'The flags to change; at least one.' },
    ),
  },
  { additionalProperties: false },
)
export type AccessUpdateRequest = Static<typeof AccessUpdateRequest>

export const AccessUpdateResponseSchema = Type.Object({}, { additionalProperties: false, description: 'An empty JSON object.' })
export type AccessUpdateResponse = Static<typeof AccessUpdateResponseSchema>

/** A customer's id as the wallet and run routes take it. */
export const CustomerId = Type.String({
  minLength: 1,
  maxLength: 36,
  pattern: '^[^\\s|]+$',
  description: "The customer's id (the catalog's, 1 to 36 characters).",
})
