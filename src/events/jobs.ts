// The ingest job's two formats (types.ts): format 2 is what the gateway writes, format 1 what
// gateways before it wrote (still in the queue after an upgrade, and in dead letters made from
// such jobs). Everything that reads a job's events goes through this module.

import { plainNumber } from '../infra/clickhouse/sql.js'
import { eventValue } from './rows.js'
import type { IngestJobData, IngestJobDataV2, ProjectEvents, UsageEvent } from './types.js'

/** An accepted event on its way into a format-2 job (what the gateway holds until its group commit). */
export interface CompactEvent {
  projectId: string
  eventId: string
  customerId: string
  eventSlug: string
  timestampMs: number
  receivedMs: number
  /** eventValue(properties) as a decimal string (valueText). */
  value: string
  /** The properties as JSON text; '' when absent. */
  properties: string
}

/**
 * The value an event's row holds when no meter takes it (eventValue in rows.ts), as the decimal
 * string a TabSeparated field carries: a number in plain notation (plainNumber, as encodeTsv
 * writes it), a decimal string as it came.
 */
export function valueText(properties: Record<string, unknown> | undefined): string {
  const value = eventValue(properties)
  return typeof value === 'number' ? plainNumber(value) : value
}

/** A format-2 job of `events` (any projects, in order; grouped by project, order kept within each). */
export function encodeJob(batchId: string, events: readonly CompactEvent[]): IngestJobDataV2 {
  const t = events.length > 0 ? events[0]!.receivedMs : 0
  const groups = new Map<string, ProjectEvents>()
  for (const e of events) {
    let g = groups.get(e.projectId)
    if (g === undefined) {
      g = { projectId: e.projectId, ids: [], customers: [], slugs: [], received: [], ts: [], values: [], properties: [] }
      groups.set(e.projectId, g)
    }
    g.ids.push(e.eventId)
    g.customers.push(e.customerId)
    g.slugs.push(e.eventSlug)
    g.received.push(e.receivedMs - t)
    g.ts.push(e.timestampMs - e.receivedMs)
    g.values.push(e.value)
    g.properties.push(e.properties)
  }
  return { v: 2, batchId, t, projects: [...groups.values()] }
}

/**
 * A job in format 2, whichever format it is in: a format-1 job's values and properties text are
 * worked out here as the gateway of format 2 does (valueText, JSON.stringify), so its rows are
 * the ones format 1's worker wrote.
 */
export function compactJob(data: IngestJobData): IngestJobDataV2 {
  if (data.v === 2) return data
  const compact = data.events.map(
    (e): CompactEvent => ({
      projectId: e.projectId,
      eventId: e.eventId,
      customerId: e.customerId,
      eventSlug: e.eventSlug,
      timestampMs: e.timestampMs,
      receivedMs: e.receivedMs,
      value: valueText(e.properties),
      properties: e.properties === undefined ? '' : JSON.stringify(e.properties),
    }),
  )
  const job = encodeJob(data.batchId, compact)
  if (data.replay) job.replay = true
  return job
}

/** Event `i` of a project's group as a UsageEvent (properties parsed). `base`: the job's `t`. */
export function eventAt(group: ProjectEvents, i: number, base: number): UsageEvent {
  const receivedMs = base + group.received[i]!
  const event: UsageEvent = {
    eventId: group.ids[i]!,
    projectId: group.projectId,
    customerId: group.customers[i]!,
    eventSlug: group.slugs[i]!,
    timestampMs: receivedMs + group.ts[i]!,
    receivedMs,
  }
  const properties = group.properties[i]!
  if (properties !== '') event.properties = JSON.parse(properties) as Record<string, unknown>
  return event
}

/** Every event of a job, in either format, as UsageEvent objects (tests, dead-letter listings). */
export function eventsOfJob(data: IngestJobData): UsageEvent[] {
  if (data.v !== 2) return data.events
  return data.projects.flatMap((g) => g.ids.map((_, i) => eventAt(g, i, data.t)))
}

/** How many events a job holds, in either format. */
export function eventCountOfJob(data: IngestJobData): number {
  return data.v === 2 ? data.projects.reduce((n, g) => n + g.ids.length, 0) : data.events.length
}

/** A job's events of one project (either format), as UsageEvent objects; [] when it has none. */
export function projectEventsOfJob(data: IngestJobData, projectId: string): UsageEvent[] {
  if (data.v !== 2) return data.events.filter((e) => e.projectId === projectId)
  return data.projects.filter((g) => g.projectId === projectId).flatMap((g) => g.ids.map((_, i) => eventAt(g, i, data.t)))
}
