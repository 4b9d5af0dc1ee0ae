// The SQL-literal and TSV helpers both ClickHouse stores rely on (no server needed).

import { describe, expect, it } from 'vitest'
import { canonicalDecimal, dateTimeUtc, encodeTsv, plainNumber, sqlIdent, sqlList, sqlLiteral, sqlString, sqlTable } from '../../src/infra/clickhouse/sql.js'

describe('ClickHouse SQL helpers', () => {
  it('escapes string literals', () => {
    expect(sqlString("it's")).toBe("'it\\'s'")
    expect(sqlString('a\\b')).toBe("'a\\\\b'")
    expect(sqlString("x'; DROP TABLE t; --")).toBe("'x\\'; DROP TABLE t; --'")
    expect(sqlString('tab\tnl\ncr\rnul\0')).toBe("'tab\\tnl\\ncr\\rnul\\0'")
  })

  it('writes literals and lists', () => {
    expect(sqlLiteral(12)).toBe('12')
    expect(sqlLiteral(12n)).toBe('12')
    expect(sqlLiteral(true)).toBe('1')
    expect(() => sqlLiteral(Number.NaN)).toThrow()
    expect(sqlList(['a', 1])).toBe("('a', 1)")
    expect(sqlList([])).toBe('(NULL)')
  })

  it('accepts only plain identifiers', () => {
    expect(sqlIdent('test_ab12')).toBe('test_ab12')
    expect(sqlTable('db.usage_events')).toBe('db.usage_events')
    for (const bad of ['', '1abc', 'a-b', 'a b', 'a`b', 'x;DROP', 'db.t.']) expect(() => sqlTable(bad)).toThrow()
  })

  it('encodes rows as TabSeparated with the first row’s columns', () => {
    const { columns, body } = encodeTsv([
      { a: 'x\ty\nz\\', b: 1.5, c: null, d: { k: 'v' }, e: true, f: 10n },
      { a: '', b: 1e-7, c: undefined, d: [1], e: false, f: 0 },
    ])
    expect(columns).toEqual(['a', 'b', 'c', 'd', 'e', 'f'])
    expect(body).toBe('x\\ty\\nz\\\\\t1.5\t\\N\t{"k":"v"}\t1\t10\n\t0.0000001\t\\N\t[1]\t0\t0\n')
    expect(encodeTsv([])).toEqual({ columns: [], body: '' })
    expect(() => encodeTsv([{ 'bad name': 1 }])).toThrow()
  })

  it('writes numbers in plain decimal notation', () => {
    expect(plainNumber(3)).toBe('3')
    expect(plainNumber(1e-7)).toBe('0.0000001')
    expect(plainNumber(1e-9)).toBe('0')
    expect(plainNumber(1e21)).toBe('1000000000000000000000')
  })

  it('normalizes decimals from either version and formats DateTime text', () => {
    expect(canonicalDecimal('2.50000000')).toBe('2.5')
    expect(canonicalDecimal('2.5')).toBe('2.5')
    expect(canonicalDecimal('3.00000000')).toBe('3')
    expect(canonicalDecimal('-0.00000000')).toBe('0')
    expect(canonicalDecimal('120')).toBe('120')
    expect(dateTimeUtc(Date.UTC(2026, 10, 22, 3, 4, 5, 678))).toBe('2026-11-22 03:04:05')
  })
})
