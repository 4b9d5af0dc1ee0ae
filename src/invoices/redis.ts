import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { invoiceKey, journalKey, subscriptionBillingKey } from './keys.js'
import type { BilledCycle, InvoiceStatus, StoredInvoice, StoredLine } from './types.js'

/** Storage adapter of invoices (README, "Storage"): one query per function, one round trip each. */
const scripts = {
  draft: new Script('draftInvoice-2'),
  finalize: new Script('finalizeInvoice-3'),
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

/** Creates the draft unless the invoice exists (lua/draftInvoice-2.lua). */
export async function draftInvoice(redis: RedisClient, a: DraftArgs): Promise<DraftResult> {
  const keys = [invoiceKey(a.projectId, a.invoice.id), subscriptionBillingKey(a.projectId, a.subscriptionId)]
  const args: string[] = [
    a.rev,
    JSON.stringify(a.invoice),
    JSON.stringify(a.lines),
    a.dueTotal.toString(),
    `billed:${a.billed.cycleStartAt}`,
    JSON.stringify(a.billed),
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
