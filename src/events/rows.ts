import type { UsageEventColumns } from '../infra/clickhouse/tables.js'
import type { ProjectEvents, UsageStatus } from './types.js'

/** The decision of the ingest worker's claim (lua/claimEvents-N.lua), as rows name it. */
export const CLAIM_DECISION = 'claim'

/** At most 20 integer digits: what a Decimal(38, 8) column holds with room to sum. */
const DECIMAL = /^-?[0-9]{1,20}(\.[0-9]+)?$/
const MAX_VALUE = 1e20

/**
 * The value an event counts for: `properties.value` when it is a finite number below 10^20 in
 * magnitude or a decimal string of at most 20 integer digits ("2.5"; kept as text when a number
 * would not hold it exactly), else 1 (the event counts once), so no event's value can overflow
 * the Decimal(38, 8) column and fail its batch's insert. Documented in src/events/README.md.
 */
export function eventValue(properties: Record<string, unknown> | undefined): number | string {
  const value = properties?.value
  if (typeof value === 'number' && Number.isFinite(value) && Math.abs(value) < MAX_VALUE) return value
  if (typeof value === 'string' && DECIMAL.test(value)) return String(Number(value)) === value ? Number(value) : value
  return 1
}

const NO_REFUSALS: ReadonlySet<string> = new Set()

/**
 * Appends the rows of event `i` of a job's project group (format 2, jobs.ts; `t` the job's base
 * of `received`) to `columns`: one per feature whose meter takes it (`features`, in order: the
 * one named like the event first), the first with the event's id and the others with
 * `<eventId>#<featureSlug>`, so each row has its own deterministic id (stored once, like the
 * event) and each feature's usage is its own rows' sum, valued as that feature's meter counts
 * the event (src/entitlements/usage.ts countsOfEvents); an event no meter takes, one row under
 * its event slug valued as the gateway worked out (eventValue). A row of a feature in `refused`
 * (whose entitlement refused the event's usage when the claim counted it) is `refused`, every
 * other `accepted`. `properties` is the event's JSON text as it came ('{}' when absent), shared
 * by all its rows.
 */
export function appendEventRows(
  columns: UsageEventColumns,
  group: ProjectEvents,
  t: number,
  i: number,
  features: readonly { featureSlug: string; value: string }[],
  refused: ReadonlySet<string> = NO_REFUSALS,
): void {
  const eventId = group.ids[i]!
  const row = {
    project_id: group.projectId,
    event_id: eventId,
    customer_id: group.customers[i]!,
    event_slug: group.slugs[i]!,
    feature_slug: group.slugs[i]!,
    value: group.values[i]!,
    properties: group.properties[i] || '{}',
    ts_ms: t + group.received[i]! + group.ts[i]!,
    status: 'accepted' as UsageStatus,
    decision: CLAIM_DECISION,
  }
  if (features.length === 0) {
    columns.push(row)
    return
  }
  features.forEach((f, k) => {
    row.event_id = k === 0 ? eventId : `${eventId}#${f.featureSlug}`
    row.feature_slug = f.featureSlug
    row.value = f.value
    row.status = refused.has(f.featureSlug) ? 'refused' : 'accepted'
    columns.push(row)
  })
}
