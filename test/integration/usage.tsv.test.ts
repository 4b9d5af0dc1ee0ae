// The ingest worker writes usage_events as TabSeparated text straight from its columns
// (insertEventColumnsOnce → store.insertTsv, src/infra/clickhouse/tables.ts), not through row
// objects and encodeTsv. Hostile ids and properties (tabs, newlines, carriage returns,
// backslashes, quotes, NUL, non-ASCII) read back equal on both stores (clickhouse-server 18.16
// and chDB), byte for byte what the row path (insertEventsOnce → encodeTsv) stores; duplicates in
// a batch and rows already stored are skipped as the row path skips them.

import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { encodeJob, valueText, type CompactEvent } from '../../src/events/jobs.js'
import { appendEventRows } from '../../src/events/rows.js'
import { encodeTsv } from '../../src/infra/clickhouse/sql.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { insertEventColumnsOnce, insertEventsOnce, USAGE_EVENT_COLUMNS, UsageEventColumns, usageEventsTsv } from '../../src/infra/clickhouse/tables.js'
import { openTestStore, type TestStore } from '../support/store.js'

const T0 = Date.UTC(2026, 10, 10)
const HOSTILE = [
  'tab\there',
  'new\nline',
  'cr\rlf\r\n',
  'back\\slash\\',
  'quote\'s "double"',
  'nul\0byte',
  'ünïcødé ✓ 😀',
  '\\N',
  '\\t literal',
  '{"json":"\\u0000"}',
]

/** The events of the test: hostile ids, customers, slugs and properties, with numeric and decimal values. */
function hostileEvents(projectId: string): CompactEvent[] {
  return HOSTILE.map((text, i) => {
    const properties: Record<string, unknown> = { text, [text]: [text, i], value: i % 2 === 0 ? i + 0.25 : `${i}.12345678` }
    return {
      projectId,
      eventId: `id-${i}-${text}`,
      customerId: `cust ${text}`,
      eventSlug: `slug.${i}`,
      timestampMs: T0 + i,
      receivedMs: T0 + 1000 + i,
      value: valueText(properties),
      properties: JSON.stringify(properties),
    }
  })
}

/** The columns the worker builds from a format-2 job of `events` (no meter takes them; nothing refused). */
function columnsOf(events: CompactEvent[], extraFeatures = false): UsageEventColumns {
  const job = JSON.parse(JSON.stringify(encodeJob('b', events))) as ReturnType<typeof encodeJob>
  const columns = new UsageEventColumns()
  for (const g of job.projects) {
    for (let i = 0; i < g.ids.length; i++) {
      const features = extraFeatures
        ? [
            { featureSlug: `f\t${i}`, value: '3.5' },
            { featureSlug: 'g\\x', value: '0.00000001' },
          ]
        : []
      appendEventRows(columns, g, job.t, i, features, new Set(extraFeatures && i % 2 === 0 ? ['g\\x'] : []))
    }
  }
  return columns
}

const READ = `SELECT project_id, event_id, customer_id, event_slug, feature_slug, toString(value) AS value, properties, ts_ms, status, decision
  FROM usage_events WHERE project_id = {p} ORDER BY event_id`

describe.each([['server'], ['embedded']] as const)('usage_events as TSV straight from the worker: %s', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined

  beforeAll(async () => {
    opened = await openTestStore(kind, `test_${randomBytes(6).toString('hex')}`, { migrate: true })
    store = opened.store
  })

  afterAll(async () => {
    await opened?.close()
  })

  it('writes what encodeTsv would, byte for byte, for hostile text', () => {
    const columns = columnsOf(hostileEvents('p-bytes \t\\'), true)
    // A row of another decision (a run's consume), with text to escape in it.
    columns.push({ ...columns.row(0), event_id: 'run-row', decision: 'consume:r\t1\\', status: 'accepted' })
    const rows = Array.from({ length: columns.length }, (_, i) => ({ ...columns.row(i), inserted_at: '2026-11-10 00:00:00' }))
    const encoded = encodeTsv(rows)
    expect(encoded.columns).toEqual([...USAGE_EVENT_COLUMNS])
    expect(usageEventsTsv(columns, '2026-11-10 00:00:00')).toBe(encoded.body)
    expect(encoded.body).toContain('\\0')
  })

  it('hostile ids and properties read back equal, and equal to the row path', async () => {
    const a = `p-tsv-${randomBytes(3).toString('hex')} \t\\ü`
    const b = `p-rows-${randomBytes(3).toString('hex')} \t\\ü`
    const viaTsv = columnsOf(hostileEvents(a), true)
    const viaRows = columnsOf(hostileEvents(b), true)
    const n = viaTsv.length
    expect(await insertEventColumnsOnce(store, viaTsv, { firstAttempt: true, dedupToken: `tsv-${a}` })).toEqual({ inserted: n, skipped: 0 })
    const rows = Array.from({ length: viaRows.length }, (_, i) => viaRows.row(i))
    expect(await insertEventsOnce(store, rows, { firstAttempt: true, dedupToken: `rows-${b}` })).toEqual({ inserted: n, skipped: 0 })
    const fromTsv = await store.query<Record<string, unknown>>(READ.replace('{p}', sqlQuote(a)))
    const fromRows = await store.query<Record<string, unknown>>(READ.replace('{p}', sqlQuote(b)))
    expect(fromTsv).toHaveLength(n)
    expect(fromTsv.map((r) => ({ ...r, project_id: b }))).toEqual(fromRows)
    // And equal to what was meant: every column, the text exactly as sent.
    const meant = Array.from({ length: n }, (_, i) => viaTsv.row(i)).sort((x, y) => (x.event_id < y.event_id ? -1 : x.event_id > y.event_id ? 1 : 0))
    expect(fromTsv.map((r) => ({ ...r, value: trimDecimal(String(r.value)), ts_ms: Number(r.ts_ms) }))).toEqual(meant)
    expect(meant.some((r) => r.properties.includes('\\u0000') && r.event_id.includes('\0'))).toBe(true)
  })

  it('skips repeats inside a batch and, on a retry, the rows already stored', async () => {
    const p = `p-retry-${randomBytes(3).toString('hex')}`
    const events = hostileEvents(p)
    const first = columnsOf(events.slice(0, 4))
    expect(await insertEventColumnsOnce(store, first, { firstAttempt: true })).toEqual({ inserted: 4, skipped: 0 })
    // The retry carries every event, and one twice.
    const retry = UsageEventColumns.concat([columnsOf(events), columnsOf(events.slice(5, 6))])
    expect(await insertEventColumnsOnce(store, retry)).toEqual({ inserted: events.length - 4, skipped: 5 })
    expect(await insertEventColumnsOnce(store, retry)).toEqual({ inserted: 0, skipped: events.length + 1 })
    const [count] = await store.query<{ n: string; d: string }>(`SELECT count() AS n, uniqExact(event_id) AS d FROM usage_events WHERE project_id = '${p}'`)
    expect(count).toEqual({ n: String(events.length), d: String(events.length) })
  })
})

function sqlQuote(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\t/g, '\\t')}'`
}

function trimDecimal(text: string): string {
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text
}
