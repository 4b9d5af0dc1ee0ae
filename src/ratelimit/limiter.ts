import type { Clock } from '../kernel/clock.js'
import { PREFIX } from '../infra/redis/keys.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'

const hit = new Script('hitRateLimit-1')
const WINDOW_MS = 1000

/**
 * Per-key request rate limit: a fixed one-second window counter in Redis, shared by every
 * gateway. Off unless METERING_RATE_LIMIT is set, because it costs a round trip per request.
 */
export class RateLimiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    readonly perSecond: number,
  ) {}

  /** Counts a request; answers how long to wait when it is over the limit. */
  async hit(keyId: string): Promise<{ allowed: true } | { allowed: false; retryAfterMs: number }> {
    const now = this.clock()
    const start = now - (now % WINDOW_MS)
    const count = Number(await hit.run(this.redis, [`${PREFIX}rl:{${keyId}}:${start}`], [WINDOW_MS * 2]))
    if (count <= this.perSecond) return { allowed: true }
    return { allowed: false, retryAfterMs: start + WINDOW_MS - now }
  }
}
