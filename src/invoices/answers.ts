import { ledgerJson } from '../kernel/money.js'
import type { StoredInvoice, StoredLine, WalletCreditSource } from './types.js'

/**
 * Invoices and lines as the routes answer them (spec 2.5; README.md, "Shapes"): ledger amounts
 * as integers, and no placeholders. What is stored keeps `0` for "not yet" (`sent_at`,
 * `paid_at`) and `""` for "not from the wallet" (and the journal's rows in ClickHouse keep them,
 * as strings and numbers); the answer says null.
 */

/** The Invoice of spec 2.5: ledger amounts as integers, null for what has not happened. */
export interface Invoice extends Omit<StoredInvoice, 'gross_amount' | 'amount_due' | 'amount_paid' | 'amount_included' | 'sent_at' | 'paid_at'> {
  gross_amount: number | string
  amount_due: number | string
  amount_paid: number | string
  amount_included: number | string
  sent_at: number | null
  paid_at: number | null
}

/** The Line of spec 2.5. */
export interface Line
  extends Omit<
    StoredLine,
    | 'quantity'
    | 'amount'
    | 'amount_due'
    | 'amount_paid'
    | 'amount_included'
    | 'feature_slug'
    | 'cycle_start_at'
    | 'wallet_credit_id'
    | 'wallet_credit_source'
    | 'wallet_id'
  > {
  quantity: number
  amount: number | string
  amount_due: number | string
  amount_paid: number | string
  amount_included: number | string
  wallet_credit_id: string | null
  wallet_credit_source: WalletCreditSource | null
  wallet_id: string | null
}

/** A ledger amount (decimal integer text) as the spec's integer: a number while exact, else a string of digits (ledgerJson). */
function ledgerNumber(text: string): number | string {
  return ledgerJson(BigInt(text))
}

export function toInvoice(i: StoredInvoice): Invoice {
  return {
    ...i,
    gross_amount: ledgerNumber(i.gross_amount),
    amount_due: ledgerNumber(i.amount_due),
    amount_paid: ledgerNumber(i.amount_paid),
    amount_included: ledgerNumber(i.amount_included),
    sent_at: i.sent_at === 0 ? null : i.sent_at,
    paid_at: i.paid_at === 0 ? null : i.paid_at,
  }
}

/**
 * The source of the wallet credit that paid a line, in the set the peer API answers: `promo`,
 * `manual` (credits an operator granted: manual, refund, goodwill), `trial`. Cash
 * (`cash_wallet`, no credit id) is no credit: null.
 */
function creditSourceOf(l: StoredLine): WalletCreditSource | null {
  return l.wallet_credit_id === '' ? null : walletCreditSource(l.wallet_credit_source)
}

/** A wallet credit's source (src/wallet) in the answered set: operator grants are `manual`, the rest `promo`. */
export function walletCreditSource(source: string): WalletCreditSource {
  switch (source) {
    case 'manual':
    case 'refund':
    case 'goodwill':
      return 'manual'
    case 'trial':
      return 'trial'
    default:
      return 'promo'
  }
}

export function toLine(l: StoredLine): Line {
  const { feature_slug: _f, cycle_start_at: _c, ...rest } = l
  return {
    ...rest,
    quantity: Number(l.quantity),
    amount: ledgerNumber(l.amount),
    amount_due: ledgerNumber(l.amount_due),
    amount_paid: ledgerNumber(l.amount_paid),
    amount_included: ledgerNumber(l.amount_included),
    wallet_credit_id: l.wallet_credit_id === '' ? null : l.wallet_credit_id,
    wallet_credit_source: creditSourceOf(l),
    wallet_id: l.wallet_id === '' ? null : l.wallet_id,
  }
}
