import type { UsageEvent, UsageEventRow } from './types.js'

const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/

/**
 * The value an event counts for: `properties.value` when it is a finite number or a decimal
 * string ("2.5"), else 1 (the event counts once). Documented in src/events/README.md.
 */
export function eventValue(properties: Record<string, unknown> | undefined): number {
  const value = properties?.value
  if (typeof value === 'number' && Number.isFinite(value)) return value
  if (typeof value === 'string' && DECIMAL.test(value)) return Number(value)
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
export function toRow(event: UsageEvent, featureSlug: string = event.eventSlug, value?: string, eventId: string = event.eventId): UsageEventRow {
  return {
    event_id: eventId,
    project_id: event.projectId,
    customer_id: event.customerId,
    event_slug: event.eventSlug,
    feature_slug: featureSlug,
    value: value ?? eventValue(event.properties),
    properties: event.properties === undefined ? '{}' : JSON.stringify(event.properties),
    ts_ms: event.timestampMs,
  }
}

/**
 * The rows of an accepted event: one per feature whose meter takes it (`features`, in order: the
 * one named like the event first), the first with the event's id and the others with
 * `<eventId>#<featureSlug>`, so each row has its own deterministic id (stored once, like the
 * event) and each feature's usage is its own rows' sum; an event no meter takes, one row under
 * its event slug.
 */
export function toRows(event: UsageEvent, features: readonly { featureSlug: string; value: string }[]): UsageEventRow[] {
  if (features.length === 0) return [toRow(event)]
  return features.map((f, i) => toRow(event, f.featureSlug, f.value, i === 0 ? event.eventId : `${event.eventId}#${f.featureSlug}`))
}
