import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { catalogKey, customerKey, flagsOf } from './keys.js'
import type { AccessFlags, CatalogIndex, CustomerSource, CustomerView, StoredCatalog } from './types.js'

/** Storage adapter of the catalog (README, "Storage"): one query per function, one round trip each. */
const scripts = {
  apply: new Script('applyCatalog-N'),
  access: new Script('updateAccess-1'),
}

export interface CatalogState {
  /** 0: the project has no catalog yet. */
  version: number
  catalog: StoredCatalog
  index: CatalogIndex
}

const emptyCatalog = (): StoredCatalog => ({ features: [], plans: [], planVersions: [] })

/** The catalog hash, whole: what an apply starts from. */
export async function readCatalogState(redis: RedisClient, projectId: string): Promise<CatalogState> {
  const [version, catalog, index] = await redis.hmget(catalogKey(projectId), 'version', 'catalog', 'index')
  return {
    version: Number(version ?? 0),
    catalog: catalog ? (JSON.parse(catalog) as StoredCatalog) : emptyCatalog(),
    index: index ? (JSON.parse(index) as CatalogIndex) : { customers: {} },
  }
}

/** Features, plans and plan versions (the read routes). */
export async function readCatalog(redis: RedisClient, projectId: string): Promise<StoredCatalog> {
  const catalog = await redis.hget(catalogKey(projectId), 'catalog')
  return catalog ? (JSON.parse(catalog) as StoredCatalog) : emptyCatalog()
}

/** The stored sources of some customers, in one pipelined round trip (their keys share one slot). */
export async function readSources(redis: RedisClient, projectId: string, customerIds: string[]): Promise<Map<string, CustomerSource>> {
  const sources = new Map<string, CustomerSource>()
  if (customerIds.length === 0) return sources
  const pipeline = redis.pipeline()
  for (const id of customerIds) pipeline.hget(customerKey(projectId, id), 'src')
  const replies = (await pipeline.exec()) ?? []
  replies.forEach(([error, value], i) => {
    if (error) throw error
    if (typeof value === 'string') sources.set(customerIds[i]!, JSON.parse(value) as CustomerSource)
  })
  return sources
}

export interface CustomerWriteArgs {
  id: string
  src: CustomerSource
  view: CustomerView
  clearStatus: boolean
}

/** Writes the catalog and the customers if the catalog is still at `expectedVersion` (lua/applyCatalog-N.lua). */
export async function applyCatalog(
  redis: RedisClient,
  projectId: string,
  expectedVersion: number,
  catalog: StoredCatalog,
  index: CatalogIndex,
  customers: CustomerWriteArgs[],
): Promise<{ status: 'ok' | 'version_conflict'; version: number }> {
  const keys = [catalogKey(projectId), ...customers.map((c) => customerKey(projectId, c.id))]
  const args: (string | number)[] = [expectedVersion, JSON.stringify(catalog), JSON.stringify(index)]
  for (const c of customers) args.push(JSON.stringify(c.src), JSON.stringify(c.view), c.clearStatus ? '1' : '0')
  const [status, version] = await scripts.apply.run(redis, keys, args)
  return { status: status as 'ok' | 'version_conflict', version: Number(version) }
}

/** Read documents and access flags of some customers (no `src`), in one pipelined round trip. */
export async function readCustomerViews(
  redis: RedisClient,
  projectId: string,
  customerIds: string[],
): Promise<Map<string, { view: CustomerView; flags: AccessFlags }>> {
  const out = new Map<string, { view: CustomerView; flags: AccessFlags }>()
  if (customerIds.length === 0) return out
  const pipeline = redis.pipeline()
  for (const id of customerIds) pipeline.hmget(customerKey(projectId, id), 'doc', 'customerDisabled', 'customerUsageLimitReached', 'subscriptionStatus')
  const replies = (await pipeline.exec()) ?? []
  replies.forEach(([error, value], i) => {
    if (error) throw error
    const [doc, customerDisabled, customerUsageLimitReached, subscriptionStatus] = value as (string | null)[]
    if (!doc) return
    const hash: Record<string, string> = {}
    if (customerDisabled) hash.customerDisabled = customerDisabled
    if (customerUsageLimitReached) hash.customerUsageLimitReached = customerUsageLimitReached
    if (subscriptionStatus) hash.subscriptionStatus = subscriptionStatus
    out.set(customerIds[i]!, { view: JSON.parse(doc) as CustomerView, flags: flagsOf(hash) })
  })
  return out
}

/** A customer's read document and access flags: one HGETALL. undefined when the customer does not exist. */
export async function readCustomer(redis: RedisClient, projectId: string, customerId: string): Promise<{ view: CustomerView; flags: AccessFlags } | undefined> {
  const hash = await redis.hgetall(customerKey(projectId, customerId))
  if (hash.doc === undefined) return undefined
  return { view: JSON.parse(hash.doc) as CustomerView, flags: flagsOf(hash) }
}

/** Whether the customer is disabled: one HGET of one field, for the usage and run paths. */
export async function readCustomerDisabled(redis: RedisClient, projectId: string, customerId: string): Promise<boolean> {
  return (await redis.hget(customerKey(projectId, customerId), 'customerDisabled')) === '1'
}

/** Sets access flags of an existing customer (lua/updateAccess-1.lua); '' forgets a flag. */
export async function updateAccess(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  fields: Record<string, string>,
): Promise<'ok' | 'customer_not_found'> {
  const args = Object.entries(fields).flat()
  return (await scripts.access.run(redis, [customerKey(projectId, customerId)], args)) as unknown as 'ok' | 'customer_not_found'
}
