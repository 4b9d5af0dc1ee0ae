// The insert-once lookup of a retried batch (insertEventsOnce without firstAttempt) sends the
// batch's ids as one array literal in a subquery (src/infra/clickhouse/tables.ts): ids that SQL
// must escape, and ids near the size at which the lookup is cut into several queries, are found
// again, on both stores (18.16 and chDB), so a retry inserts nothing twice.

import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEventsOnce, type UsageEventRow } from '../../src/infra/clickhouse/tables.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { openTestStore, type TestStore } from '../support/store.js'

const T0 = Date.UTC(2026, 10, 10)

function event(id: string, i = 0): UsageEventRow {
  return {
    project_id: 'p-once',
    event_id: id,
    customer_id: 'c1',
    event_slug: 'api_call',
    feature_slug: 'api_call',
    value: 1,
    properties: '{}',
    ts_ms: T0 + i,
  }
}

describe.each([['server'], ['embedded']] as const)('insert once, retried lookup: %s', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined

  beforeAll(async () => {
    opened = await openTestStore(kind, `test_${randomBytes(6).toString('hex')}`, { migrate: true })
    store = opened.store
  })

  afterAll(async () => {
    await opened?.close()
  })

  it('finds ids that SQL escapes: quotes, backslashes, newlines, commas, brackets, non-ASCII', async () => {
    const ids = ["it's", 'back\\slash', 'new\nline', 'tab\tx', 'a,b', '[x]', "'])--", 'ünïcødé ✓', '\\', "''"]
    const rows = ids.map((id, i) => event(id, i))
    expect(await insertEventsOnce(store, rows.slice(0, 5), { firstAttempt: true })).toEqual({ inserted: 5, skipped: 0 })
    // The retry carries them all: only the five not stored yet go in.
    expect(await insertEventsOnce(store, rows)).toEqual({ inserted: 5, skipped: 5 })
    expect(await insertEventsOnce(store, rows)).toEqual({ inserted: 0, skipped: 10 })
    const stored = await store.query<{ event_id: string; n: string }>(
      "SELECT event_id, count() AS n FROM usage_events WHERE project_id = 'p-once' GROUP BY event_id ORDER BY event_id",
    )
    expect(stored.map((r) => r.event_id).sort()).toEqual([...ids].sort())
    expect(stored.every((r) => r.n === '1')).toBe(true)
  })

  it('a retry of 12,000 long ids (several lookup queries) inserts only the rows not yet stored', async () => {
    const rows = Array.from({ length: 12_000 }, (_, i) => event(`long-${'x'.repeat(40)}-${i}`, i % 5000))
    const stored = rows.filter((_, i) => i % 3 === 0)
    expect(await insertEventsOnce(store, stored, { firstAttempt: true })).toEqual({ inserted: 4000, skipped: 0 })
    expect(await insertEventsOnce(store, rows)).toEqual({ inserted: 8000, skipped: 4000 })
    const [count] = await store.query<{ n: string; d: string }>(
      "SELECT count() AS n, uniqExact(event_id) AS d FROM usage_events WHERE project_id = 'p-once' AND event_id LIKE 'long-%'",
    )
    expect(count).toEqual({ n: '12000', d: '12000' })
  })
})
