import { Type, type Static } from '@sinclair/typebox'

/**
 * The invoice answers (spec 2.5), named Invoice, InvoiceLine, InvoiceStatus, SettlementSource,
 * SettlementStatus and WalletCreditSource in OpenAPI. Nothing is a placeholder (README.md,
 * "Shapes"): what has not happened or does not apply is null.
 */

const Ledger = (description: string) =>
  Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]+$' })], {
    description: `${description} Integer at ledger scale 8 (one currency unit = 100000000); a string of digits past 2^53 − 1, so it is never rounded.`,
  })
const Ms = (description: string) => Type.Integer({ minimum: 0, description: `${description} Epoch ms.` })
const NullableMs = (description: string) => Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: `${description} Epoch ms.` })
const NullableString = (description: string) => Type.Union([Type.String({ minLength: 1 }), Type.Null()], { description })

export const InvoiceStatusSchema = Type.Union(
  (['unpaid', 'paid', 'waiting', 'void', 'draft', 'failed'] as const).map((s) => Type.Literal(s)),
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
export const WalletCreditSourceSchema = Type.Union(
  (['promo', 'manual', 'trial'] as const).map((s) => Type.Literal(s)),
  {
    $id: 'WalletCreditSource',
    description: 'Source of the wallet credit that paid a line: promo, manual (granted by an operator: manual, refund and goodwill credits) or trial.',
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
    sent_at: NullableMs('When the invoice was handed to the payment provider; null until then (this version hands none over).'),
    paid_at: NullableMs('When it was paid; null while unpaid.'),
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
    wallet_credit_id: NullableString('The wallet credit that paid the line; null when no credit did (cash, or not from the wallet).'),
    wallet_credit_source: Type.Union([WalletCreditSourceSchema, Type.Null()], {
      description: 'Source of that credit; null when no credit paid the line (cash: settlement_source cash_wallet).',
    }),
    wallet_id: NullableString("The wallet that paid the line (the customer's); null when not paid from the wallet."),
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

export const InvoiceListRequestSchema = Type.Object(
  {
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 36, description: "Only this customer's invoices." })),
    status: Type.Optional(InvoiceStatusSchema),
    statementFrom: Type.Optional(
      Type.Integer({ minimum: 0, description: 'Only invoices whose cycle starts at or after this (statement_start_at ≥ statementFrom), epoch ms.' }),
    ),
    statementTo: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Only invoices whose cycle starts before this (statement_start_at < statementTo), epoch ms.' }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Invoices per page, at most; default 20.' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page: the page after it.' })),
  },
  { additionalProperties: false, description: 'Filters (all must hold) and the page. An absent filter does not filter.' },
)

export const InvoiceListResponseSchema = Type.Object(
  {
    invoices: Type.Array(InvoiceSchema, {
      description:
        'Newest first: by issue_date, then statement_start_at, then id, all descending. A page may hold fewer than `limit` invoices with a ' +
        'nextCursor when filters skipped many (at most 1,000 are examined per request).',
    }),
    nextCursor: Type.Union([Type.String(), Type.Null()], {
      description:
        'Pass it as `cursor` for the next page; null when no invoice is left. A cursor is a position in the order: no invoice that ' +
        'existed when paging began is skipped or listed twice, and invoices issued meanwhile (the newest) sort before the first page.',
    }),
  },
  { additionalProperties: false, description: "The project's invoices (headers; GET /v1/invoices/get/{invoiceId} has the lines)." },
)
export type InvoiceListResponse = Static<typeof InvoiceListResponseSchema>
