import type { UsageEvent, UsageEventRow, UsageStatus } from './types.js'

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

/**
 * The raw-events table row of an accepted event. `feature_slug` is the feature whose meter
 * counts the event (src/entitlements/usage.ts countsOfEvents: the ingest worker maps it from the
 * customer's entitlements; the event slug when none counts it, which is also what the catalog's
 * default meter of a feature counts). `value` is what that feature's meter counts for the event
 * (1 for a count meter, `properties[aggregationField]` exactly for sum, max and latest); for an
 * event no feature counts, `eventValue`.
 */
export function toRow(
  event: UsageEvent,
  featureSlug: string = event.eventSlug,
  value?: string,
  eventId: string = event.eventId,
  status: UsageStatus = 'accepted',
  properties: string = propertiesText(event),
): UsageEventRow {
  return {
    event_id: eventId,
    project_id: event.projectId,
    customer_id: event.customerId,
    event_slug: event.eventSlug,
    feature_slug: featureSlug,
    value: value ?? eventValue(event.properties),
    properties,
    ts_ms: event.timestampMs,
    status,
    decision: CLAIM_DECISION,
  }
}

const NO_REFUSALS: ReadonlySet<string> = new Set()

/**
 * The rows of an accepted event: one per feature whose meter takes it (`features`, in order: the
 * one named like the event first), the first with the event's id and the others with
 * `<eventId>#<featureSlug>`, so each row has its own deterministic id (stored once, like the
 * event) and each feature's usage is its own rows' sum; an event no meter takes, one row under
 * its event slug. A row of a feature in `refused` (whose entitlement refused the event's usage
 * when the claim counted it) is `refused`, every other `accepted`.
 */
export function toRows(
  event: UsageEvent,
  features: readonly { featureSlug: string; value: string }[],
  refused: ReadonlySet<string> = NO_REFUSALS,
): UsageEventRow[] {
  if (features.length === 0) return [toRow(event)]
  // One JSON text of the properties for all of the event's rows.
  const properties = propertiesText(event)
  return features.map((f, i) =>
    toRow(
      event,
      f.featureSlug,
      f.value,
      i === 0 ? event.eventId : `${event.eventId}#${f.featureSlug}`,
      refused.has(f.featureSlug) ? 'refused' : 'accepted',
      properties,
    ),
  )
}

/** The row's `properties`: the event's as JSON text, '{}' when absent. */
function propertiesText(event: UsageEvent): string {
  return event.properties === undefined ? '{}' : JSON.stringify(event.properties)
}
