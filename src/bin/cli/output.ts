// How `sql` prints rows: one JSON object per line (for jq and scripts), or an aligned table.

/** One JSON object per line. */
export function jsonLines(rows: readonly Record<string, unknown>[]): string {
  return rows.map((row) => JSON.stringify(row)).join('\n')
}

/** A cell as text: strings as they are, NULL for null, anything else as JSON; one line. */
function cell(value: unknown): string {
  const text = typeof value === 'string' ? value : value === null || value === undefined ? 'NULL' : JSON.stringify(value)
  return text.replace(/\r?\n/g, '\\n').replace(/\t/g, '\\t')
}

/** The rows as an aligned table: the columns of every row in the order first seen, a rule under the header. */
export function table(rows: readonly Record<string, unknown>[]): string {
  const columns: string[] = []
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key)
  if (columns.length === 0) return '(no rows)'
  const cells = rows.map((row) => columns.map((c) => cell(row[c])))
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)))
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join(' | ')
      .trimEnd()
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-')
  return [line(columns), rule, ...cells.map(line), `(${rows.length} row${rows.length === 1 ? '' : 's'})`].join('\n')
}
