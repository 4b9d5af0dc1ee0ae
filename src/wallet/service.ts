import type { Clock } from '../kernel/clock.js'
import { failure, success, type Failure, type Result } from '../kernel/errors.js'
import { formatUnits, ledgerJson } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { configFailure } from '../catalog/issues.js'
import { checkDocumentCredits, documentCreditKey, type CreditDoc } from './document.js'
import { walletFailure } from './errors.js'
import * as store from './redis.js'
import {
  CURRENCIES,
  DEFAULT_CREDIT_PRIORITY,
  DEFAULT_CURRENCY,
  creditFingerprint,
  type Amount,
  type CreditSource,
  type InvoiceApplication,
  type WalletBalance,
  type WalletCurrency,
} from './types.js'

export interface GrantInput {
  customerId: string
  amount: bigint
  currency?: WalletCurrency
  source: CreditSource
  expiresAt?: number
  priority?: number
  idempotencyKey: string
}

export interface TopUpInput {
  customerId: string
  amount: bigint
  currency?: WalletCurrency
  idempotencyKey: string
}

/**
 * Customers' wallets (src/wallet/README.md): cash and credits at ledger scale 8, consumed credits
 * first (priority, then earliest expiry), credits expiring lazily; every movement journaled in the
 * same script. Runs reserve from here (src/runs), invoices are paid from here (applyToInvoice).
 */
export class WalletService {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
  ) {}

  /** GET /v1/wallet/balance (spec 2.6, 4.13). */
  async balance(projectId: string, customerId: string): Promise<Result<WalletBalance>> {
    const now = this.clock()
    return success(toBalance(await store.getWallet(this.redis, projectId, customerId, now), now))
  }

  /** POST /v1/wallet/top-up: cash in, once per idempotency key. */
  async topUp(projectId: string, input: TopUpInput): Promise<Result<WalletBalance & { replayed: boolean }>> {
    const currency = input.currency ?? DEFAULT_CURRENCY
    if (input.amount <= 0n) return notPositive()
    const fingerprint = `${input.amount}|${currency}`
    const now = this.clock()
    const snapshot = await store.topUp(this.redis, projectId, input.customerId, now, input.idempotencyKey, currency, input.amount, fingerprint)
    if (snapshot.status !== 'ok' && snapshot.status !== 'replayed') return walletFailure(snapshot.status, { walletCurrency: snapshot.currency, currency })
    return success({ ...toBalance(snapshot, now), replayed: snapshot.status === 'replayed' })
  }

  /** POST /v1/wallet/credits/grant: a credit in, once per idempotency key. */
  async grant(projectId: string, input: GrantInput): Promise<Result<WalletBalance & { creditId: string; replayed: boolean }>> {
    const now = this.clock()
    const currency = input.currency ?? DEFAULT_CURRENCY
    if (input.amount <= 0n) return notPositive()
    if (input.expiresAt !== undefined && input.expiresAt <= now) {
      return failure('invalid', 'invalid_request', 'expiresAt must be in the future.', { issues: [{ path: '$.expiresAt', message: 'must be after now' }] })
    }
    const priority = input.priority ?? DEFAULT_CREDIT_PRIORITY
    const expiresAtMs = input.expiresAt ?? 0
    const fingerprint = creditFingerprint(input.amount, currency, input.source, priority, expiresAtMs)
    const { creditId, wallet } = await store.grantCredit(this.redis, projectId, input.customerId, now, {
      idempotencyKey: input.idempotencyKey,
      currency,
      amount: input.amount,
      source: input.source,
      priority,
      expiresAtMs,
      fingerprint,
    })
    if (wallet.status !== 'ok' && wallet.status !== 'replayed') return walletFailure(wallet.status, { walletCurrency: wallet.currency, currency })
    return success({ ...toBalance(wallet, now), creditId, replayed: wallet.status === 'replayed' })
  }

  /**
   * The `credits` of a config document (POST /v1/config/apply): checked first (with the
   * document's JSON paths, reported like the catalog's problems), then the catalog is applied
   * (`applyCatalog`), then each credit is granted once by its id. The answer is the catalog's with
   * `summary.credits`. Credits are granted after the catalog (a crash between leaves them to the
   * next apply of the document, which is idempotent).
   */
  async applyDocumentCredits<T extends { dryRun: boolean; summary: object }>(
    projectId: string,
    credits: CreditDoc[],
    documentCustomers: ReadonlySet<string>,
    dryRun: boolean,
    applyCatalog: () => Promise<Result<T>>,
  ): Promise<Result<T & { summary: { credits: { created: string[]; updated: string[]; unchanged: string[] } } }>> {
    const { issues, checked } = await checkDocumentCredits(this.redis, projectId, credits, documentCustomers, this.clock())
    if (issues.length > 0) return configFailure(issues)
    const applied = await applyCatalog()
    if (!applied.ok) return applied
    const lists = {
      created: checked.filter((c) => !c.unchanged).map((c) => c.doc.id),
      updated: [],
      unchanged: checked.filter((c) => c.unchanged).map((c) => c.doc.id),
    }
    if (!dryRun) {
      for (const { doc, amount, unchanged } of checked) {
        if (unchanged) continue
        const granted = await this.grant(projectId, {
          customerId: doc.customerId,
          amount,
          source: doc.source ?? 'promo',
          idempotencyKey: documentCreditKey(doc.id),
          ...(doc.currency === undefined ? {} : { currency: doc.currency }),
          ...(doc.priority === undefined ? {} : { priority: doc.priority }),
          ...(doc.expiresAt === undefined ? {} : { expiresAt: doc.expiresAt }),
        })
        if (!granted.ok) return granted
      }
    }
    return success({ ...applied.value, summary: { ...applied.value.summary, credits: lists } })
  }

  /**
   * For invoices: pays up to `amountLedger` (scale 8) of an invoice from the wallet: live credits
   * in the wallet's order (priority, then earliest expiry), then cash. Once per invoice: a rerun
   * answers the first allocations and moves nothing. A wallet in another currency, or an empty
   * one, pays nothing (`remainingLedger` = the amount). Journaled as credit_use / cash_use.
   */
  async applyToInvoice(
    projectId: string,
    customerId: string,
    invoiceId: string,
    amountLedger: bigint,
    currency: string,
    now: number,
  ): Promise<InvoiceApplication> {
    if (amountLedger < 0n) throw new RangeError('amountLedger must not be negative')
    const applied = await store.applyToInvoice(this.redis, projectId, customerId, now, invoiceId, currency, amountLedger)
    return {
      allocations: applied.allocations.map((a) => ({ creditId: a.creditId === '' ? null : a.creditId, source: a.source, amountLedger: a.amount })),
      remainingLedger: applied.remaining,
    }
  }
}

function notPositive(): Failure {
  return failure('invalid', 'invalid_request', 'amount must be greater than 0.', { issues: [{ path: '$.amount', message: 'must be greater than 0' }] })
}

/** Spec 2.6 Amount of a ledger integer (scale 8). */
export function toAmount(ledger: bigint, currency: string): Amount {
  return {
    ledger_amount: ledgerJson(ledger),
    amount: formatUnits(ledger),
    currency,
    display_amount: displayAmount(ledger, currency),
  }
}

/** "$1,234.50": the currency's minor digits at least, more when the amount has them. */
export function displayAmount(ledger: bigint, currency: string): string {
  const known = CURRENCIES[currency as WalletCurrency]
  const symbol = known?.symbol ?? `${currency} `
  const exponent = known?.exponent ?? 2
  const negative = ledger < 0n
  const [digits = '0', exact = ''] = formatUnits(negative ? -ledger : ledger).split('.')
  const whole = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  const fraction = exact.padEnd(exponent, '0')
  const text = fraction === '' ? `${symbol}${whole}` : `${symbol}${whole}.${fraction}`
  return negative ? `-${text}` : text
}

function iso(ms: number): string {
  return new Date(ms).toISOString()
}

/** The balance a wallet script answered, read or moved at `asOf` (the now it ran with). */
function toBalance(w: store.WalletSnapshot, asOf: number): WalletBalance {
  const currency = w.currency === '' ? DEFAULT_CURRENCY : w.currency
  return {
    currency,
    available: toAmount(w.available, currency),
    held: toAmount(w.held, currency),
    credits: w.credits.map((c) => ({
      id: c.id,
      source: c.source as CreditSource,
      issued: toAmount(c.issued, currency),
      available: toAmount(c.available, currency),
      created_at: iso(c.createdAtMs),
      expires_at: c.expiresAtMs === 0 ? null : iso(c.expiresAtMs),
      priority: c.priority,
    })),
    asOf,
  }
}
