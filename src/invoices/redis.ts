import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { customerInvoiceIndexKey, invoiceIndexKey, invoiceKey, journalKey, subscriptionBillingKey } from './keys.js'
import type { BilledCycle, InvoiceStatus, StoredInvoice, StoredLine } from './types.js'

/** Storage adapter of invoices (README, "Storage"): one query per function, one round trip each. */
const scripts = {
  draft: new Script('draftInvoice-4'),
  finalize: new Script('finalizeInvoice-3'),
}

/**
 * An invoice's member of the invoice indexes: `<issue_date>:<statement_start_at>:<invoiceId>`,
 * the numbers as 15 digits, so lexicographic order is (issue date, cycle start, id) and the
 * newest invoice sorts last. Immutable: both dates are fixed when the invoice is drafted.
 */
export function indexMember(invoice: Pick<StoredInvoice, 'id' | 'issue_date' | 'statement_start_at'>): string {
  return `${String(invoice.issue_date).padStart(15, '0')}:${String(invoice.statement_start_at).padStart(15, '0')}:${invoice.id}`
}

/** The parts of an index member; undefined for a string that is not one (a forged cursor). */
export function parseIndexMember(member: string): { issueDate: number; statementStartAt: number; invoiceId: string } | undefined {
  const m = /^([0-9]{15}):([0-9]{15}):(inv_[0-9a-f]{24})$/.exec(member)
  return m ? { issueDate: Number(m[1]), statementStartAt: Number(m[2]), invoiceId: m[3]! } : undefined
}

export interface StoredRecord {
  status: InvoiceStatus
  invoice: StoredInvoice
  lines: StoredLine[]
  /** What the wallet is asked to cover (ledger units). */
  dueTotal: bigint
}

function record(status: unknown, invoice: unknown, lines: unknown, dueTotal: unknown): StoredRecord {
  return {
    status: status as InvoiceStatus,
    invoice: JSON.parse(invoice as string) as StoredInvoice,
    lines: JSON.parse(lines as string) as StoredLine[],
    dueTotal: BigInt((dueTotal as string | null) ?? '0'),
  }
}

/** An invoice with its lines: one HMGET. undefined when the project has no such invoice. */
export async function readInvoice(redis: RedisClient, projectId: string, invoiceId: string): Promise<StoredRecord | undefined> {
  const [status, invoice, lines, dueTotal] = await redis.hmget(invoiceKey(projectId, invoiceId), 'status', 'invoice', 'lines', 'dueTotal')
  if (!status || !invoice || !lines) return undefined
  return record(status, invoice, lines, dueTotal)
}

export interface BillingState {
  /** End of the last cycle whose invoice is final; undefined before the first. */
  cursor: number | undefined
  rev: string
  billed: Map<number, BilledCycle>
}

/** A subscription's billing state: one HGETALL. */
export async function readBillingState(redis: RedisClient, projectId: string, subscriptionId: string): Promise<BillingState> {
  const hash = await redis.hgetall(subscriptionBillingKey(projectId, subscriptionId))
  const billed = new Map<number, BilledCycle>()
  for (const [field, value] of Object.entries(hash)) {
    if (field.startsWith('billed:')) billed.set(Number(field.slice(7)), JSON.parse(value) as BilledCycle)
  }
  return { cursor: hash.cursor === undefined ? undefined : Number(hash.cursor), rev: hash.rev ?? '0', billed }
}

export interface DraftArgs {
  projectId: string
  subscriptionId: string
  rev: string
  invoice: StoredInvoice
  lines: StoredLine[]
  dueTotal: bigint
  billed: BilledCycle
  /** Earlier cycles whose billed usage this draft moves (late usage billed now). */
  updates: BilledCycle[]
  /** Cycle starts whose billed records are past the late-usage window. */
  forget: number[]
}

export type DraftResult = { status: 'created' } | { status: 'exists'; record: StoredRecord } | { status: 'rev_changed' }

/** Creates the draft, and its members of the invoice indexes, unless the invoice exists (lua/draftInvoice-4.lua). */
export async function draftInvoice(redis: RedisClient, a: DraftArgs): Promise<DraftResult> {
  const keys = [
    invoiceKey(a.projectId, a.invoice.id),
    subscriptionBillingKey(a.projectId, a.subscriptionId),
    invoiceIndexKey(a.projectId),
    customerInvoiceIndexKey(a.projectId, a.invoice.customer_id),
  ]
  const args: string[] = [
    a.rev,
    JSON.stringify(a.invoice),
    JSON.stringify(a.lines),
    a.dueTotal.toString(),
    `billed:${a.billed.cycleStartAt}`,
    JSON.stringify(a.billed),
    indexMember(a.invoice),
    String(a.updates.length),
  ]
  for (const u of a.updates) args.push(`billed:${u.cycleStartAt}`, JSON.stringify(u))
  for (const start of a.forget) args.push(`billed:${start}`)
  const reply = await scripts.draft.run(redis, keys, args)
  if (reply[0] === 'created') return { status: 'created' }
  if (reply[0] === 'exists') return { status: 'exists', record: record(reply[1], reply[2], reply[3], reply[4]) }
  return { status: 'rev_changed' }
}

export interface FinalizeArgs {
  projectId: string
  subscriptionId: string
  status: InvoiceStatus
  invoice: StoredInvoice
  lines: StoredLine[]
  cycleEndAt: number
  /** `<table>\t<json row>` entries for the journal outbox. */
  journal: string[]
}

/** Settles a draft and journals its lines (lua/finalizeInvoice-3.lua). */
export async function finalizeInvoice(redis: RedisClient, a: FinalizeArgs): Promise<'finalized' | 'already_final' | 'invoice_not_found'> {
  const keys = [invoiceKey(a.projectId, a.invoice.id), subscriptionBillingKey(a.projectId, a.subscriptionId), journalKey(a.projectId)]
  const args = [a.status, JSON.stringify(a.invoice), JSON.stringify(a.lines), String(a.cycleEndAt), ...a.journal]
  return (await scripts.finalize.run(redis, keys, args)) as unknown as 'finalized' | 'already_final' | 'invoice_not_found'
}

/**
 * Index members from the newest down, strictly older than `before` (a member) when given: one
 * ZREVRANGEBYLEX of the project's index, or of the customer's with a customerId.
 */
export async function readIndex(
  redis: RedisClient,
  projectId: string,
  customerId: string | undefined,
  before: string | undefined,
  count: number,
): Promise<string[]> {
  const key = customerId === undefined ? invoiceIndexKey(projectId) : customerInvoiceIndexKey(projectId, customerId)
  return redis.zrevrangebylex(key, before === undefined ? '+' : `(${before}`, '-', 'LIMIT', 0, count)
}

/** The status and header of some invoices, in one pipeline (all in the project's slot); undefined for one that does not exist. */
export async function readHeaders(redis: RedisClient, projectId: string, invoiceIds: string[]): Promise<(StoredInvoice | undefined)[]> {
  if (invoiceIds.length === 0) return []
  const pipeline = redis.pipeline()
  for (const id of invoiceIds) pipeline.hmget(invoiceKey(projectId, id), 'status', 'invoice')
  const replies = (await pipeline.exec()) ?? []
  return replies.map(([err, value]) => {
    if (err) throw err
    const [status, invoice] = value as (string | null)[]
    return status && invoice ? { ...(JSON.parse(invoice) as StoredInvoice), status: status as InvoiceStatus } : undefined
  })
}

/** Adds an invoice drafted before the indexes existed to them (the one-time reindex): two ZADDs, both idempotent. */
export async function addToIndexes(redis: RedisClient, projectId: string, invoiceId: string): Promise<boolean> {
  const json = await redis.hget(invoiceKey(projectId, invoiceId), 'invoice')
  if (json === null) return false
  const invoice = JSON.parse(json) as StoredInvoice
  const member = indexMember(invoice)
  await Promise.all([redis.zadd(invoiceIndexKey(projectId), 0, member), redis.zadd(customerInvoiceIndexKey(projectId, invoice.customer_id), 0, member)])
  return true
}
