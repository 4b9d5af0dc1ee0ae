import { Type, type Static } from '@sinclair/typebox'

/** The invoice answers (spec 2.5), named Invoice, InvoiceLine, InvoiceStatus, SettlementSource and SettlementStatus in OpenAPI. */

const Ledger = (description: string) =>
  Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]+$' })], {
    description: `${description} Integer at ledger scale 8 (one currency unit = 100000000); a string of digits past 2^53 − 1, so it is never rounded.`,
  })
const Ms = (description: string) => Type.Integer({ minimum: 0, description: `${description} Epoch ms.` })

export const InvoiceStatusSchema = Type.Union(
  ['unpaid', 'paid', 'waiting', 'void', 'draft', 'failed'].map((s) => Type.Literal(s)),
  {
    $id: 'InvoiceStatus',
    description: 'unpaid: something is due from the payment provider; paid: wallet credits (or nothing due) settled it; draft: being closed.',
  },
)
export const SettlementSourceSchema = Type.Union(
  ['provider', 'credit_line', 'cash_wallet', 'plan_included', 'trial', 'promo', 'manual'].map((s) => Type.Literal(s)),
  {
    $id: 'SettlementSource',
    description: "What settles the line: the payment provider, the wallet (cash or a credit of the given source), the plan's included credit, or the trial.",
  },
)
export const SettlementStatusSchema = Type.Union(
  ['due', 'paid', 'included'].map((s) => Type.Literal(s)),
  {
    $id: 'SettlementStatus',
    description: 'due: to be charged by the provider; paid: settled by a wallet credit or cash; included: covered by the plan (trial, included credit).',
  },
)

/** Spec 2.5 Invoice. */
export const InvoiceSchema = Type.Object(
  {
    id: Type.String({ description: 'inv_ and 24 hex digits, derived from (project, customer, subscription, cycle start).' }),
    project_id: Type.String(),
    subscription_id: Type.String(),
    customer_id: Type.String(),
    status: InvoiceStatusSchema,
    currency: Type.String({ description: 'ISO 4217 code of the plan version, e.g. USD.' }),
    statement_key: Type.String({ description: '<subscriptionId>:<cycle start, ISO 8601>: the billing cycle the invoice closes.' }),
    statement_start_at: Ms('Start of the billing cycle (inclusive).'),
    statement_end_at: Ms('End of the billing cycle (exclusive).'),
    due_at: Ms('When payment is due (the issue date: collected automatically).'),
    past_due_at: Ms("due_at plus the plan version's gracePeriod days."),
    issue_date: Ms('When the cycle was closed and the invoice issued.'),
    sent_at: Ms('When the invoice was handed to the payment provider; 0 until then.'),
    paid_at: Ms('When it was paid; 0 while unpaid.'),
    gross_amount: Ledger("Sum of the lines' amounts."),
    amount_due: Ledger('What the payment provider is to charge.'),
    amount_paid: Ledger('What wallet credits and cash paid.'),
    amount_included: Ledger("What the trial and the plan's included credit covered."),
  },
  { $id: 'Invoice', additionalProperties: false, description: 'An invoice: one billing cycle of a subscription.' },
)

/** Spec 2.5 Line. */
export const LineSchema = Type.Object(
  {
    entry_id: Type.String({ description: '<invoiceId>:<line number, 3 digits>.' }),
    statement_key: Type.String(),
    kind: Type.Union([Type.Literal('fee'), Type.Literal('usage'), Type.Literal('adjustment')], {
      description:
        'fee: a flat, package or tier feature priced on the subscribed units; usage: a metered feature; adjustment: late usage of an earlier cycle (the rated difference).',
    }),
    description: Type.String(),
    quantity: Type.Number({
      description: "Units the line prices (seats, metered usage, or an adjustment's difference); 0 on the continued part of a split line.",
    }),
    amount: Ledger("The line's amount (amount_due + amount_paid + amount_included)."),
    amount_due: Ledger('Part left to the payment provider.'),
    amount_paid: Ledger('Part paid from the wallet.'),
    amount_included: Ledger("Part covered by the trial or the plan's included credit."),
    collectable: Type.Boolean({ description: 'The payment provider collects this line (settlement_status due).' }),
    settlement_source: SettlementSourceSchema,
    settlement_status: SettlementStatusSchema,
    wallet_credit_id: Type.String({ description: 'The wallet credit that paid the line; empty when none (cash or not from the wallet).' }),
    wallet_credit_source: Type.String({ description: 'Source of that credit (promo, …) or cash; empty when not from the wallet.' }),
    wallet_id: Type.String({ description: "The wallet that paid the line (the customer's); empty when not from the wallet." }),
    currency: Type.String(),
    created_at: Type.String({ description: 'ISO 8601 date-time (UTC).' }),
  },
  { $id: 'InvoiceLine', additionalProperties: false, description: 'An invoice line.' },
)

export const InvoiceGetResponseSchema = Type.Object(
  {
    invoice: InvoiceSchema,
    lines: Type.Array(LineSchema),
  },
  { additionalProperties: false, description: 'The invoice header with its lines. Amounts at ledger scale 8.' },
)
export type InvoiceGetResponse = Static<typeof InvoiceGetResponseSchema>
