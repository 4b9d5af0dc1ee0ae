import { PREFIX } from '../infra/redis/keys.js'

/** Redis keys of projects and API keys. Each is used alone, so they need no shared hash tag. */
export const projectKey = (projectId: string) => `${PREFIX}project:${projectId}`
/** An API key's record, found by the SHA-256 of the key: the key itself is never stored. */
export const apiKeyKey = (sha: string) => `${PREFIX}apikey:${sha}`
/** keyId → sha, so a key can be revoked by its id. */
export const apiKeyIdKey = (keyId: string) => `${PREFIX}apikeyid:${keyId}`
/**
 * The ids of the keys a key created (a set), so revoking it reaches them. Written before the
 * child's record, so no child can exist that its creator's revocation would not find.
 */
export const apiKeyChildrenKey = (keyId: string) => `${PREFIX}apikeychildren:${keyId}`
/** Every gateway listens here and drops a revoked key from its cache at once. */
export const REVOCATION_CHANNEL = `${PREFIX}apikeys:revoked`
