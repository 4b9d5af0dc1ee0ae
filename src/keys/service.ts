import { randomBytes, timingSafeEqual } from 'node:crypto'
import { sha256 } from '../catalog/canonical.js'
import { EventEmitter } from 'node:events'
import type { Clock } from '../kernel/clock.js'
import { failure, success, type Failure, type Result } from '../kernel/errors.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import type { Principal } from './types.js'
import { REVOCATION_CHANNEL, apiKeyKey, projectKey } from './keys.js'
import { findKey, isRevoked, revokeTree, storeKey } from './redis.js'

/** Scopes a project key can hold; `*` holds them all. */
export const SCOPES = [
  'analytics:read',
  'budgets:read',
  'budgets:write',
  'catalog:read',
  'catalog:write',
  'invoices:read',
  'invoices:write',
  'keys:write',
  'payments:read',
  'payments:write',
  'runs:read',
  'runs:write',
  'wallet:read',
  'wallet:write',
  'webhooks:write',
] as const
const KEY_FORMAT = /^mk_[A-Za-z0-9_-]{43}$/
/** How long a verified key is trusted without asking Redis again; revocations arrive sooner by pub/sub. */
const CACHE_MS = 60_000

export interface CreatedKey {
  keyId: string
  apiKey: string
  projectId: string
  scopes: string[]
  expiresAt: number | null
}

export interface KeyOptions {
  scopes?: string[]
  /** Epoch ms; null or absent: no expiry of its own (a creator's expiry still applies). */
  expiresAt?: number | null
  name?: string
  /** The keyId of the project key creating this one; absent for the root key and the CLI. */
  createdBy?: string
}

interface Cached {
  principal: Principal & { kind: 'project' }
  sha: string
  expiresAt: number | null
  cachedAt: number
}

const randomId = (prefix: string, bytes: number) => prefix + randomBytes(bytes).toString('base64url').replace(/[-_]/g, 'x')

/**
 * Projects and their API keys. Keys are stored as SHA-256 digests and verified from an
 * in-process cache, so a request costs no Redis round trip for auth. A revocation is
 * published on a channel every gateway subscribes to; a gateway whose subscription drops
 * forgets its whole cache when it reconnects, since it may have missed a message.
 */
export class KeyService extends EventEmitter {
  private readonly cache = new Map<string, Cached>()
  private readonly rawBySha = new Map<string, string>()
  private subscriber: RedisClient | undefined
  private readonly rootKey: Buffer | undefined

  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    rootKey?: string,
  ) {
    super()
    this.rootKey = rootKey ? Buffer.from(rootKey) : undefined
  }

  async createProject(name: string): Promise<{ projectId: string; apiKey: string; keyId: string }> {
    const projectId = randomId('proj_', 12)
    await this.redis.hset(projectKey(projectId), 'name', name, 'createdAt', String(this.clock()))
    const key = await this.issueKey(projectId, { scopes: ['*'], name: 'default' })
    return { projectId, apiKey: key.apiKey, keyId: key.keyId }
  }

  /**
   * Creates a key. A key created by another key (`createdBy`) never outlives it: it takes its
   * creator's expiry when it asks for none, and asking for a later one is refused. Its creator
   * records it as a child, so revoking the creator revokes it.
   */
  async createKey(projectId: string, options: KeyOptions): Promise<Result<CreatedKey>> {
    if ((await this.redis.exists(projectKey(projectId))) === 0) return failure('not_found', 'project_not_found', `Project ${projectId} does not exist.`)
    if (options.createdBy === undefined) return success(await this.issueKey(projectId, options))
    const creator = await findKey(this.redis, options.createdBy)
    if (creator === undefined || creator.revoked) return unauthenticated('The API key was revoked.')
    if (creator.expiresAt !== null && creator.expiresAt <= this.clock()) return unauthenticated('The API key has expired.')
    const expiresAt = boundedExpiry(options.expiresAt ?? null, creator.expiresAt, creator.keyId)
    if (!expiresAt.ok) return expiresAt
    const created = await this.issueKey(projectId, { ...options, expiresAt: expiresAt.value })
    // The creator may have been revoked while this key was written, after its revocation read
    // its children: then this key was missed, so it is revoked here before anyone gets it.
    if (await isRevoked(this.redis, creator.sha)) {
      await revokeTree(this.redis, created.keyId, (sha) => this.forget(sha))
      return unauthenticated('The API key was revoked.')
    }
    return success(created)
  }

  /**
   * Revokes a key and every key it created, transitively; `inProject` restricts it to one
   * project's keys. Revoking twice is fine, and finishes a revocation a crash cut short.
   */
  async revokeKey(keyId: string, inProject?: string): Promise<Result<{ keyId: string; revoked: true }>> {
    const key = await findKey(this.redis, keyId)
    if (key === undefined || (inProject !== undefined && key.projectId !== inProject)) {
      return failure('not_found', 'key_not_found', `Key ${keyId} does not exist.`)
    }
    await revokeTree(this.redis, keyId, (sha) => this.forget(sha))
    return success({ keyId, revoked: true })
  }

  /**
   * Verifies a bearer key from the cache alone: the principal, a failure, or undefined when
   * Redis must be asked (`verify`). Synchronous, so the hot path allocates no promise for auth.
   */
  verifyCached(raw: string): Principal | Failure | undefined {
    const hit = this.cache.get(raw)
    if (hit === undefined) return undefined
    const now = this.clock()
    if (now - hit.cachedAt >= CACHE_MS) return undefined
    return this.checkExpiry(hit, now)
  }

  /** Verifies a bearer key: root, a project key, or a failure (401). */
  async verify(raw: string): Promise<Principal | Failure> {
    if (this.rootKey && raw.length === this.rootKey.length && timingSafeEqual(Buffer.from(raw), this.rootKey)) return { kind: 'root' }
    const cached = this.verifyCached(raw)
    if (cached !== undefined) return cached
    const now = this.clock()
    if (!KEY_FORMAT.test(raw)) return unauthenticated('The API key is malformed.')
    const sha = sha256(raw)
    const record = await this.redis.hgetall(apiKeyKey(sha))
    if (!record.projectId) return unauthenticated('The API key is unknown.')
    if (record.revoked === '1') return unauthenticated('The API key was revoked.')
    const entry: Cached = {
      principal: { kind: 'project', projectId: record.projectId, keyId: record.keyId ?? '', scopes: (record.scopes ?? '*').split(',') },
      sha,
      expiresAt: record.expiresAt ? Number(record.expiresAt) : null,
      cachedAt: now,
    }
    this.cache.set(raw, entry)
    this.rawBySha.set(sha, raw)
    return this.checkExpiry(entry, now)
  }

  /** Subscribes to revocations. Resolves once subscribed. */
  async listen(): Promise<void> {
    const sub = this.redis.duplicate()
    this.subscriber = sub
    sub.on('message', (_channel: string, sha: string) => this.forget(sha))
    sub.on('ready', () => this.cache.clear())
    await sub.subscribe(REVOCATION_CHANNEL)
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect()
  }

  private async issueKey(projectId: string, options: KeyOptions): Promise<CreatedKey> {
    const apiKey = 'mk_' + randomBytes(32).toString('base64url')
    const keyId = randomId('key_', 12)
    const scopes = options.scopes ?? ['*']
    const expiresAt = options.expiresAt ?? null
    await storeKey(this.redis, {
      keyId,
      sha: sha256(apiKey),
      projectId,
      scopes,
      expiresAt,
      createdBy: options.createdBy ?? null,
      name: options.name ?? '',
      createdAt: this.clock(),
    })
    return { keyId, apiKey, projectId, scopes, expiresAt }
  }

  private forget(sha: string): void {
    const raw = this.rawBySha.get(sha)
    if (raw !== undefined) {
      this.cache.delete(raw)
      this.rawBySha.delete(sha)
    }
    this.emit('revoked', sha)
  }

  private checkExpiry(entry: Cached, now: number): Principal | Failure {
    if (entry.expiresAt !== null && entry.expiresAt <= now) return unauthenticated('The API key has expired.')
    return entry.principal
  }
}

export function hasScope(principal: Principal, scope: string): boolean {
  return principal.kind === 'project' && (principal.scopes.includes('*') || principal.scopes.includes(scope))
}

/**
 * The expiry of a key its creator makes: what was asked for, unless the creator expires; then
 * no later than the creator (none asked: the creator's own; later: refused, `expires_after_creator`).
 */
function boundedExpiry(asked: number | null, creatorExpiresAt: number | null, creatorKeyId: string): Result<number | null> {
  if (creatorExpiresAt === null) return success(asked)
  if (asked === null) return success(creatorExpiresAt)
  if (asked <= creatorExpiresAt) return success(asked)
  return failure('invalid', 'expires_after_creator', `A key cannot expire after the key creating it (${new Date(creatorExpiresAt).toISOString()}).`, {
    creatorKeyId,
    creatorExpiresAt,
    expiresAt: asked,
  })
}

function unauthenticated(message: string): Failure {
  return failure('unauthenticated', 'unauthenticated', message)
}
