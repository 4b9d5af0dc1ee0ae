import type { UsageEventColumns } from '../infra/clickhouse/tables.js'

/**
 * A raw usage event as accepted by the gateway and carried in an ingest job. `eventId` is
 * stable across retries of the same event (its `id`, else derived from the project and the
 * idempotencyKey), so ClickHouse can drop the copies that reach it twice.
 */
export interface UsageEvent {
  eventId: string
  projectId: string
  customerId: string
  eventSlug: string
  /** The caller's properties (an object), or absent. */
  properties?: Record<string, unknown>
  /** Epoch ms: the event's timestamp, or the time the gateway received it. */
  timestampMs: number
  /** Epoch ms the gateway accepted it (for lag figures). */
  receivedMs: number
}

/**
 * The body of one ingest job: one group commit of the gateway, any number of projects. The
 * gateway writes format 2 (`IngestJobDataV2`); the worker reads both, since jobs queued by an
 * older gateway and dead letters made from them are format 1 (`eventsOfJob` in jobs.ts reads either).
 */
export type IngestJobData = IngestJobDataV1 | IngestJobDataV2

/** Format 1: one object per event (gateways before format 2; their dead letters). */
export interface IngestJobDataV1 {
  /** Version of this shape. */
  v: 1
  /** Unique per group commit and kept on replay: the ClickHouse insert deduplication token. */
  batchId: string
  events: UsageEvent[]
  /** Set on a job replayed from the dead-letter queue: an earlier job of the batch may have stored some of it. */
  replay?: true
}

/**
 * Format 2: the events grouped by project, in parallel arrays (one entry per event, the same
 * index in each): the least to build in the gateway, to hold in Redis (~80 bytes per small event
 * against ~200) and to parse in the worker (no object per event), measured in src/events/README.md.
 */
export interface IngestJobDataV2 {
  v: 2
  batchId: string
  /** The epoch ms `receivedMs` counts from. */
  t: number
  projects: ProjectEvents[]
  replay?: true
}

/** One project's events of a format-2 job. */
export interface ProjectEvents {
  projectId: string
  ids: string[]
  customers: string[]
  slugs: string[]
  /** receivedMs − t of the job: when the gateway accepted the event. */
  received: number[]
  /** timestampMs − receivedMs (0 for an event without a timestamp). */
  ts: number[]
  /**
   * The event's value as the gateway normalized it (`eventValue`, as a decimal string): what its
   * row holds when no meter takes the event.
   */
  values: string[]
  /** The properties as JSON text, as the gateway measured them; '' when absent. */
  properties: string[]
}

/** A row of the raw events table, as the worker hands it to the sink. */
export interface UsageEventRow {
  event_id: string
  project_id: string
  customer_id: string
  event_slug: string
  /** The feature whose meter counts the event, else the event slug (src/entitlements/README.md). */
  feature_slug: string
  /**
   * What the meter of the row's feature counts for the event (a decimal string, exact), or for an
   * event no feature's meter counts, `properties.value` when it is a finite number (or a decimal
   * string), else 1.
   */
  value: number | string
  /** The properties as JSON text ('{}' when absent). */
  properties: string
  ts_ms: number
  /**
   * What the decision that made the row said of its usage: `accepted` (billable: invoices,
   * analytics, forecasts read only these) or `refused` (an entitlement's overage strategy turned
   * it away at the limit; kept, never billed).
   */
  status: UsageStatus
  /**
   * The decision that set `status`: `claim` (the ingest worker's claim, lua/claimEvents-N.lua) or
   * `consume:<runId>` (that run's consume, lua/consumeRun-12.lua).
   */
  decision: string
}

/** Whether a usage row is billable (src/events/README.md, "Accepted and refused usage"). */
export type UsageStatus = 'accepted' | 'refused'

/**
 * Where the ingest worker writes events: the ClickHouse store (src/infra/clickhouse/) implements it.
 * `dedupToken` is the same for every retry and replay of one job: a store with insert
 * deduplication drops a repeated insert, and the table keyed by event id drops the rest.
 * Must throw unless every row is durably stored.
 */
export interface EventSink {
  insertEvents(rows: UsageEventRow[], dedupToken: string, options?: { firstAttempt?: boolean }): Promise<void>
  /**
   * The same rows held as columns (the ingest worker's own form: no object per row); the
   * ClickHouse sink writes them as TabSeparated text straight away. The worker uses this when
   * the sink has it, else it hands `insertEvents` the rows as objects.
   */
  insertEventColumns?(columns: UsageEventColumns, dedupToken: string, options?: { firstAttempt?: boolean }): Promise<void>
}

/** What became of one submitted event. */
export type Admission = 'accepted' | 'duplicate' | 'customer_disabled'
