import type { AggregationMethod, FeatureConfig, FeatureType } from '../catalog/schemas.js'

/** Value sets (DESIGN.md, "Value sets the spec shows only one of"). */
export type InvoiceStatus = 'unpaid' | 'paid' | 'waiting' | 'void' | 'draft' | 'failed'
export type SettlementSource = 'provider' | 'credit_line' | 'cash_wallet' | 'plan_included' | 'trial' | 'promo' | 'manual'
export type SettlementStatus = 'due' | 'paid' | 'included'
/** The source of the wallet credit that paid a line, as answered (src/invoices/answers.ts): the peer API's set, of the values this service gives. */
export type WalletCreditSource = 'promo' | 'manual' | 'trial'
/** fee: a flat/package/tier feature priced on the item's units; usage: a metered feature; adjustment: late usage of an earlier cycle. */
export type LineKind = 'fee' | 'usage' | 'adjustment'

/**
 * An invoice as stored (JSON in Redis): the spec's Invoice (2.5) with the ledger amounts as
 * decimal integer strings (scale 8, exact: BigInt inside), turned into the spec's integers only
 * at the HTTP boundary.
 */
export interface StoredInvoice {
  id: string
  project_id: string
  subscription_id: string
  customer_id: string
  status: InvoiceStatus
  currency: string
  statement_key: string
  statement_start_at: number
  statement_end_at: number
  due_at: number
  past_due_at: number
  issue_date: number
  /** 0: not handed to a payment provider (yet); answered null. */
  sent_at: number
  /** 0: not paid (yet); answered null. */
  paid_at: number
  gross_amount: string
  amount_due: string
  amount_paid: string
  amount_included: string
}

/** A line as stored: the spec's Line (2.5), amounts as decimal integer strings, quantity as decimal text; plus what the service needs. */
export interface StoredLine {
  entry_id: string
  statement_key: string
  kind: LineKind
  description: string
  /** The quantity the line prices, decimal text exact to 10^-8 (e.g. "2500.5"). */
  quantity: string
  amount: string
  amount_due: string
  amount_paid: string
  amount_included: string
  collectable: boolean
  settlement_source: SettlementSource
  settlement_status: SettlementStatus
  /** '' when no wallet credit settled the line (answered null, as are the two below when ''). */
  wallet_credit_id: string
  /** The allocation's source: the credit's (promo, manual, refund, goodwill, trial), `cash_wallet` for cash; '' when not from the wallet. */
  wallet_credit_source: string
  wallet_id: string
  currency: string
  /** ISO 8601. */
  created_at: string
  /** Not in the spec's Line: the feature the line is for (the journal row carries it). */
  feature_slug: string
  /** Not in the spec's Line: the start of the cycle the line bills (an adjustment's is an earlier cycle). */
  cycle_start_at: number
}

/** What was billed for one usage feature of a cycle: enough to rate the cycle's usage again and bill only the difference. */
export interface BilledUsage {
  featureSlug: string
  featurePlanVersionId: string
  featureType: FeatureType
  config: FeatureConfig
  /** Rows of usage_events with feature_slug equal to the feature's slug or its meter's eventSlug. */
  eventSlug: string
  aggregationMethod: AggregationMethod
  /** The quantity billed so far, units of 10^-8 as decimal integer text. */
  quantity: string
}

/** The `billed:<cycleStartMs>` field of a subscription's billing hash. */
export interface BilledCycle {
  invoiceId: string
  cycleStartAt: number
  cycleEndAt: number
  currency: string
  usage: BilledUsage[]
}

/** One wallet allocation against an invoice (engineer B's WalletService.applyToInvoice). */
export interface WalletAllocation {
  creditId: string | null
  source: string
  amountLedger: bigint
}

/**
 * The wallet as invoices use it: applies the customer's credits to an invoice's amount due,
 * idempotent per invoiceId (a second call answers the first call's allocations).
 */
export interface InvoiceWallet {
  applyToInvoice(
    projectId: string,
    customerId: string,
    invoiceId: string,
    amountLedger: bigint,
    currency: string,
    now: number,
  ): Promise<{
    allocations: WalletAllocation[]
    remainingLedger: bigint
    walletId?: string
  }>
}

/** POST /v1/invoices/list: filters (all must hold), the page size, and where the previous page ended. */
export interface InvoiceListQuery {
  customerId?: string
  status?: InvoiceStatus
  /** statement_start_at ≥ this (epoch ms). */
  statementFrom?: number
  /** statement_start_at < this (epoch ms). */
  statementTo?: number
  limit: number
  /** The previous page's nextCursor. */
  cursor?: string
}

/** What one call of closeDueCycles did. */
export interface CloseReport {
  projects: number
  subscriptions: number
  /** Invoices this call created (drafted and finalized). */
  created: string[]
  /** Invoices this call finalized that another call had drafted. */
  finalized: string[]
  /** Cycles skipped because their invoice already existed (another worker, an earlier run). */
  existing: number
  errors: { projectId: string; subscriptionId: string; message: string }[]
}
