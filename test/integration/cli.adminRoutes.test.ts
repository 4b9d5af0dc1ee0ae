// POST /v1/admin/sql, the route `npm run cli -- sql` calls on a running gateway: the common route
// tests (it needs a gateway with a ClickHouse store, so they run here rather than in
// http.routes.test.ts), and read-only enforced on the server side whoever the client is: checked
// before anything is sent, then run with readonly = 1 on the ClickHouse server (18.16).
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { COMMON_GATEWAY, expectError, runCommonRouteTests } from '../support/commonRoutes.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'

const database = `test_admin_${randomBytes(6).toString('hex')}`
let gw: TestGateway

beforeAll(async () => {
  gw = await startTestGateway({
    ...COMMON_GATEWAY,
    clickhouse: 'on',
    clickhouseUrl: inject('clickhouseUrl'),
    clickhouseDatabase: database,
    ingestWorker: false,
  })
  await gw.clickhouse!.exec(`CREATE TABLE ${database}.admin_numbers (n UInt64, label String) ENGINE = MergeTree ORDER BY n`)
  await gw.clickhouse!.insert(
    `${database}.admin_numbers`,
    [1, 2, 3, 4, 5].map((n) => ({ n, label: `#${n}` })),
  )
})
afterAll(async () => {
  await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`)
  await gw?.close()
})

runCommonRouteTests(() => gw, { method: 'POST', path: '/v1/admin/sql', validBody: { query: 'SELECT 1 AS one' } })

const sql = (body: object, key = ROOT_KEY) => gw.post('/v1/admin/sql', body, key)
const rowCount = async () => (await gw.clickhouse!.query<{ c: string }>(`SELECT count() AS c FROM ${database}.admin_numbers`))[0]!.c

describe('POST /v1/admin/sql on the ClickHouse server', () => {
  test('answers the rows as ClickHouse renders them (64-bit integers as strings), at most maxRows', async () => {
    const all = await sql({ query: 'SELECT n, label FROM admin_numbers WHERE n <= 2 ORDER BY n' })
    expect(all.status, JSON.stringify(all.body)).toBe(200)
    expect(all.body).toEqual({
      store: 'server',
      database,
      rows: [
        { n: '1', label: '#1' },
        { n: '2', label: '#2' },
      ],
      truncated: false,
    })
    const cut = await sql({ query: 'SELECT n FROM admin_numbers ORDER BY n', maxRows: 3 })
    expect(cut.body).toMatchObject({ rows: [{ n: '1' }, { n: '2' }, { n: '3' }], truncated: true })
    const tables = await sql({ query: 'SHOW TABLES' })
    expect(tables.body.rows).toContainEqual({ name: 'admin_numbers' })
    const described = await sql({ query: 'DESCRIBE TABLE admin_numbers' })
    expect(described.body.rows.map((r: { name: string }) => r.name)).toEqual(['n', 'label'])
  })

  test.each([
    ["INSERT INTO admin_numbers VALUES (6, '#6')", 'starts with INSERT'],
    ['ALTER TABLE admin_numbers DELETE WHERE 1', 'starts with ALTER'],
    ['SELECT 1; DROP TABLE admin_numbers', 'One statement at a time'],
    ['WITH 1 AS x SELECT x; TRUNCATE TABLE admin_numbers', 'One statement at a time'],
    ["SELECT n FROM admin_numbers INTO OUTFILE 'out.tsv'", 'INTO OUTFILE'],
    ['SELECT n FROM admin_numbers SETTINGS readonly = 0', 'SETTINGS clause'],
    ['SELECT 1 /* unterminated', 'does not end'],
  ])('%s → 400 not_read_only before it is sent; nothing changed', async (query, why) => {
    const res = await sql({ query })
    expectError(res, 400, 'BAD_REQUEST', COMMON_GATEWAY.docsUrl)
    expect(res.body.error.details.reason).toBe('not_read_only')
    expect(res.body.error.message).toContain(why)
    expect(await rowCount()).toBe('5')
  })

  test.each([
    ["SELECT 'a;b' AS s", [{ s: 'a;b' }]],
    ["SELECT 'FORMAT TSV; DROP TABLE admin_numbers' AS s;", [{ s: 'FORMAT TSV; DROP TABLE admin_numbers' }]],
    ['SELECT 1 AS one -- ; DROP TABLE admin_numbers\n', [{ one: 1 }]],
    ['/* INSERT; */ (SELECT 2 AS two)', [{ two: 2 }]],
    ["SELECT count() AS c FROM system.settings WHERE name = 'readonly'", [{ c: '1' }]],
  ])('%j: a `;` or a keyword inside a literal or a comment is not a clause → 200', async (query, rows) => {
    const res = await sql({ query })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.rows).toEqual(rows)
  })

  test('what passes the check still runs with readonly = 1: the server refuses a table function (400 not_read_only)', async () => {
    const res = await sql({ query: "SELECT * FROM file('admin.tsv', TSV, 'a String')" })
    expectError(res, 400, 'BAD_REQUEST', COMMON_GATEWAY.docsUrl)
    expect(res.body.error.details.reason).toBe('not_read_only')
    expect(res.body.error.message).toMatch(/readonly/)
  })

  test('a query ClickHouse rejects → 400 query_failed with its message', async () => {
    const res = await sql({ query: 'SELECT nope FROM admin_numbers' })
    expectError(res, 400, 'BAD_REQUEST', COMMON_GATEWAY.docsUrl)
    expect(res.body.error.details.reason).toBe('query_failed')
    expect(res.body.error.message).toContain('nope')
  })

  test('a gateway without a ClickHouse store → 412 no_history_store', async () => {
    const bare = await startTestGateway({ ...COMMON_GATEWAY })
    try {
      const res = await bare.post('/v1/admin/sql', { query: 'SELECT 1' }, ROOT_KEY)
      expectError(res, 412, 'PRECONDITION_FAILED', COMMON_GATEWAY.docsUrl)
      expect(res.body.error.details.reason).toBe('no_history_store')
    } finally {
      await bare.close()
    }
  })
})
