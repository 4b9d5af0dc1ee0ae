// Issue 9, "Fail fast, heal, tell the truth": the gateway of `npm start`, its embedded
// redis-server stalled (SIGSTOP) and killed (kill -9). While Redis cannot answer, every request
// is a 503 SERVICE_UNAVAILABLE envelope with Retry-After within the command timeout (never a
// hang, never a 500), /readyz says so and /livez does not; once Redis is back (SIGCONT, or the
// gateway's restart of its child on the same data directory) the same requests succeed, and a
// retry with an acknowledged idempotency key answers what was acknowledged. A stalled ClickHouse
// server makes the routes that read it 503 (within METERING_CLICKHOUSE_TIMEOUT_MS) while the
// Redis routes go on answering.
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { startClickHouseServer } from '../support/clickhouse.js'
import { stopProcess, waitFor } from '../support/processes.js'
import { GatewayProcess, type Answer } from './gatewayProcess.js'

const TIMEOUT_MS = 300
/** The command timeout, plus room for a loaded 2-core machine. */
const FAST_MS = TIMEOUT_MS + 1_500

function expectUnavailable(answer: Answer): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(503)
  expect(answer.body.error.code).toBe('SERVICE_UNAVAILABLE')
  expect(answer.body.error.details.reason).toBe('store_unavailable')
  expect(answer.headers.get('retry-after')).toBe('1')
  expect(answer.ms).toBeLessThan(FAST_MS)
}

/** A well-formed key no cache holds: its lookup must go to Redis. */
function unknownKeyLike(key: string): string {
  const last = key.at(-1) === 'a' ? 'b' : 'a'
  return key.slice(0, -1) + last
}

/** An outage is logged as what it is (warnings, the supervisor's report), not as failed requests or unhandled errors. */
function expectNoBugsLogged(gw: GatewayProcess): void {
  const output = gw.proc.output()
  expect(output).not.toContain('"msg":"request failed"')
  expect(output).not.toContain('Unhandled error event')
  expect(output).not.toMatch(/"level":50,[^\n]*"msg":"(notification|webhook delivery) worker error"/)
}

describe('a gateway whose Redis stalls or dies', () => {
  let gw: GatewayProcess | undefined
  let stalled: number | undefined
  afterEach(async () => {
    await gw?.cleanUp(stalled === undefined ? [] : [stalled])
    gw = undefined
    stalled = undefined
  })

  test('SIGSTOP: 503 with Retry-After within the timeout, /readyz 503, /livez 200; SIGCONT heals', async () => {
    gw = new GatewayProcess({ METERING_REDIS_TIMEOUT_MS: String(TIMEOUT_MS) })
    await gw.start()
    await gw.setUp('agent', '1000')
    const before = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'a-1' })
    expect(before.status, JSON.stringify(before.body)).toBe(200)

    stalled = await gw.redisPid()
    await stopProcess(stalled)
    // Authorize (a script), a read, a key check of a key not cached yet, and readiness.
    const answers = await Promise.all([
      gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'a-2' }),
      gw.call('/v1/budgets/get', { key: 'agent' }),
      gw.call('/v1/budgets/get', { key: 'agent' }, unknownKeyLike(gw.apiKey)),
    ])
    for (const answer of answers) expectUnavailable(answer)
    const ready = await gw.get('/readyz')
    expect(ready.status).toBe(503)
    expect(ready.headers.get('retry-after')).toBe('1')
    expect(ready.body.checks.redis).not.toBe('ok')
    expect((await gw.get('/healthz')).status).toBe(503)
    expect((await gw.get('/livez')).status).toBe(200)

    process.kill(stalled, 'SIGCONT')
    stalled = undefined
    const healed = await gw.readyzIs(200)
    expect(healed.body.checks).toMatchObject({ gateway: 'ok', redis: 'ok', clickhouse: 'ok' })
    // The stalled authorize may or may not have been applied: its retry answers either way, once.
    const retried = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'a-2' })
    expect(retried.status, JSON.stringify(retried.body)).toBe(200)
    const again = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'a-2' })
    expect(again.body.holdId).toBe(retried.body.holdId)
    const first = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'a-1' })
    expect(first.body.holdId).toBe(before.body.holdId)
    const budget = await gw.call('/v1/budgets/get', { key: 'agent' })
    expect(budget.body.balance.limits[0].held).toBe('2')
    expectNoBugsLogged(gw)
  })

  test('kill -9: 503 while it is down, the gateway restarts it on the same data, acknowledged holds survive', async () => {
    gw = new GatewayProcess({ METERING_REDIS_TIMEOUT_MS: String(TIMEOUT_MS) })
    await gw.start()
    await gw.setUp('agent', '1000')
    const acknowledged: Answer[] = []
    for (let i = 0; i < 20; i++) acknowledged.push(await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: `k-${i}` }))
    for (const a of acknowledged) expect(a.status).toBe(200)

    const first = await gw.redisPid()
    process.kill(first, 'SIGKILL')
    // Until the restart, every answer is a fast 503 (never a 500, never a hang).
    const during = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'k-during' })
    if (during.status !== 200) expectUnavailable(during)

    await gw.readyzIs(200)
    const second = await waitFor('a new redis-server', async () => {
      const pid = await gw!.redisPid()
      return pid !== first ? pid : undefined
    })
    expect(second).not.toBe(first)
    for (let i = 0; i < 20; i++) {
      const retry = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: `k-${i}` })
      expect(retry.status, JSON.stringify(retry.body)).toBe(200)
      expect(retry.body.holdId).toBe(acknowledged[i]!.body.holdId)
    }
    const fresh = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'k-after' })
    expect(fresh.status).toBe(200)
    expect(acknowledged.map((a) => a.body.holdId)).not.toContain(fresh.body.holdId)
    expectNoBugsLogged(gw)
  })

  test('a stalled ClickHouse server: its routes 503 within the timeout, budgets go on, SIGCONT heals', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'metering-faults-ch-'))
    const clickhouse = await startClickHouseServer({ dataDir: dir })
    try {
      gw = new GatewayProcess({ CLICKHOUSE_URL: clickhouse.url, METERING_CLICKHOUSE_TIMEOUT_MS: '1000' })
      await gw.start()
      await gw.setUp('agent', '1000')
      const usage = { range: '24h', customer_id: 'cus_1' }
      const before = await gw.call('/v1/analytics/usage/get', usage)
      expect(before.status, JSON.stringify(before.body)).toBe(200)

      stalled = clickhouse.pid
      await stopProcess(clickhouse.pid)
      const during = await gw.call('/v1/analytics/usage/get', usage)
      expect(during.status, JSON.stringify(during.body)).toBe(503)
      expect(during.body.error.code).toBe('SERVICE_UNAVAILABLE')
      expect(during.headers.get('retry-after')).toBe('1')
      expect(during.ms).toBeLessThan(1_000 + 1_500)
      const ready = await gw.get('/readyz')
      expect(ready.status).toBe(503)
      expect(ready.body.checks).toMatchObject({ redis: 'ok' })
      expect(ready.body.checks.clickhouse).not.toBe('ok')
      const authorize = await gw.call('/v1/budgets/authorize', { key: 'agent', amount: '1', idempotencyKey: 'during' })
      expect(authorize.status, JSON.stringify(authorize.body)).toBe(200)

      process.kill(clickhouse.pid, 'SIGCONT')
      stalled = undefined
      await gw.readyzIs(200)
      expect((await gw.call('/v1/analytics/usage/get', usage)).status).toBe(200)
    } finally {
      if (stalled !== undefined) process.kill(stalled, 'SIGCONT')
      stalled = undefined
      await clickhouse.stop()
      await rm(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
