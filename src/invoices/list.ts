import { failure, success, type Result } from '../kernel/errors.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { scanMasters } from '../infra/redis/scan.js'
import { toInvoice, type Invoice } from './answers.js'
import { INVOICE_PATTERN, INVOICE_REINDEX_KEY, invoiceOfKey } from './keys.js'
import { addToIndexes, parseIndexMember, readHeaders, readIndex } from './redis.js'
import type { InvoiceListQuery } from './types.js'

/**
 * POST /v1/invoices/list (README.md, "Listing"): the invoices of a project from its invoice
 * index in Redis (where invoices and their status live; ClickHouse gets their lines only once the
 * journal is drained), newest first, filtered, a page at a time.
 */

/** Index members examined per request at most: a rare filter answers a short page with a cursor instead of reading the whole index. */
export const MAX_EXAMINED = 1000

export interface InvoicePage {
  invoices: Invoice[]
  /** Where the next page starts; null when nothing is left. */
  nextCursor: string | null
}

const encodeCursor = (member: string) => Buffer.from(member, 'utf8').toString('base64url')

/** The index member a cursor names; undefined for anything this service did not hand out. */
function decodeCursor(cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined
  const member = Buffer.from(cursor, 'base64url').toString('utf8')
  return parseIndexMember(member) ? member : undefined
}

export async function listInvoices(redis: RedisClient, projectId: string, q: InvoiceListQuery): Promise<Result<InvoicePage>> {
  let before: string | undefined
  if (q.cursor !== undefined) {
    before = decodeCursor(q.cursor)
    if (before === undefined) return badRequest('$.cursor', 'invalid_cursor', 'The cursor is not one this service handed out (nextCursor of an earlier page).')
  }
  if (q.statementFrom !== undefined && q.statementTo !== undefined && q.statementTo <= q.statementFrom) {
    return badRequest('$.statementTo', 'invalid_period', 'statementTo must be after statementFrom.')
  }
  const invoices: Invoice[] = []
  let examined = 0
  for (;;) {
    const count = Math.min(Math.max(2 * q.limit, 50), MAX_EXAMINED - examined)
    const batch = await readIndex(redis, projectId, q.customerId, before, count)
    const headers = await headersInPeriod(redis, projectId, batch, q)
    for (const [i, member] of batch.entries()) {
      examined++
      before = member
      const header = headers.get(member)
      if (header && (q.status === undefined || header.status === q.status)) invoices.push(toInvoice(header))
      if (invoices.length === q.limit) return success({ invoices, nextCursor: await cursorAfter(redis, projectId, q, member, i < batch.length - 1) })
    }
    // A short batch is the end of the index.
    if (batch.length < count) return success({ invoices, nextCursor: null })
    if (examined >= MAX_EXAMINED) return success({ invoices, nextCursor: await cursorAfter(redis, projectId, q, before!, false) })
  }
}

/** The headers of the members whose cycle starts in the period (read from the member itself), by member. */
async function headersInPeriod(redis: RedisClient, projectId: string, batch: string[], q: InvoiceListQuery) {
  const inPeriod = batch.flatMap((member) => {
    const parsed = parseIndexMember(member)
    if (!parsed) return []
    const start = parsed.statementStartAt
    return start >= (q.statementFrom ?? 0) && (q.statementTo === undefined || start < q.statementTo) ? [{ member, invoiceId: parsed.invoiceId }] : []
  })
  const headers = await readHeaders(
    redis,
    projectId,
    inPeriod.map((m) => m.invoiceId),
  )
  return new Map(inPeriod.map((m, k) => [m.member, headers[k]]))
}

/** The cursor after `member`, or null when the index has nothing older (known when more of the batch was left). */
async function cursorAfter(redis: RedisClient, projectId: string, q: InvoiceListQuery, member: string, more: boolean): Promise<string | null> {
  if (more) return encodeCursor(member)
  const next = await readIndex(redis, projectId, q.customerId, member, 1)
  return next.length > 0 ? encodeCursor(member) : null
}

function badRequest(path: string, reason: string, message: string) {
  return failure('invalid', reason, message, { issues: [{ path, message }] })
}

/**
 * Adds every invoice drafted before the invoice indexes existed (by an older version of the
 * draft script) to them, once per Redis: SCANs every master for invoice hashes (two ZADDs each,
 * idempotent), then sets INVOICE_REINDEX_KEY. Invoices drafted since are indexed by the draft
 * script itself. Returns how many invoices were added (0 once done).
 */
export async function reindexOnce(redis: RedisClient, now: number): Promise<number> {
  if ((await redis.exists(INVOICE_REINDEX_KEY)) === 1) return 0
  let added = 0
  for (const key of await scanMasters(redis, [INVOICE_PATTERN])) {
    const found = invoiceOfKey(key)
    if (found && (await addToIndexes(redis, found.projectId, found.invoiceId))) added++
  }
  await redis.set(INVOICE_REINDEX_KEY, String(now))
  return added
}
