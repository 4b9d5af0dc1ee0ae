import { Type, type Static } from '@sinclair/typebox'
import type { Currency } from '../catalog/schemas.js'

/** Currencies a wallet and a run may hold: the catalog's (src/catalog/pricing.ts), with their exponents and symbols. */
export { CURRENCIES } from '../catalog/pricing.js'
export type WalletCurrency = Currency
export const WalletCurrencySchema = Type.Union([Type.Literal('USD'), Type.Literal('EUR')], { description: 'ISO 4217 currency code (USD, EUR: exponent 2).' })
export const DEFAULT_CURRENCY: WalletCurrency = 'USD'

/** Default priority of a granted credit (higher is consumed first). */
export const DEFAULT_CREDIT_PRIORITY = 50

/** What makes two grants with one idempotency key the same request. */
export function creditFingerprint(amount: bigint, currency: string, source: string, priority: number, expiresAtMs: number): string {
  return `${amount}|${currency}|${source}|${priority}|${expiresAtMs}`
}

/** Where a credit comes from. `promo` (the spec's value) and the others a seller grants by hand. */
export const CREDIT_SOURCES = ['promo', 'manual', 'refund', 'goodwill', 'trial'] as const
export type CreditSource = (typeof CREDIT_SOURCES)[number]
export const CreditSourceSchema = Type.Union(
  CREDIT_SOURCES.map((s) => Type.Literal(s)),
  {
    $id: 'CreditSource',
    description:
      'promo: a promotion; manual: granted by an operator; refund: money given back as credit; goodwill: a service credit; trial: credit of a trial.',
  },
)

/**
 * Spec 2.6 Amount. `ledger_amount` is the integer at ledger scale 8: a JSON number while it is
 * exact in IEEE doubles (≤ 2^53 − 1, about 90 million units of the currency), else the same
 * integer as a string of digits, so no client ever reads a rounded amount. `amount` is always exact.
 */
export const AmountSchema = Type.Object(
  {
    ledger_amount: Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]+$' })], {
      description: 'Integer at ledger scale 8 (1 currency unit = 100000000); a string of digits past 2^53 − 1.',
    }),
    amount: Type.String({ description: 'Decimal amount in the currency ("12.5").' }),
    currency: Type.String(),
    display_amount: Type.String({ description: 'For people: "$12.50".' }),
  },
  { $id: 'Money', description: 'An amount of money: exact at ledger scale 8, as a decimal, and for people (spec 2.6 Amount).' },
)
export type Amount = Static<typeof AmountSchema>

/** An ISO 8601 date-time in UTC with milliseconds, as Date.toISOString() writes it. */
const IsoDateTime = Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$', description: 'ISO 8601 date-time (UTC).' })

export const CreditSchema = Type.Object(
  {
    id: Type.String(),
    source: CreditSourceSchema,
    issued: AmountSchema,
    available: AmountSchema,
    created_at: IsoDateTime,
    expires_at: Type.Union([IsoDateTime, Type.Null()], { description: 'null: the credit never expires.' }),
    priority: Type.Integer({ description: 'Higher is consumed first (our addition).' }),
  },
  { $id: 'WalletCredit', description: 'A live credit of a wallet.' },
)
export type Credit = Static<typeof CreditSchema>

export const WalletBalanceSchema = Type.Object(
  {
    currency: Type.String(),
    available: AmountSchema,
    held: AmountSchema,
    credits: Type.Array(CreditSchema, { description: 'The live credits in the order they are consumed (priority, then earliest expiry).' }),
    asOf: Type.Integer({
      description:
        "Epoch ms: the moment the balance was read or moved, on the service's clock (the time the script ran with, which also expired the credits due by then). Our addition.",
    }),
  },
  { $id: 'WalletBalance', description: "A customer's wallet: what is available, what running runs hold, and the live credits." },
)
export type WalletBalance = Static<typeof WalletBalanceSchema>

/** One part of an invoice paid from the wallet (WalletService.applyToInvoice). */
export interface InvoiceAllocation {
  /** null: paid from cash. */
  creditId: string | null
  /** The credit's source, or `cash_wallet` for cash. */
  source: string
  amountLedger: bigint
}

export interface InvoiceApplication {
  allocations: InvoiceAllocation[]
  /** What the wallet could not pay. */
  remainingLedger: bigint
}
