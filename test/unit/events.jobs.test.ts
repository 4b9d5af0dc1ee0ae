// The ingest job's format 2 (src/events/jobs.ts): grouped by project in parallel arrays, read
// back as the events that went in (either format), and the value text a row carries is the one
// encodeTsv writes for the value format 1's worker computed.
import { describe, expect, test } from 'vitest'
import { compactJob, encodeJob, eventCountOfJob, eventsOfJob, projectEventsOfJob, valueText, type CompactEvent } from '../../src/events/jobs.js'
import { eventValue } from '../../src/events/rows.js'
import type { UsageEvent } from '../../src/events/types.js'
import { encodeTsv } from '../../src/infra/clickhouse/sql.js'

const T = 1_790_000_000_000

function event(i: number, projectId: string, properties?: Record<string, unknown>): UsageEvent {
  const e: UsageEvent = {
    eventId: `e-${i}`,
    projectId,
    customerId: `c-${i % 2}`,
    eventSlug: 'api_call',
    // Before, at and after the time it was received (a clock 5 minutes ahead is allowed).
    timestampMs: T + [-86_400_000, 0, 299_999][i % 3]!,
    receivedMs: T + i,
  }
  if (properties) e.properties = properties
  return e
}

function compact(e: UsageEvent): CompactEvent {
  return { ...e, value: valueText(e.properties), properties: e.properties === undefined ? '' : JSON.stringify(e.properties) }
}

describe('ingest job format 2', () => {
  test('groups by project, keeps the order within each, and reads back the same events', () => {
    const list = [event(0, 'p-a', { value: 2 }), event(1, 'p-b'), event(2, 'p-a', {}), event(3, 'p-b', { nested: { deep: ['x'] } })]
    const job = JSON.parse(JSON.stringify(encodeJob('b-1', list.map(compact)))) as ReturnType<typeof encodeJob>
    expect(job.projects.map((g) => [g.projectId, g.ids])).toEqual([
      ['p-a', ['e-0', 'e-2']],
      ['p-b', ['e-1', 'e-3']],
    ])
    expect(job.projects[0]!.received).toEqual([0, 2])
    expect(eventsOfJob(job)).toEqual([list[0], list[2], list[1], list[3]])
    expect(projectEventsOfJob(job, 'p-b')).toEqual([list[1], list[3]])
    expect(projectEventsOfJob(job, 'p-none')).toEqual([])
    expect(eventCountOfJob(job)).toBe(4)
  })

  test('a format-1 job reads as the format-2 job of the same events, its replay mark kept', () => {
    const list = [event(0, 'p-a', { value: '0.5' }), event(1, 'p-b', { value: 1e-7 }), event(2, 'p-a')]
    const v1 = { v: 1 as const, batchId: 'b-2', events: list, replay: true as const }
    expect(compactJob(v1)).toEqual({ ...encodeJob('b-2', list.map(compact)), replay: true })
    expect(eventsOfJob(v1)).toBe(list)
    expect(projectEventsOfJob(v1, 'p-a')).toEqual([list[0], list[2]])
  })

  test.each([
    [{ value: 7 }],
    [{ value: 2.5 }],
    [{ value: '2.50' }],
    [{ value: '12345678901234567890.12345678' }],
    [{ value: 1e-7 }],
    [{ value: -0 }],
    [{ value: 'x' }],
    [{ value: 1e21 }],
    [undefined],
  ])('the value text of %j is what encodeTsv writes for eventValue', (properties) => {
    expect(valueText(properties)).toBe(encodeTsv([{ v: eventValue(properties) }]).body.slice(0, -1))
  })
})
