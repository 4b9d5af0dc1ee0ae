/**
 * The ClickHouse tables the journal outbox may write (src/journal/README.md): one line per
 * table, `idColumn` being the column that identifies a row within its project (`movement_id`
 * for journals, `event_id` for usage events). A row pushed for a table not listed here is
 * dead-lettered by the drain, never inserted.
 */
export const journalTables: Record<string, { idColumn: string }> = {
  budget_journal: { idColumn: 'movement_id' },
  usage_events: { idColumn: 'event_id' },
  wallet_journal: { idColumn: 'movement_id' },
  invoice_lines: { idColumn: 'movement_id' },
}
