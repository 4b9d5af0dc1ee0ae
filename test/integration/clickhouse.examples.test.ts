// The example queries of the docs run as written, on both stores (Debian's clickhouse-server 18.16
// and chDB 26.x): every ```sql block of src/infra/clickhouse/README.md and of the main README's
// "Usage history for the data team", split into statements, each run through the read-only path of
// `npm run cli -- sql` after a few rows under the examples' own ids (project proj_demo, customer
// acme, budget customer-42) were written the way the service writes them. Each must answer at
// least one row: an example that reads nothing proves nothing.

import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runReadOnly } from '../../src/http/routes/admin/readOnlySql.js'
import type { ClickHouseStore } from '../../src/infra/clickhouse/store.js'
import { insertEventsOnce, insertJournalOnce, type JournalRow, type UsageEventRow } from '../../src/infra/clickhouse/tables.js'
import { openTestStore, type TestStore } from '../support/store.js'

const ROOT = path.resolve(import.meta.dirname, '../..')

/** The ```sql blocks of a markdown text. */
function sqlBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sql\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string)
}

/** The text of a `## ` section, up to the next one. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`)
  if (start < 0) throw new Error(`no section "## ${heading}"`)
  const end = markdown.indexOf('\n## ', start + 1)
  return markdown.slice(start, end < 0 ? undefined : end)
}

/** The statements of a block, each with its comment lines and its `;`, as one would copy it. */
function statements(block: string): string[] {
  return block
    .split(/(?<=;)[ \t]*\n/)
    .map((s) => s.trim())
    .filter((s) => s.replace(/^--.*$/gm, '').trim() !== '')
}

const examples: [source: string, sql: string][] = [
  ...sqlBlocks(readFileSync(path.join(ROOT, 'src/infra/clickhouse/README.md'), 'utf8')).flatMap((b) =>
    statements(b).map((s): [string, string] => ['src/infra/clickhouse/README.md', s]),
  ),
  ...sqlBlocks(section(readFileSync(path.join(ROOT, 'README.md'), 'utf8'), 'Usage history for the data team')).flatMap((b) =>
    statements(b).map((s): [string, string] => ['README.md', s]),
  ),
]

// 2025-11-19T01:00:00Z: inside the fixed ranges the examples use (November 2025, that day).
const NOV_19 = Date.UTC(2025, 10, 19, 1)

function seedEvents(nowMs: number): UsageEventRow[] {
  const base = { project_id: 'proj_demo', event_slug: 'llm.completion', properties: '{"model":"small"}', decision: 'claim' }
  return [
    { ...base, event_id: 'ex-1', customer_id: 'acme', feature_slug: 'tokens', value: '1200', ts_ms: NOV_19 },
    { ...base, event_id: 'ex-2', customer_id: 'acme', feature_slug: 'tokens', value: '800.5', ts_ms: NOV_19 + 60_000 },
    { ...base, event_id: 'ex-2#completions', customer_id: 'acme', feature_slug: 'completions', value: '1', ts_ms: NOV_19 + 60_000 },
    { ...base, event_id: 'ex-3', customer_id: 'acme', feature_slug: 'tokens', value: '50', ts_ms: NOV_19 + 120_000, status: 'refused' },
    { ...base, event_id: 'ex-4', customer_id: 'globex', feature_slug: 'tokens', value: '70', ts_ms: NOV_19 },
    // Now, for the examples relative to today.
    { ...base, event_id: 'ex-5', customer_id: 'acme', feature_slug: 'tokens', value: '300', ts_ms: nowMs - 1000 },
    { ...base, event_id: 'ex-6', customer_id: 'acme', feature_slug: 'tokens', value: '25', ts_ms: nowMs - 900, status: 'refused' },
    { ...base, event_id: 'ex-7', customer_id: 'globex', feature_slug: 'tokens', value: '40', ts_ms: nowMs - 800 },
  ]
}

function seedJournal(nowMs: number): JournalRow[] {
  const base = { project_id: 'proj_demo', budget_key: 'customer-42', unit: 'USD' }
  return [
    { ...base, movement_id: 'customer-42#settle:h_1', kind: 'settle', hold_id: 'h_1', amount: '2.5', idempotency_key: 'k1', ts_ms: NOV_19 },
    { ...base, movement_id: 'customer-42#expiry:h_2', kind: 'expiry', hold_id: 'h_2', amount: '5', idempotency_key: 'k2', ts_ms: NOV_19 + 1000 },
    { ...base, movement_id: 'customer-42#charge:k3', kind: 'charge', hold_id: '', amount: '0.75', idempotency_key: 'k3', ts_ms: nowMs - 1000 },
  ]
}

const backends: [kind: 'server' | 'embedded'][] = [['server'], ['embedded']]

describe.each(backends)('the documented example queries: %s', (kind) => {
  let store: ClickHouseStore
  let opened: TestStore | undefined
  const database = `test_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    opened = await openTestStore(kind, database, { migrate: true })
    store = opened.store
    const nowMs = Date.now()
    await insertEventsOnce(store, seedEvents(nowMs))
    await insertJournalOnce(store, seedJournal(nowMs))
  })

  afterAll(async () => {
    await opened?.close()
  })

  it('finds the examples (both READMEs)', () => {
    expect(examples.filter(([source]) => source === 'README.md').length).toBeGreaterThanOrEqual(2)
    expect(examples.filter(([source]) => source !== 'README.md').length).toBeGreaterThanOrEqual(10)
    // Written for the ids the test seeds, not placeholders.
    for (const [, sql] of examples) expect(sql).not.toMatch(/'p1'|<[a-z_]+>|\.\.\./)
  })

  it.each(examples)('%s: %s', async (_source, sql) => {
    const result = await runReadOnly(store, sql, { maxRows: 1000, timeoutSeconds: 30 })
    if (!result.ok) throw new Error(`${result.reason}: ${result.message}`)
    expect(result.value.rows.length).toBeGreaterThan(0)
  })
})
