import type { RedisClient } from '../infra/redis/scripts.js'
import { REVOCATION_CHANNEL, apiKeyChildrenKey, apiKeyIdKey, apiKeyKey } from './keys.js'

/** Storage adapter of API keys: plain commands on keys used one at a time, so it works on a Cluster. */

/** A key's record as stored (`mg:apikey:<sha>`). */
export interface StoredKey {
  keyId: string
  sha: string
  projectId: string
  scopes: string[]
  expiresAt: number | null
  revoked: boolean
  /** The keyId of the key that created it; null for the root key, the CLI and a project's first key. */
  createdBy: string | null
  name: string
  createdAt: number
}

/** A key by its id, or undefined when there is none. */
export async function findKey(redis: RedisClient, keyId: string): Promise<StoredKey | undefined> {
  const sha = await redis.get(apiKeyIdKey(keyId))
  if (sha === null) return undefined
  const record = await redis.hgetall(apiKeyKey(sha))
  if (!record.projectId) return undefined
  return {
    keyId,
    sha,
    projectId: record.projectId,
    scopes: (record.scopes ?? '*').split(','),
    expiresAt: record.expiresAt ? Number(record.expiresAt) : null,
    revoked: record.revoked === '1',
    createdBy: record.createdBy || null,
    name: record.name ?? '',
    createdAt: Number(record.createdAt ?? 0),
  }
}

/**
 * Stores a new key. Its creator's set of children is written first, then the record, then the
 * id: a crash between them leaves at worst an id in the set that names no key (skipped by
 * revokeTree), never a key its creator's revocation cannot find.
 */
export async function storeKey(redis: RedisClient, key: Omit<StoredKey, 'revoked'>): Promise<void> {
  if (key.createdBy !== null) await redis.sadd(apiKeyChildrenKey(key.createdBy), key.keyId)
  await redis.hset(apiKeyKey(key.sha), {
    keyId: key.keyId,
    projectId: key.projectId,
    scopes: key.scopes.join(','),
    expiresAt: key.expiresAt ?? '',
    revoked: '0',
    createdBy: key.createdBy ?? '',
    name: key.name,
    createdAt: String(key.createdAt),
  })
  await redis.set(apiKeyIdKey(key.keyId), key.sha)
}

/** Whether the key with this digest is revoked (read from Redis, never from a cache). */
export async function isRevoked(redis: RedisClient, sha: string): Promise<boolean> {
  return (await redis.hget(apiKeyKey(sha), 'revoked')) === '1'
}

/**
 * Revokes a key and every key it created, transitively, a generation at a time. Each key is
 * marked revoked and announced on the revocation channel before its children are read, so a
 * child being created at that moment is either found here or finds its creator revoked
 * (KeyService.createKey). Keys already revoked are walked again rather than skipped: that is
 * what lets a revocation cut short by a crash be finished by repeating it. Returns how many
 * key ids the tree held.
 */
export async function revokeTree(redis: RedisClient, keyId: string, onRevoked: (sha: string) => void): Promise<number> {
  const seen = new Set<string>([keyId])
  let generation = [keyId]
  while (generation.length > 0) {
    const children = await Promise.all(generation.map((id) => revokeOne(redis, id, onRevoked)))
    generation = []
    for (const child of children.flat()) {
      if (seen.has(child)) continue
      seen.add(child)
      generation.push(child)
    }
  }
  return seen.size
}

/** Marks one key revoked, tells every gateway, and answers the ids of the keys it created. */
async function revokeOne(redis: RedisClient, keyId: string, onRevoked: (sha: string) => void): Promise<string[]> {
  const sha = await redis.get(apiKeyIdKey(keyId))
  if (sha !== null) {
    await redis.hset(apiKeyKey(sha), 'revoked', '1')
    await redis.publish(REVOCATION_CHANNEL, sha)
    onRevoked(sha)
  }
  return redis.smembers(apiKeyChildrenKey(keyId))
}
