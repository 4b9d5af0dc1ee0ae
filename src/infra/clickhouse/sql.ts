// SQL literals and the row encoding both stores insert with. Every value that
// reaches SQL text goes through one of these; nothing is concatenated raw.

/** A ClickHouse string literal: '…' with backslash escapes (the same on 18.16 and 26.x). */
export function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\0/g, '\\0').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t')}'`
}

/** A literal for a string, a finite number, a bigint or a boolean (as 0/1). */
export function sqlLiteral(value: string | number | bigint | boolean): string {
  if (typeof value === 'string') return sqlString(value)
  if (typeof value === 'bigint') return value.toString()
  if (typeof value === 'boolean') return value ? '1' : '0'
  if (!Number.isFinite(value)) throw new Error(`not a finite number: ${value}`)
  return String(value)
}

/** `('a', 'b', …)` for `x IN …`; an empty list becomes `(NULL)`, which is valid SQL and matches nothing. */
export function sqlList(values: ReadonlyArray<string | number | bigint>): string {
  return values.length === 0 ? '(NULL)' : `(${values.map(sqlLiteral).join(', ')})`
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Whether a name is a plain SQL identifier (what sqlIdent accepts). */
export function isSqlIdent(name: string): boolean {
  return IDENT.test(name)
}

/** A database, table or column name. Only plain identifiers are accepted, so no quoting dialect is needed. */
export function sqlIdent(name: string): string {
  if (!IDENT.test(name)) throw new Error(`not a plain SQL identifier: ${JSON.stringify(name)}`)
  return name
}

/** `db.table` or `table`, each part checked by sqlIdent. */
export function sqlTable(name: string): string {
  return name.split('.').map(sqlIdent).join('.')
}

/**
 * Rows as TabSeparated text with the columns of the first row, in its key order.
 *
 * Why TSV and not JSONEachRow: 18.16 parses a Decimal from JSON only as an
 * unquoted number, which JSON.stringify cannot write from a decimal string
 * without going through a float. TSV takes `1.12345678` as text for String,
 * Decimal and UInt64 columns alike, on every version. Strings are escaped as
 * TSV wants (\\ \t \n \r \0); null/undefined is \N; objects are JSON text.
 */
export function encodeTsv(rows: ReadonlyArray<Record<string, unknown>>): { columns: string[]; body: string } {
  const first = rows[0]
  if (first === undefined) return { columns: [], body: '' }
  const columns = Object.keys(first).map(sqlIdent)
  const lines = new Array<string>(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as Record<string, unknown>
    let line = ''
    for (let c = 0; c < columns.length; c++) {
      if (c > 0) line += '\t'
      line += tsvField(row[columns[c] as string])
    }
    lines[i] = line
  }
  return { columns, body: lines.join('\n') + '\n' }
}

const TSV_SPECIAL = /[\\\t\n\r\0]/

/** A string as a TabSeparated field: the escaping encodeTsv gives every string (\\ \t \n \r \0). */
export function tsvText(value: string): string {
  return TSV_SPECIAL.test(value) ? escapeTsv(value) : value
}

function tsvField(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  switch (typeof value) {
    case 'string':
      return tsvText(value)
    case 'number':
      return plainNumber(value)
    case 'bigint':
      return value.toString()
    case 'boolean':
      return value ? '1' : '0'
    default:
      return escapeTsv(JSON.stringify(value))
  }
}

/**
 * A number in plain decimal notation: String(1e-7) is "1e-7", which a
 * Decimal column does not parse. Below 1e-6 it is rounded to the 8 decimals
 * our Decimal(38, 8) columns keep; from 1e21 on, doubles are integers.
 */
export function plainNumber(value: number): string {
  if (!Number.isFinite(value)) throw new Error(`not a finite number: ${value}`)
  const text = String(value)
  if (!text.includes('e')) return text
  if (Math.abs(value) >= 1e21) return BigInt(value).toString()
  return canonicalDecimal(value.toFixed(8))
}

function escapeTsv(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\0/g, '\\0')
}

/** 'YYYY-MM-DD hh:mm:ss' in UTC: how a DateTime('UTC') column reads text on every version. */
export function dateTimeUtc(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19).replace('T', ' ')
}

/**
 * toString(Decimal) differs by version: 18.16 pads to the scale ("2.50000000"),
 * 26.x trims ("2.5"). Both become the trimmed form.
 */
export function canonicalDecimal(text: string): string {
  if (!text.includes('.')) return text === '-0' ? '0' : text
  const trimmed = text.replace(/0+$/, '').replace(/\.$/, '')
  return trimmed === '-0' ? '0' : trimmed
}
