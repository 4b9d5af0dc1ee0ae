// The journal outbox (src/journal/README.md) end to end, against real Redis and both ClickHouse
// stores (clickhouse-server 18.16 and chDB), each in a throwaway database: every budget movement
// reaches budget_journal exactly once, whatever happens to the drain (run twice, two drainers at
// once, a drainer that died between its insert and its trim), on a standalone Redis and on the
// 3-master Cluster, and through the worker that `npm start` runs in-process.
//
// Isolation: the standalone suite works in its own logical Redis database (SUITE_DB), so the
// real drain (SCAN for every outbox list) and the real expiry sweep run unmodified over data of
// this file only. On the Cluster (database 0, shared) the drain is narrowed to the test's project.

import { randomBytes } from 'node:crypto'
import os from 'node:os'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { budgetTag } from '../../src/budgets/keys.js'
import { BudgetService } from '../../src/budgets/service.js'
import { migrate } from '../../src/infra/clickhouse/migrations.js'
import { canonicalDecimal, sqlLiteral } from '../../src/infra/clickhouse/sql.js'
import { openClickHouse } from '../../src/infra/clickhouse/open.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { manualClock } from '../../src/kernel/clock.js'
import { drainJournal, insertJournalRows, parseEntry } from '../../src/journal/drain.js'
import { DEAD_LETTER_KEY, claimKey, journalKey, projectJournalPatterns } from '../../src/journal/keys.js'
import { journalTables } from '../../src/journal/tables.js'
import { connectRedis } from '../../src/infra/redis/connection.js'
import { Script, loadLibrary, type RedisClient } from '../../src/infra/redis/scripts.js'
import { sweepExpiredHolds } from '../../src/workers/holdExpiry.js'
import { startTestGateway } from '../support/gateway.js'
import { waitFor } from '../support/processes.js'
import { testRedis, uniquePrefix } from '../support/redis.js'
import { openTestStore, type TestStore } from '../support/store.js'

const SUITE_DB = 12
const T0 = Date.UTC(2026, 10, 20, 10, 0, 0)

interface Movement {
  movement_id: string
  budget_key: string
  kind: string
  hold_id: string
  amount: string
  unit: string
  idempotency_key: string
  ts_ms: string
}

/** Every stored row of a project, duplicates included (no FINAL: a second copy must show). */
async function journalRows(store: ClickHouseStore, projectId: string): Promise<Movement[]> {
  return store.query<Movement>(
    `SELECT movement_id, budget_key, kind, hold_id, amount, unit, idempotency_key, toString(ts_ms) AS ts_ms
     FROM ${store.database}.budget_journal WHERE project_id = ${sqlLiteral(projectId)} ORDER BY movement_id`,
  )
}

function ok<T>(result: { ok: true; value: T } | { ok: false }): T {
  if (!result.ok) throw new Error(`expected ok, got ${JSON.stringify(result)}`)
  return result.value
}

/** A budget with one hard daily limit of 10 and a 1 s default hold ttl. */
async function budget(budgets: BudgetService, projectId: string, key: string): Promise<void> {
  ok(
    await budgets.upsert(projectId, {
      key,
      unit: 'USD',
      limits: [{ id: 'daily', window: 'day', enforce: 'hard', amount: '10' }],
      holds: { defaultTtlMs: 1000 },
    }),
  )
}

const backends: ['server' | 'embedded'][] = [['server'], ['embedded']]

describe.each(backends)('journal outbox into ClickHouse (%s)', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined
  let redis: Redis
  const database = `test_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    opened = await openTestStore(kind, database, { migrate: true })
    store = opened.store
    redis = testRedis()
    await redis.select(SUITE_DB)
    await loadLibrary(redis)
  })

  afterAll(async () => {
    redis?.disconnect()
    await opened?.close()
  })

  it('writes every kind of movement once, and a replay writes nothing', async () => {
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    const p = `p-${uniquePrefix()}`
    await budget(budgets, p, 'team/a')
    const hold = async (idem: string, amount: string) => ok(await budgets.authorize(p, { key: 'team/a', amount, idempotencyKey: idem })).holdId

    const settled = await hold('step-1', '3')
    const released = await hold('step-2', '1')
    ok(await budgets.settle(p, { key: 'team/a', holdId: settled, amount: '2.5' }))
    ok(await budgets.release(p, { key: 'team/a', holdId: released }))
    ok(await budgets.charge(p, { key: 'team/a', amount: '1.25', idempotencyKey: 'c-1' }))
    ok(await budgets.record(p, { key: 'team/a', amount: '100.00000001', idempotencyKey: 'r-1' })) // past the hard limit
    // Replays: each answers from its record and pushes nothing.
    ok(await budgets.settle(p, { key: 'team/a', holdId: settled, amount: '2.5' }))
    ok(await budgets.release(p, { key: 'team/a', holdId: released }))
    expect(ok(await budgets.charge(p, { key: 'team/a', amount: '1.25', idempotencyKey: 'c-1' })).replayed).toBe(true)
    expect(ok(await budgets.record(p, { key: 'team/a', amount: '100.00000001', idempotencyKey: 'r-1' })).replayed).toBe(true)
    const list = journalKey(budgetTag(p, 'team/a'))
    expect(await redis.llen(list)).toBe(4)

    // Expiry, lazily: a hold past its deadline is settled at its full amount by the next touch.
    await budget(budgets, p, 'lazy')
    const lazyHold = ok(await budgets.authorize(p, { key: 'lazy', amount: '0.5', idempotencyKey: 'step-3' })).holdId
    const lazyDeadline = clock() + 1000
    clock.advance(5000)
    ok(await budgets.get(p, 'lazy'))
    ok(await budgets.settle(p, { key: 'lazy', holdId: lazyHold, amount: '0.5' })) // settling an expired hold for its full amount replays
    expect(await redis.llen(journalKey(budgetTag(p, 'lazy')))).toBe(1)

    const first = await drainJournal({ redis, store })
    expect(first).toMatchObject({ inserted: 5, skipped: 0, deadLettered: 0, failed: 0, busy: 0, more: false })
    expect(await redis.llen(list)).toBe(0)

    const rows = await journalRows(store, p)
    expect(rows).toEqual([
      {
        movement_id: `lazy#expiry:${lazyHold}`,
        budget_key: 'lazy',
        kind: 'expiry',
        hold_id: lazyHold,
        amount: '0.5',
        unit: 'USD',
        idempotency_key: 'step-3',
        ts_ms: String(lazyDeadline),
      },
      {
        movement_id: `team/a#charge:${T0}:c-1`,
        budget_key: 'team/a',
        kind: 'charge',
        hold_id: '',
        amount: '1.25',
        unit: 'USD',
        idempotency_key: 'c-1',
        ts_ms: String(T0),
      },
      {
        movement_id: `team/a#record:${T0}:r-1`,
        budget_key: 'team/a',
        kind: 'record',
        hold_id: '',
        amount: '100.00000001',
        unit: 'USD',
        idempotency_key: 'r-1',
        ts_ms: String(T0),
      },
      {
        movement_id: `team/a#release:${released}`,
        budget_key: 'team/a',
        kind: 'release',
        hold_id: released,
        amount: '0',
        unit: 'USD',
        idempotency_key: 'step-2',
        ts_ms: String(T0),
      },
      {
        movement_id: `team/a#settle:${settled}`,
        budget_key: 'team/a',
        kind: 'settle',
        hold_id: settled,
        amount: '2.5',
        unit: 'USD',
        idempotency_key: 'step-1',
        ts_ms: String(T0),
      },
    ])

    // Draining again finds nothing; the amounts add up to what the budget consumed.
    expect(await drainJournal({ redis, store })).toMatchObject({ entries: 0, inserted: 0 })
    const [sum] = await store.query<{ total: string }>(
      `SELECT toString(sum(toDecimal128(amount, 8))) AS total FROM ${database}.budget_journal WHERE project_id = ${sqlLiteral(p)} AND budget_key = 'team/a'`,
    )
    expect(canonicalDecimal(sum!.total)).toBe('103.75000001')
    const view = ok(await budgets.get(p, 'team/a'))
    expect(view.balance.limits[0]?.consumed).toBe('103.75000001')

    // The README's "spend per budget per day" query, as the data team would run it.
    const perDay = await store.query<{ budget_key: string; unit: string; d: string; spent: string; movements: string }>(
      `SELECT budget_key, unit, toDate(toDateTime(intDiv(ts_ms, 1000), 'UTC')) AS d,
              toString(sum(toDecimal128(amount, 8))) AS spent, count() AS movements
       FROM ${database}.budget_journal FINAL
       WHERE project_id = ${sqlLiteral(p)} AND ts_ms >= ${T0 - 86_400_000}
       GROUP BY budget_key, unit, d
       ORDER BY budget_key, d`,
    )
    expect(perDay.map((r) => [r.budget_key, r.unit, r.d, canonicalDecimal(r.spent), Number(r.movements)])).toEqual([
      ['lazy', 'USD', '2026-11-20', '0.5', 1],
      ['team/a', 'USD', '2026-11-20', '103.75000001', 4],
    ])
  })

  it('keeps idempotency keys that need escaping exact (quotes, backslashes, control characters, non-ASCII)', async () => {
    const budgets = new BudgetService(redis, manualClock(T0))
    const p = `p-${uniquePrefix()}`
    await budget(budgets, p, 'odd.key@x-1')
    const idem = 'a"b\\c\nd\té ✓ {x}'
    ok(await budgets.charge(p, { key: 'odd.key@x-1', amount: '0.00000001', idempotencyKey: idem }))
    const hold = ok(await budgets.authorize(p, { key: 'odd.key@x-1', amount: '1', idempotencyKey: idem + '/h' })).holdId
    ok(await budgets.settle(p, { key: 'odd.key@x-1', holdId: hold, amount: '0.5' }))
    ok(await budgets.record(p, { key: 'odd.key@x-1', amount: '1234567890123456789.12345678', idempotencyKey: '\\' }))
    expect(await drainJournal({ redis, store })).toMatchObject({ inserted: 3, deadLettered: 0 })
    const rows = await journalRows(store, p)
    expect(rows.map((r) => [r.movement_id, r.idempotency_key, r.amount])).toEqual([
      [`odd.key@x-1#charge:${T0}:${idem}`, idem, '0.00000001'],
      [`odd.key@x-1#record:${T0}:\\`, '\\', '1234567890123456789.12345678'],
      [`odd.key@x-1#settle:${hold}`, idem + '/h', '0.5'],
    ])
  })

  it('carries the movements of the expiry sweep, and of an upsert that expired holds on the way', async () => {
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    const p = `p-${uniquePrefix()}`
    await budget(budgets, p, 'swept')
    await budget(budgets, p, 'upserted')
    const a = ok(await budgets.authorize(p, { key: 'swept', amount: '2', idempotencyKey: 'a' })).holdId
    const b = ok(await budgets.authorize(p, { key: 'swept', amount: '3', idempotencyKey: 'b' })).holdId
    clock.advance(60_000)
    // The real sweep, over this suite's database only.
    const swept = await sweepExpiredHolds(redis, budgets)
    expect(swept.expired).toBe(2)
    const c = ok(await budgets.authorize(p, { key: 'upserted', amount: '4', idempotencyKey: 'c' })).holdId
    clock.advance(60_000)
    await budget(budgets, p, 'upserted') // expires c under the old configuration, then replaces it
    expect(await drainJournal({ redis, store })).toMatchObject({ failed: 0, deadLettered: 0 })
    const rows = await journalRows(store, p)
    expect(rows.map((r) => [r.movement_id, r.kind, r.amount, r.ts_ms])).toEqual([
      [`swept#expiry:${a}`, 'expiry', '2', String(T0 + 1000)],
      [`swept#expiry:${b}`, 'expiry', '3', String(T0 + 1000)],
      [`upserted#expiry:${c}`, 'expiry', '4', String(T0 + 61_000)],
    ])
  })

  it('stores each movement once when two drainers run at once, and when a drainer died between its insert and its trim', async () => {
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    const p = `p-${uniquePrefix()}`
    const keys = Array.from({ length: 20 }, (_, i) => `b-${i}`)
    for (const key of keys) await budget(budgets, p, key)
    await Promise.all(keys.flatMap((key) => Array.from({ length: 15 }, (_, j) => budgets.record(p, { key, amount: `0.0${j + 1}`, idempotencyKey: `r-${j}` }))))

    // A drainer that read 5 lists and inserted their rows, then died before trimming.
    const crashed = keys.slice(0, 5).map((key) => journalKey(budgetTag(p, key)))
    const taken = (await Promise.all(crashed.map((list) => redis.lrange(list, 0, -1)))).flat()
    const rows = taken
      .map((entry) => parseEntry(entry, journalTables))
      .map((x) => {
        if (!('table' in x)) throw new Error(x.dead)
        return x
      })
    expect(await insertJournalRows(store, rows)).toMatchObject({ inserted: 75, skipped: 0 })

    // Two drainers at once, small batches so that they interleave over many rounds.
    const drain = () => drainJournal({ redis, store, listsPerBatch: 3, maxPerList: 4 })
    let results = await Promise.all([drain(), drain()])
    while (results.some((r) => r.more || r.busy > 0)) results = await Promise.all([drain(), drain()])
    for (const key of keys) expect(await redis.llen(journalKey(budgetTag(p, key)))).toBe(0)

    const stored = await journalRows(store, p)
    expect(stored).toHaveLength(300)
    expect(new Set(stored.map((r) => r.movement_id)).size).toBe(300)
  })

  it('dead-letters entries of unknown tables and keeps entries whose insert failed for the next round', async () => {
    const clock = manualClock(T0)
    const budgets = new BudgetService(redis, clock)
    const p = `p-${uniquePrefix()}`
    await budget(budgets, p, 'k')
    ok(await budgets.charge(p, { key: 'k', amount: '1', idempotencyKey: 'c-1' }))
    const list = journalKey(budgetTag(p, 'k'))
    await redis.rpush(list, 'no_such_table\t{"project_id":"x","movement_id":"m"}', 'budget_journal\tnot json')
    ok(await budgets.charge(p, { key: 'k', amount: '2', idempotencyKey: 'c-2' }))
    const before = await redis.llen(DEAD_LETTER_KEY)

    // A registered table the insert fails for (no such table in ClickHouse): that entry and every
    // entry after it stay in the list; the ones before it are stored and trimmed.
    const broken = { ...journalTables, missing_table: { idColumn: 'movement_id' } }
    await redis.rpush(list, 'missing_table\t{"project_id":"x","movement_id":"m1"}')
    ok(await budgets.charge(p, { key: 'k', amount: '3', idempotencyKey: 'c-3' }))
    const round = await drainJournal({ redis, store, tables: broken })
    expect(round).toMatchObject({ entries: 6, deadLettered: 2, failed: 2 })
    expect(await redis.lrange(list, 0, -1)).toHaveLength(2)
    const dead = (await redis.lrange(DEAD_LETTER_KEY, before, -1)).map((d) => JSON.parse(d) as { list: string; reason: string })
    expect(dead.map((d) => [d.list, d.reason])).toEqual([
      [list, 'unknown table "no_such_table" (not in src/journal/tables.ts)'],
      [list, 'row is not JSON'],
    ])

    // With the registry as shipped, the stuck entry is dead-lettered and the charge after it stored.
    expect(await drainJournal({ redis, store })).toMatchObject({ entries: 2, deadLettered: 1, failed: 0 })
    expect(await redis.llen(list)).toBe(0)
    expect((await journalRows(store, p)).map((r) => r.amount)).toEqual(['1', '2', '3'])
  })
})

describe('the trim of a drain round', () => {
  it('trims nothing for a drainer whose claim expired and was taken by another', async () => {
    const redis = testRedis()
    try {
      await loadLibrary(redis)
      const list = journalKey(`{p-${uniquePrefix()}/k}`)
      await redis.rpush(list, 'a', 'b', 'c')
      await redis.set(claimKey(list), 'theirs', 'PX', 60_000)
      const trim = new Script('trimJournal-2')
      expect(await trim.run(redis, [list, claimKey(list)], ['mine', 3])).toBe(0)
      expect(await redis.lrange(list, 0, -1)).toEqual(['a', 'b', 'c'])
      expect(await redis.get(claimKey(list))).toBe('theirs')
      expect(await trim.run(redis, [list, claimKey(list)], ['theirs', 2])).toBe(1)
      expect(await redis.lrange(list, 0, -1)).toEqual(['c'])
      expect(await redis.exists(claimKey(list))).toBe(0)
      await redis.del(list)
    } finally {
      redis.disconnect()
    }
  })
})

describe('journal outbox on the 3-master Redis Cluster', () => {
  let store: ClickHouseStore
  let cluster: RedisClient
  const database = `test_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    store = await openClickHouse({ url: inject('clickhouseUrl'), dataDir: os.tmpdir(), database })
    await migrate(store)
    cluster = connectRedis(
      `redis+cluster://${inject('clusterNodes')
        .map((n) => `${n.host}:${n.port}`)
        .join(',')}`,
      'test-journal',
    )
    await loadLibrary(cluster)
  })

  afterAll(async () => {
    await cluster?.quit()
    await store?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
    await store?.close()
  })

  it('drains the lists of budgets spread over every master, each movement once', async () => {
    const clock = manualClock(T0)
    const budgets = new BudgetService(cluster, clock)
    const p = `p-${uniquePrefix()}`
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`)
    for (const key of keys) await budget(budgets, p, key)
    for (const key of keys) {
      const holdId = ok(await budgets.authorize(p, { key, amount: '2', idempotencyKey: 'h' })).holdId
      ok(await budgets.settle(p, { key, holdId, amount: '1.5' }))
      ok(await budgets.charge(p, { key, amount: '1', idempotencyKey: 'c' }))
    }
    const masters = (cluster as import('ioredis').Cluster).nodes('master')
    expect(masters).toHaveLength(3)
    const drain = () => drainJournal({ redis: cluster, store, match: projectJournalPatterns(p) })
    const [x, y] = await Promise.all([drain(), drain()])
    expect(x.inserted + y.inserted).toBe(60)
    expect(await drain()).toMatchObject({ entries: 0 })
    const rows = await journalRows(store, p)
    expect(rows).toHaveLength(60)
    expect(new Set(rows.map((r) => r.movement_id)).size).toBe(60)
  })
})

describe('the journal worker of the gateway', () => {
  it('drains budget movements made over HTTP on its interval, and stops with the gateway', async () => {
    const database = `test_${randomBytes(6).toString('hex')}`
    const gw0 = await startTestGateway({ clickhouse: 'off' }, T0)
    const { projectId, apiKey } = await gw0.project()
    await gw0.close()
    const gw = await startTestGateway(
      {
        clickhouse: 'on',
        clickhouseUrl: inject('clickhouseUrl'),
        clickhouseDatabase: database,
        ingestWorker: false,
        journalIntervalMs: 20,
        journalMatch: projectJournalPatterns(projectId),
      },
      T0,
    )
    try {
      expect(gw.journal).toBeDefined()
      expect(
        (await gw.post('/v1/budgets/upsert', { key: 'agent', limits: [{ id: 'l', window: 'month', enforce: 'hard', amount: '50' }] }, apiKey)).status,
      ).toBe(200)
      const hold = await gw.post('/v1/budgets/authorize', { key: 'agent', amount: '5', idempotencyKey: 'run-1' }, apiKey)
      expect(hold.status).toBe(200)
      const settle = { key: 'agent', holdId: hold.body.holdId, amount: '4.2' }
      expect((await gw.post('/v1/budgets/settle', settle, apiKey)).status).toBe(200)
      expect((await gw.post('/v1/budgets/settle', settle, apiKey)).status).toBe(200) // a replay
      expect((await gw.post('/v1/budgets/charge', { key: 'agent', amount: '0.3', idempotencyKey: 'x' }, apiKey)).status).toBe(200)

      // The worker's own rounds, every 20 ms: wait (bounded) until they have stored both.
      await waitFor('the journal worker to drain the movements', async () => (await journalRows(gw.clickhouse!, projectId)).length >= 2, 10_000, {
        intervalMs: 20,
      })
      await gw.journal!.drainNow() // a round after them all: nothing more arrives
      const rows = await journalRows(gw.clickhouse!, projectId)
      expect(rows.map((r) => [r.kind, r.amount, r.idempotency_key])).toEqual([
        ['charge', '0.3', 'x'],
        ['settle', '4.2', 'run-1'],
      ])
    } finally {
      await gw.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
      await gw.close()
    }
  })
})
