import { catalogKey } from '../catalog/keys.js'
import { PREFIX, projectOfTag, projectTag, splitKey } from '../infra/redis/keys.js'

/**
 * Every Redis key of invoices, built in one place. All carry the project's catalog hash tag
 * `{cat:<projectId>}` (src/catalog/keys.ts), like customers and wallets, so one script writes an
 * invoice, the billing state of its subscription and the project's journal outbox atomically,
 * unchanged on a Cluster.
 */
/** One invoice: a hash with `status`, `invoice` (JSON), `lines` (JSON), `dueTotal`, and `rated` (JSON: the usage quantities it rated). */
export function invoiceKey(projectId: string, invoiceId: string): string {
  return `${PREFIX}${projectTag(projectId)}:inv:${invoiceId}`
}

/**
 * The billing state of one subscription: a hash with `cursor` (the end of the last cycle whose
 * invoice is final), `rev` (bumped by every draft) and `billed:<cycleStartMs>` (JSON: what was
 * billed for that cycle's usage so far, so a later close can bill late events exactly).
 */
export function subscriptionBillingKey(projectId: string, subscriptionId: string): string {
  return `${PREFIX}${projectTag(projectId)}:invsub:${subscriptionId}`
}

/**
 * The project's invoice index: a sorted set of every invoice of the project, every score 0, the
 * members `<issue_date>:<statement_start_at>:<invoiceId>` (numbers as 15 digits) in lexicographic
 * order, so the newest invoice sorts last (POST /v1/invoices/list reads it from the end).
 */
export function invoiceIndexKey(projectId: string): string {
  return `${PREFIX}${projectTag(projectId)}:invidx`
}

/** The same index for one customer's invoices. */
export function customerInvoiceIndexKey(projectId: string, customerId: string): string {
  return `${PREFIX}${projectTag(projectId)}:invidx:c:${customerId}`
}

/** SCAN pattern of every project's invoices (`mg:{cat:*}:inv:*`): what the one-time reindex walks. */
export const INVOICE_PATTERN = invoiceKey('*', '*')

/** The project and invoice of an invoice hash key found by INVOICE_PATTERN. */
export function invoiceOfKey(key: string): { projectId: string; invoiceId: string } | undefined {
  const split = splitKey(key)
  const projectId = split && projectOfTag(split.tag)
  if (!projectId || !split.suffix.startsWith('inv:')) return undefined
  return { projectId, invoiceId: split.suffix.slice(4) }
}

/**
 * Set (to the time it finished) once every invoice drafted before the indexes existed has been
 * added to them: the reindex runs once per Redis, not per list.
 */
export const INVOICE_REINDEX_KEY = `${PREFIX}invidx:reindexed`

/** The project's journal outbox (`mg:{cat:<projectId>}:journal`, drained by src/workers/journal.ts). */
export { projectJournalKey as journalKey } from '../journal/keys.js'

/** SCAN pattern of every project's catalog hash: how the worker finds the projects to close cycles for. */
export const CATALOG_PATTERN = catalogKey('*')

/** The project id of a catalog hash key found by CATALOG_PATTERN. */
export function projectOfCatalogKey(key: string): string | undefined {
  const split = splitKey(key)
  return split?.suffix === 'catalog' ? projectOfTag(split.tag) : undefined
}
