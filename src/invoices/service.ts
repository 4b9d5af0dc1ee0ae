import { rate, toMinorUnits, toQuantityUnits } from '../billing/rating.js'
import { sha256 } from '../catalog/canonical.js'
import { cycleAt } from '../catalog/cycles.js'
import { CURRENCIES } from '../catalog/pricing.js'
import { CatalogReads } from '../catalog/service.js'
import type { Currency, Feature } from '../catalog/schemas.js'
import type { PhaseView, StoredCatalog, StoredPlanFeature, SubscriptionView } from '../catalog/types.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import type { Clock } from '../kernel/clock.js'
import { failure, success, type Result } from '../kernel/errors.js'
import { formatUnits } from '../kernel/money.js'
import { scanMasters } from '../infra/redis/scan.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { toInvoice, toLine, walletCreditSource, type Invoice, type Line } from './answers.js'
import { cycleUsage, type MeteredFeature } from './clickhouse.js'
import { CATALOG_PATTERN, projectOfCatalogKey } from './keys.js'
import { listInvoices, reindexOnce, type InvoicePage } from './list.js'
import * as store from './redis.js'
import type {
  BilledCycle,
  BilledUsage,
  CloseReport,
  InvoiceListQuery,
  InvoiceStatus,
  InvoiceWallet,
  LineKind,
  SettlementSource,
  StoredInvoice,
  StoredLine,
  WalletAllocation,
} from './types.js'

/**
 * Invoices (src/invoices/README.md): at the end of each billing cycle of a subscription, one
 * invoice per cycle, rated with the plan version's prices, settled by trial, the plan's included
 * credit and the customer's wallet credits, written once (a deterministic id, a create-if-absent
 * script) and journaled to ClickHouse through the outbox. Amounts are BigInt at ledger scale 8.
 */

export interface InvoiceOptions {
  /** How long after a cycle ended its late usage is still billed on a later invoice (ms). */
  lateWindowMs: number
  /** At most this many cycles are closed per subscription per call (a backlog is worked off over calls). */
  maxCyclesPerRun: number
  /** At most this many earlier cycles are re-read for late usage at each close (the latest ones; short cycles stay cheap). */
  maxLateCycles: number
}

export const DEFAULT_INVOICE_OPTIONS: InvoiceOptions = { lateWindowMs: 35 * 86_400_000, maxCyclesPerRun: 100, maxLateCycles: 12 }

const DAY_MS = 86_400_000
/** The journal table of invoice lines (ClickHouse migration 6; src/journal/tables.ts). */
export const INVOICE_LINES_TABLE = 'invoice_lines'

/** The invoice of a cycle: `inv_` and 24 hex digits of SHA-256 over (project, customer, subscription, cycle start). */
export function invoiceIdOf(projectId: string, customerId: string, subscriptionId: string, cycleStartAt: number): string {
  return `inv_${sha256(JSON.stringify([projectId, customerId, subscriptionId, cycleStartAt])).slice(0, 24)}`
}

export type { Invoice, Line }

/**
 * The provider boundary (spec part 1; src/billing/README.md, rounding rule 2): what a payment
 * provider is asked to charge for an invoice, in currency minor units: its `amount_due` (ledger
 * scale 8) rounded ONCE, half to even, by toMinorUnits. Nothing before this point rounds to
 * minor units. An invoice with nothing due (or a credit) charges 0.
 */
export function providerCharge(invoice: Pick<StoredInvoice, 'amount_due' | 'currency'>): { amountMinor: bigint; currency: string; exponent: number } {
  const exponent = CURRENCIES[invoice.currency as Currency]?.exponent ?? 2
  const due = BigInt(invoice.amount_due)
  return { amountMinor: due > 0n ? toMinorUnits(due, exponent) : 0n, currency: invoice.currency, exponent }
}

export class InvoiceService {
  private readonly options: InvoiceOptions
  private readonly catalog: CatalogReads
  /** The one-time reindex of invoices drafted before the indexes (list.ts reindexOnce), once per process. */
  private reindexed: Promise<number> | undefined

  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly history: ClickHouseStore | undefined,
    private readonly wallet: InvoiceWallet | undefined,
    options: Partial<InvoiceOptions> = {},
    /**
     * Told of every invoice this service finalizes, once (invoice.created, and invoice.updated of
     * the earlier invoices its adjustment lines adjust: `invoiceOfCycle` names them).
     */
    private readonly onFinalized?: (invoice: StoredInvoice, lines: StoredLine[], invoiceOfCycle: (cycleStartAt: number) => string) => void,
  ) {
    this.options = { ...DEFAULT_INVOICE_OPTIONS, ...options }
    this.catalog = new CatalogReads(redis)
  }

  /** GET /v1/invoices/get/{invoiceId}: the invoice with its lines; 404 for an unknown id or another project's. */
  async get(projectId: string, invoiceId: string): Promise<Result<{ invoice: Invoice; lines: Line[] }>> {
    const found = await store.readInvoice(this.redis, projectId, invoiceId)
    if (!found) return failure('not_found', 'invoice_not_found', `No invoice ${invoiceId} in this project.`)
    return success({ invoice: toInvoice(found.invoice), lines: found.lines.map(toLine) })
  }

  /** POST /v1/invoices/list: the project's invoices, newest first, filtered, a page at a time (README.md, "Listing"). */
  async list(projectId: string, query: InvoiceListQuery): Promise<Result<InvoicePage>> {
    this.reindexed ??= reindexOnce(this.redis, this.clock()).catch((err: unknown) => {
      this.reindexed = undefined
      throw err
    })
    await this.reindexed
    return listInvoices(this.redis, projectId, query)
  }

  /**
   * Closes every billing cycle that has ended by `now` and has no final invoice yet, for one
   * project or (no projectId) every project with a catalog. Safe to run from several workers at
   * once and again after a crash: each cycle gets one invoice. `customerId` (with a projectId):
   * that customer's subscriptions only.
   */
  async closeDueCycles(projectId?: string, now: number = this.clock(), customerId?: string): Promise<CloseReport> {
    const report: CloseReport = { projects: 0, subscriptions: 0, created: [], finalized: [], existing: 0, errors: [] }
    const projects = projectId === undefined ? await this.projectsWithCatalog() : [projectId]
    for (const p of projects) {
      report.projects++
      await this.closeProject(p, now, report, projectId === undefined ? undefined : customerId)
    }
    return report
  }

  private async projectsWithCatalog(): Promise<string[]> {
    const projects = new Set<string>()
    for (const key of await scanMasters(this.redis, [CATALOG_PATTERN])) {
      const p = projectOfCatalogKey(key)
      if (p) projects.add(p)
    }
    return [...projects].sort()
  }

  private async closeProject(projectId: string, now: number, report: CloseReport, onlyCustomerId?: string): Promise<void> {
    const state = await this.catalog.state(projectId)
    const customerIds = Object.keys(state.index.customers)
      .filter((c) => onlyCustomerId === undefined || c === onlyCustomerId)
      .sort()
    for (const customerId of customerIds) {
      const customer = await this.catalog.customer(projectId, customerId)
      if (!customer) continue
      for (const subscription of customer.view.subscriptions) {
        if (subscription.phases.length === 0) continue
        report.subscriptions++
        try {
          await this.closeSubscription(projectId, state.catalog, customerId, subscription, now, report)
        } catch (err) {
          report.errors.push({ projectId, subscriptionId: subscription.id, message: err instanceof Error ? err.message : String(err) })
        }
      }
    }
  }

  /** Closes the subscription's ended cycles in order, from its cursor; stops at the first that cannot be finalized. */
  private async closeSubscription(
    projectId: string,
    catalog: StoredCatalog,
    customerId: string,
    sub: SubscriptionView,
    now: number,
    report: CloseReport,
  ): Promise<void> {
    const billing = await store.readBillingState(this.redis, projectId, sub.id)
    let from = billing.cursor ?? firstStart(sub)
    for (let i = 0; i < this.options.maxCyclesPerRun; i++) {
      const cycle = cycleFrom(sub, from)
      if (!cycle || cycle.end > now) return
      await this.closeCycle({ projectId, catalog, customerId, sub, cycle, now }, report)
      from = cycle.end
    }
  }

  private async closeCycle(c: CycleContext, report: CloseReport): Promise<void> {
    const { projectId, customerId, sub, cycle } = c
    const invoiceId = invoiceIdOf(projectId, customerId, sub.id, cycle.start)
    let record = await store.readInvoice(this.redis, projectId, invoiceId)
    if (record && record.status !== 'draft') {
      report.existing++
      return
    }
    let created = false
    for (let attempt = 0; !record; attempt++) {
      if (attempt === 3) throw new Error(`the billing state of subscription ${sub.id} kept changing while cycle ${cycle.start} was drafted`)
      const billing = await store.readBillingState(this.redis, projectId, sub.id)
      const draft = await this.buildDraft(c, invoiceId, billing)
      const written = await store.draftInvoice(this.redis, { projectId, subscriptionId: sub.id, rev: billing.rev, ...draft })
      if (written.status === 'created') {
        record = { status: 'draft', invoice: draft.invoice, lines: draft.lines, dueTotal: draft.dueTotal }
        created = true
      } else if (written.status === 'exists') {
        record = written.record
      }
    }
    if (record.status !== 'draft') {
      report.existing++
      return
    }
    const final = await this.settle(projectId, customerId, record, c.now)
    const outcome = await store.finalizeInvoice(this.redis, {
      projectId,
      subscriptionId: sub.id,
      status: final.invoice.status,
      invoice: final.invoice,
      lines: final.lines,
      cycleEndAt: cycle.end,
      journal: final.lines.map((line, i) => `${INVOICE_LINES_TABLE}\t${JSON.stringify(journalRow(final.invoice, line, i))}`),
    })
    if (outcome === 'finalized') {
      ;(created ? report.created : report.finalized).push(invoiceId)
      this.onFinalized?.(final.invoice, final.lines, (start) => invoiceIdOf(projectId, customerId, sub.id, start))
    } else report.existing++
  }

  /** Applies the customer's wallet credits to what the draft leaves due (idempotent per invoice), then totals the invoice. */
  private async settle(
    projectId: string,
    customerId: string,
    record: store.StoredRecord,
    now: number,
  ): Promise<{ invoice: StoredInvoice; lines: StoredLine[] }> {
    let lines = record.lines
    if (this.wallet && record.dueTotal > 0n) {
      const applied = await this.wallet.applyToInvoice(projectId, customerId, record.invoice.id, record.dueTotal, record.invoice.currency, now)
      const walletId = customerId
      lines = cover(
        lines,
        (s) => s === 'due',
        applied.allocations
          .filter((a) => a.amountLedger > 0n)
          .map((a) => ({
            amount: a.amountLedger,
            settle: (line: StoredLine, part: bigint): StoredLine => ({
              ...line,
              amount: part.toString(),
              amount_due: '0',
              amount_paid: part.toString(),
              amount_included: '0',
              collectable: false,
              settlement_source: settlementSourceOf(a),
              settlement_status: 'paid',
              wallet_credit_id: a.creditId ?? '',
              wallet_credit_source: a.source,
              wallet_id: walletId,
              description: `${line.description} (wallet ${a.source} credit)`,
            }),
          })),
      )
    }
    lines = lines.map((line, i) => ({ ...line, entry_id: `${record.invoice.id}:${String(i + 1).padStart(3, '0')}` }))
    const sums = totals(lines)
    const status: InvoiceStatus = BigInt(sums.amount_due) > 0n ? 'unpaid' : 'paid'
    const invoice: StoredInvoice = { ...record.invoice, ...sums, status, paid_at: status === 'paid' ? record.invoice.issue_date : 0 }
    return { invoice, lines }
  }

  /** The draft of a cycle's invoice: every line rated, trial and included credit applied, late usage of earlier cycles billed. */
  private async buildDraft(c: CycleContext, invoiceId: string, billing: store.BillingState) {
    const { projectId, catalog, customerId, sub, cycle, now } = c
    const pv = cycle.phase.planVersion
    const statementKey = `${sub.id}:${new Date(cycle.start).toISOString()}`
    const createdAt = new Date(now).toISOString()
    const features = featuresOf(catalog)
    const ownTrial = cycle.start < cycle.phase.trialEndsAt
    const charges = cycleFeeCharges(c, ownTrial)
    const { usageCharges, billedUsage } = await this.usageCharges(c, features, ownTrial)
    charges.push(...usageCharges)
    const late = await this.lateUsage(c, billing)
    charges.push(...late.charges)

    const currency = pv.currency
    const lines = draftLines(charges, { invoiceId, statementKey, currency, createdAt }, pv.metadata.includedCreditAmount)
    const net = lines.reduce((s, l) => s + BigInt(l.amount_due), 0n)
    const invoice: StoredInvoice = {
      id: invoiceId,
      project_id: projectId,
      subscription_id: sub.id,
      customer_id: customerId,
      status: 'draft',
      currency,
      statement_key: statementKey,
      statement_start_at: cycle.start,
      statement_end_at: cycle.end,
      due_at: now,
      past_due_at: now + pv.gracePeriod * DAY_MS,
      issue_date: now,
      sent_at: 0,
      paid_at: 0,
      ...totals(lines),
    }
    const billed: BilledCycle = { invoiceId, cycleStartAt: cycle.start, cycleEndAt: cycle.end, currency, usage: billedUsage }
    return { invoice, lines, dueTotal: net > 0n ? net : 0n, billed, updates: late.updates, forget: late.forget }
  }

  /**
   * Usage of this cycle, per the feature's meter, rated; and the quantities billed, kept with the
   * invoice so that late usage can later be billed as the difference.
   */
  private async usageCharges(
    c: CycleContext,
    features: Map<string, Feature>,
    ownTrial: boolean,
  ): Promise<{ usageCharges: Charge[]; billedUsage: BilledUsage[] }> {
    const { projectId, catalog, customerId, cycle } = c
    const metered = planFeatures(catalog, cycle.phase)
      .filter((f) => f.featureType === 'usage')
      .map((f) => meteredOf(f, features))
    const usage = await this.usage(projectId, customerId, cycle.start, cycle.end, metered)
    const usageCharges: Charge[] = []
    const billedUsage: BilledUsage[] = []
    for (const m of metered) {
      const quantity = usage.get(m.featureSlug) ?? 0n
      billedUsage.push({ ...m.billed, quantity: quantity.toString() })
      const rated = rate({ featureType: m.fpv.featureType, config: m.fpv.config, quantity })
      usageCharges.push({
        kind: 'usage',
        featureSlug: m.featureSlug,
        cycleStartAt: cycle.start,
        quantity,
        amount: rated.amount,
        trial: ownTrial,
        description: describe(
          m.fpv,
          rated.lines.map((l) => l.description),
        ),
      })
    }
    return { usageCharges, billedUsage }
  }

  /**
   * Late usage of earlier cycles still in the window: the rated difference, on this invoice.
   * Cycles past the window, or beyond the latest maxLateCycles, are forgotten so the billing
   * state stays small; the others are re-read one after the other, oldest first.
   */
  private async lateUsage(c: CycleContext, billing: store.BillingState): Promise<{ charges: Charge[]; updates: BilledCycle[]; forget: number[] }> {
    const { projectId, customerId, cycle } = c
    const horizon = cycle.start - this.options.lateWindowMs
    const charges: Charge[] = []
    const updates: BilledCycle[] = []
    const forget: number[] = []
    const earlier = [...billing.billed].filter(([start]) => start < cycle.start).sort((a, b) => a[0] - b[0])
    for (const [index, [start, billed]] of earlier.entries()) {
      if (billed.cycleEndAt < horizon || index < earlier.length - this.options.maxLateCycles) {
        forget.push(start)
        continue
      }
      const current = await this.usage(
        projectId,
        customerId,
        billed.cycleStartAt,
        billed.cycleEndAt,
        billed.usage.map((u) => ({ featureSlug: u.featureSlug, eventSlug: u.eventSlug, aggregationMethod: u.aggregationMethod })),
      )
      let changed = false
      const moved = billed.usage.map((u) => {
        const old = BigInt(u.quantity)
        const fresh = current.get(u.featureSlug) ?? 0n
        if (fresh === old) return u
        changed = true
        const amount =
          rate({ featureType: u.featureType, config: u.config, quantity: fresh }).amount -
          rate({ featureType: u.featureType, config: u.config, quantity: old }).amount
        charges.push({
          kind: 'adjustment',
          featureSlug: u.featureSlug,
          cycleStartAt: billed.cycleStartAt,
          quantity: fresh - old,
          amount,
          trial: false,
          description: `${u.featureSlug}: late usage of ${new Date(billed.cycleStartAt).toISOString()} to ${new Date(billed.cycleEndAt).toISOString()} (billed ${formatUnits(old)}, now ${formatUnits(fresh)})`,
        })
        return { ...u, quantity: fresh.toString() }
      })
      if (changed) updates.push({ ...billed, usage: moved })
    }
    return { charges, updates, forget }
  }

  /** Usage per feature in units of 10^-8 (never below 0); none without a ClickHouse store. */
  private async usage(projectId: string, customerId: string, fromMs: number, toMs: number, features: MeteredFeature[]): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>()
    if (!this.history || features.length === 0) return out
    const measured = await cycleUsage(this.history, { projectId, customerId, fromMs, toMs, features })
    for (const [slug, units] of measured) out.set(slug, units < 0n ? 0n : units)
    return out
  }
}

interface Cycle {
  phase: PhaseView
  start: number
  end: number
}

interface CycleContext {
  projectId: string
  catalog: StoredCatalog
  customerId: string
  sub: SubscriptionView
  cycle: Cycle
  now: number
}

interface Charge {
  kind: LineKind
  featureSlug: string
  cycleStartAt: number
  description: string
  /** Units of 10^-8; an adjustment's may be negative. */
  quantity: bigint
  amount: bigint
  /** Settled by the phase's trial (included, nothing due). */
  trial: boolean
}

/**
 * Fees (flat, package, tier: priced on the item's units): this cycle's when billed in arrear,
 * or in advance with no earlier cycle to have billed it; the next cycle's when it is billed in advance.
 */
function cycleFeeCharges(c: CycleContext, ownTrial: boolean): Charge[] {
  const { catalog, sub, cycle } = c
  const charges: Charge[] = []
  if (cycle.phase.planVersion.whenToBill === 'pay_in_arrear' || !hasPredecessor(sub, cycle)) {
    charges.push(...feeCharges(catalog, cycle, ownTrial, ''))
  }
  const next = cycleFrom(sub, cycle.end)
  if (next && next.start === cycle.end && next.phase.planVersion.whenToBill === 'pay_in_advance') {
    charges.push(
      ...feeCharges(
        catalog,
        next,
        next.start < next.phase.trialEndsAt,
        ` (in advance, ${new Date(next.start).toISOString()} to ${new Date(next.end).toISOString()})`,
      ),
    )
  }
  return charges
}

/**
 * The draft's lines, in the order of the charges: trial charges are included, the others due;
 * then the plan version's included credit of the cycle (ledger scale 8) covers the cycle's own
 * usage lines, and each line gets its entry id.
 */
function draftLines(
  charges: Charge[],
  invoice: { invoiceId: string; statementKey: string; currency: Currency; createdAt: string },
  includedCreditAmount: number | undefined,
): StoredLine[] {
  const { invoiceId, statementKey, currency, createdAt } = invoice
  let lines: StoredLine[] = charges.map((ch) => {
    const amount = ch.amount.toString()
    const base = {
      entry_id: '',
      statement_key: statementKey,
      kind: ch.kind,
      description: ch.description,
      quantity: formatUnits(ch.quantity),
      amount,
      wallet_credit_id: '',
      wallet_credit_source: '',
      wallet_id: '',
      currency,
      created_at: createdAt,
      feature_slug: ch.featureSlug,
      cycle_start_at: ch.cycleStartAt,
    }
    return ch.trial
      ? {
          ...base,
          amount_due: '0',
          amount_paid: '0',
          amount_included: amount,
          collectable: false,
          settlement_source: 'trial' as const,
          settlement_status: 'included' as const,
        }
      : {
          ...base,
          amount_due: amount,
          amount_paid: '0',
          amount_included: '0',
          collectable: ch.amount > 0n,
          settlement_source: 'provider' as const,
          settlement_status: 'due' as const,
        }
  })
  const included = BigInt(includedCreditAmount ?? 0)
  if (included > 0n) {
    lines = cover(lines, (s, l) => s === 'due' && l.kind === 'usage', [
      {
        amount: included,
        settle: (line, part) => ({
          ...line,
          amount: part.toString(),
          amount_due: '0',
          amount_paid: '0',
          amount_included: part.toString(),
          collectable: false,
          settlement_source: 'plan_included',
          settlement_status: 'included',
          description: `${line.description} (included credit)`,
        }),
      },
    ])
  }
  return lines.map((line, i) => ({ ...line, entry_id: `${invoiceId}:${String(i + 1).padStart(3, '0')}` }))
}

function firstStart(sub: SubscriptionView): number {
  return Math.min(...sub.phases.map((p) => p.startAt))
}

/**
 * The first billing cycle of the subscription that starts at or after `from` (a cycle end: the
 * cursor), laid by the catalog's cycles (cycleAt) in the phase that holds it; a phase's end cuts
 * its last cycle, and so does the subscription's cancelAt. undefined when no cycle is left.
 */
export function cycleFrom(sub: SubscriptionView, from: number): Cycle | undefined {
  if (sub.cancelAt !== null && from >= sub.cancelAt) return undefined
  const phases = [...sub.phases].sort((a, b) => a.startAt - b.startAt)
  for (const phase of phases) {
    if (phase.endsAt !== null && phase.endsAt <= from) continue
    const at = Math.max(from, phase.startAt)
    const c = cycleAt(at, phase.startAt, phase.endsAt, phase.cadence, sub.timezone)
    const start = Math.max(c.start, from)
    const end = sub.cancelAt === null ? c.end : Math.min(c.end, sub.cancelAt)
    if (end <= start) return undefined
    return { phase, start, end }
  }
  return undefined
}

/** Whether a cycle of the subscription ends where this one starts (so, in advance, it billed this one's fees). */
function hasPredecessor(sub: SubscriptionView, cycle: Cycle): boolean {
  const t = cycle.start - 1
  return sub.phases.some((p) => p.startAt <= t && (p.endsAt === null || t < p.endsAt))
}

function featuresOf(catalog: StoredCatalog): Map<string, Feature> {
  return new Map(catalog.features.map((f) => [f.slug, f]))
}

/** The plan features of the phase's plan version, in their order. */
function planFeatures(catalog: StoredCatalog, phase: PhaseView): StoredPlanFeature[] {
  const pv = catalog.planVersions.find((v) => v.id === phase.planVersionId)
  if (!pv) throw new Error(`plan version ${phase.planVersionId} of phase ${phase.id} is not in the catalog`)
  return [...pv.features].sort((a, b) => a.order - b.order)
}

function meteredOf(fpv: StoredPlanFeature, features: Map<string, Feature>): MeteredFeature & { fpv: StoredPlanFeature; billed: Omit<BilledUsage, 'quantity'> } {
  const meter = features.get(fpv.featureSlug)?.meterConfig
  const eventSlug = meter?.eventSlug || fpv.featureSlug
  const aggregationMethod = meter?.aggregationMethod ?? 'sum'
  return {
    featureSlug: fpv.featureSlug,
    eventSlug,
    aggregationMethod,
    fpv,
    billed: { featureSlug: fpv.featureSlug, featurePlanVersionId: fpv.id, featureType: fpv.featureType, config: fpv.config, eventSlug, aggregationMethod },
  }
}

/** The fee lines (flat, package, tier features) of a cycle, priced on its phase's item units. */
function feeCharges(catalog: StoredCatalog, cycle: Cycle, trial: boolean, suffix: string): Charge[] {
  const units = new Map(cycle.phase.items.map((item) => [item.featurePlanVersionId, item.units]))
  return planFeatures(catalog, cycle.phase)
    .filter((f) => f.featureType !== 'usage')
    .map((f) => {
      const quantity = toQuantityUnits(decimalOf(units.get(f.id) ?? f.defaultQuantity))
      const rated = rate({ featureType: f.featureType, config: f.config, quantity })
      return {
        kind: 'fee' as const,
        featureSlug: f.featureSlug,
        cycleStartAt: cycle.start,
        quantity,
        amount: rated.amount,
        trial,
        description:
          describe(
            f,
            rated.lines.map((l) => l.description),
          ) + suffix,
      }
    })
}

function describe(f: StoredPlanFeature, parts: string[]): string {
  return parts.length === 0 ? `${f.featureSlug}: 0 ${f.unitOfMeasure}` : `${f.featureSlug}: ${parts.join('; ')}`
}

/** A non-negative JS number (item units) as decimal text, at most 8 fractional digits. */
function decimalOf(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '0'
  return n.toFixed(8).replace(/\.?0+$/, '')
}

/**
 * Settles lines from a list of coverers, in order: each covers the `eligible` lines' due amounts,
 * line by line, until its amount is spent. A line covered in part is split in two: the covered
 * part (as `settle` makes it; it keeps the quantity) and the part still due (quantity 0,
 * "(continued)"). Only positive due amounts are covered.
 */
function cover(
  lines: StoredLine[],
  eligible: (status: StoredLine['settlement_status'], line: StoredLine) => boolean,
  coverers: { amount: bigint; settle: (line: StoredLine, part: bigint) => StoredLine }[],
): StoredLine[] {
  const out: StoredLine[] = []
  let k = 0
  let left = coverers[0]?.amount ?? 0n
  for (const line of lines) {
    let rest: StoredLine | undefined = line
    while (rest && k < coverers.length && eligible(rest.settlement_status, rest) && BigInt(rest.amount_due) > 0n) {
      if (left === 0n) {
        k++
        left = coverers[k]?.amount ?? 0n
        continue
      }
      const due = BigInt(rest.amount_due)
      const part = due < left ? due : left
      left -= part
      out.push(coverers[k]!.settle(rest, part))
      const remaining = (due - part).toString()
      rest = part === due ? undefined : { ...rest, quantity: '0', amount: remaining, amount_due: remaining, description: `${line.description} (continued)` }
    }
    if (rest) out.push(rest)
  }
  return out
}

/** What settled a line, from the wallet's allocation (src/wallet: cash, or a credit by its source). */
function settlementSourceOf(a: WalletAllocation): SettlementSource {
  return a.creditId === null ? 'cash_wallet' : walletCreditSource(a.source)
}

/** The invoice's amounts: the exact sums of its lines'. */
function totals(lines: StoredLine[]): Pick<StoredInvoice, 'gross_amount' | 'amount_due' | 'amount_paid' | 'amount_included'> {
  const sum = (field: 'amount' | 'amount_due' | 'amount_paid' | 'amount_included') => lines.reduce((s, l) => s + BigInt(l[field]), 0n).toString()
  return { gross_amount: sum('amount'), amount_due: sum('amount_due'), amount_paid: sum('amount_paid'), amount_included: sum('amount_included') }
}

/** The `invoice_lines` journal row of a line (every column but inserted_at; money as strings). */
export function journalRow(invoice: StoredInvoice, line: StoredLine, index: number) {
  return {
    project_id: invoice.project_id,
    movement_id: line.entry_id,
    invoice_id: invoice.id,
    customer_id: invoice.customer_id,
    subscription_id: invoice.subscription_id,
    statement_key: line.statement_key,
    line_no: index + 1,
    kind: line.kind,
    feature_slug: line.feature_slug,
    description: line.description,
    quantity: line.quantity,
    amount: line.amount,
    amount_due: line.amount_due,
    amount_paid: line.amount_paid,
    amount_included: line.amount_included,
    collectable: line.collectable ? 1 : 0,
    settlement_source: line.settlement_source,
    settlement_status: line.settlement_status,
    wallet_credit_id: line.wallet_credit_id,
    wallet_credit_source: line.wallet_credit_source,
    wallet_id: line.wallet_id,
    currency: line.currency,
    invoice_status: invoice.status,
    cycle_start_at: line.cycle_start_at,
    statement_start_at: invoice.statement_start_at,
    statement_end_at: invoice.statement_end_at,
    ts_ms: invoice.issue_date,
  }
}
