// The peer: "the same authorize, done the way a user would without us".
//
// Fastify + rate-limiter-flexible, one RateLimiterRedis per limit (hour, day,
// month), each consuming the request's amount; all three awaited together.
// This is the idiomatic stack for the job, set up the way its docs suggest
// (JSON schemas for the body and the reply, so Fastify validates with ajv and
// serializes with fast-json-stringify, which is its fast path).
//
// What it does NOT do, and the gateway does (it is the point of the product,
// so the peer is, if anything, flattered by the comparison):
//  - no atomicity across limits: if the day limit rejects, the hour limit has
//    already been charged (three separate scripts, three round trips);
//  - no holds (nothing to settle or release later), no idempotency keys;
//  - integer points only: amounts are converted to micro-units here.
// Env: PORT, REDIS_URL. Prints READY once listening.

import Fastify from 'fastify'
import { Redis } from 'ioredis'
import rlf from 'rate-limiter-flexible'

// rate-limiter-flexible is CommonJS: take the classes off the default export.
const { RateLimiterRedis, RateLimiterRes } = rlf

const port = Number(process.env.PORT ?? 0)
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')

// "Points large": 1e15 micro-units = 1e9 currency units per window, so the
// bench never hits a limit (and stays within Number.MAX_SAFE_INTEGER).
const POINTS = 1e15
const WINDOWS = { hour: 3600, day: 86_400, month: 30 * 86_400 } as const
const limiters = Object.entries(WINDOWS).map(
  ([id, duration]) => [id, new RateLimiterRedis({ storeClient: redis, keyPrefix: `peer:${id}`, points: POINTS, duration })] as const,
)

/** "0.25" → 250000 micro-units, without going through floating point. */
function toMicros(amount: string): number {
  const m = /^(\d{1,9})(?:\.(\d{1,6}))?$/.exec(amount)
  if (!m) throw Object.assign(new Error('bad amount'), { statusCode: 400 })
  return Number(m[1]) * 1e6 + Number((m[2] ?? '').padEnd(6, '0'))
}

const app = Fastify({ logger: false })

const remaining = {
  type: 'object',
  properties: { hour: { type: 'number' }, day: { type: 'number' }, month: { type: 'number' } },
} as const

app.post<{ Body: { key: string; amount: string; idempotencyKey?: string } }>(
  '/v1/budgets/authorize',
  {
    schema: {
      body: {
        type: 'object',
        required: ['key', 'amount'],
        properties: { key: { type: 'string' }, amount: { type: 'string' }, idempotencyKey: { type: 'string' } },
      },
      response: {
        200: {
          type: 'object',
          properties: {
            allowed: { type: 'boolean' },
            key: { type: 'string' },
            amount: { type: 'string' },
            remaining,
            resetMs: remaining,
          },
        },
        402: {
          type: 'object',
          properties: { allowed: { type: 'boolean' }, key: { type: 'string' }, retryAfterMs: { type: 'number' } },
        },
      },
    },
  },
  async (req, reply) => {
    const { key, amount } = req.body
    const points = toMicros(amount)
    try {
      const res = await Promise.all(limiters.map(([, l]) => l.consume(key, points)))
      const [h, d, m] = res as [InstanceType<typeof RateLimiterRes>, InstanceType<typeof RateLimiterRes>, InstanceType<typeof RateLimiterRes>]
      return {
        allowed: true,
        key,
        amount,
        remaining: { hour: h.remainingPoints / 1e6, day: d.remainingPoints / 1e6, month: m.remainingPoints / 1e6 },
        resetMs: { hour: h.msBeforeNext, day: d.msBeforeNext, month: m.msBeforeNext },
      }
    } catch (err) {
      // rate-limiter-flexible rejects with a RateLimiterRes when over the limit,
      // and with an Error when Redis fails.
      if (err instanceof RateLimiterRes) {
        return reply.code(402).send({ allowed: false, key, retryAfterMs: err.msBeforeNext })
      }
      throw err
    }
  },
)

app.get('/healthz', async () => 'ok')

await app.listen({ host: '127.0.0.1', port })
console.log('READY')

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    void app.close().finally(() => {
      redis.disconnect()
      process.exit(0)
    })
  })
}
