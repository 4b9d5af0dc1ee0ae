import { Type, type Static } from '@sinclair/typebox'
import { customerKey } from '../catalog/keys.js'
import type { ConfigIssue } from '../catalog/types.js'
import { Amount, EpochMs, strictObject } from '../kernel/schema.js'
import { parseAmount } from '../kernel/money.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { walletKeys } from './keys.js'
import { CreditSourceSchema, DEFAULT_CREDIT_PRIORITY, DEFAULT_CURRENCY, WalletCurrencySchema, creditFingerprint } from './types.js'

/**
 * Credits in the config document (`credits[]` of POST /v1/config/apply, src/wallet/README.md
 * "Credits in the config document"): each is granted once, by its `id`, after the catalog.
 */
export const CreditDocInput = strictObject(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 36,
      pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]*$',
      description: 'Names the credit: it is granted once; the same id with other content is a slug_conflict.',
    }),
    customerId: Type.String({ minLength: 1, maxLength: 36, description: 'A customer of the document or of the catalog.' }),
    amount: Amount,
    currency: Type.Optional(WalletCurrencySchema),
    source: Type.Optional(CreditSourceSchema),
    priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: 'Higher is consumed first; default 50.' })),
    expiresAt: Type.Optional(EpochMs),
  },
  { $id: 'CreditInput', description: 'A wallet credit granted to a customer (default source promo).' },
)
export type CreditDoc = Static<typeof CreditDocInput>

/** The idempotency key a document credit is granted with. */
export const documentCreditKey = (id: string) => `config:${id}`

export interface CheckedCredit {
  doc: CreditDoc
  amount: bigint
  /** Already granted with this content. */
  unchanged: boolean
}

/**
 * Checks a document's credits against what is stored, with their JSON paths: an id used twice
 * or already granted with other content (slug_conflict), a customer neither in the document nor
 * in the catalog (unresolved_reference), an expiry not in the future (invalid_config).
 */
export async function checkDocumentCredits(
  redis: RedisClient,
  projectId: string,
  credits: CreditDoc[],
  documentCustomers: ReadonlySet<string>,
  now: number,
): Promise<{ issues: ConfigIssue[]; checked: CheckedCredit[] }> {
  const issues: ConfigIssue[] = []
  const pipeline = redis.pipeline()
  for (const c of credits) {
    pipeline.hmget(walletKeys(projectId, c.customerId).wallet, `g:${documentCreditKey(c.id)}`, 'cur')
    pipeline.hexists(customerKey(projectId, c.customerId), 'doc')
  }
  const replies = credits.length === 0 ? [] : ((await pipeline.exec()) ?? [])
  const seen = new Map<string, number>()
  /** Each customer's wallet currency, as stored or as the document's first credit sets it. */
  const currencies = new Map<string, string>()
  const checked: CheckedCredit[] = []
  credits.forEach((c, i) => {
    const at = `$.credits[${i}]`
    const first = seen.get(c.id)
    if (first !== undefined) issues.push({ path: `${at}.id`, message: `credit ${c.id} is already defined at $.credits[${first}]`, kind: 'slug_conflict' })
    else seen.set(c.id, i)
    const exists = replies[2 * i + 1]?.[1] === 1
    if (!documentCustomers.has(c.customerId) && !exists) {
      issues.push({ path: `${at}.customerId`, message: `customer ${c.customerId} is neither in the document nor in the catalog`, kind: 'unresolved_reference' })
    }
    if (c.expiresAt !== undefined && c.expiresAt <= now) issues.push({ path: `${at}.expiresAt`, message: 'must be in the future', kind: 'invalid_config' })
    const amount = parseAmount(c.amount)!
    if (amount <= 0n) issues.push({ path: `${at}.amount`, message: 'must be greater than 0', kind: 'invalid_config' })
    const [record, walletCurrency] = (replies[2 * i]?.[1] ?? [null, null]) as [string | null, string | null]
    const currency = c.currency ?? DEFAULT_CURRENCY
    const otherCurrency = walletCurrency || currencies.get(c.customerId)
    if (otherCurrency && otherCurrency !== currency)
      issues.push({ path: `${at}.currency`, message: `the wallet of ${c.customerId} is in ${otherCurrency}`, kind: 'invalid_config' })
    if (!currencies.has(c.customerId)) currencies.set(c.customerId, walletCurrency || currency)
    const fingerprint = creditFingerprint(amount, currency, c.source ?? 'promo', c.priority ?? DEFAULT_CREDIT_PRIORITY, c.expiresAt ?? 0)
    const stored = typeof record === 'string' ? record.slice(record.indexOf('|') + 1) : undefined
    if (stored !== undefined && stored !== fingerprint) {
      issues.push({ path: at, message: `credit ${c.id} was granted with other content; credits never change: grant a new one`, kind: 'slug_conflict' })
    }
    checked.push({ doc: c, amount, unchanged: stored === fingerprint })
  })
  return { issues, checked }
}
