// The ingest job's two formats (src/events/types.ts, jobs.ts): the gateway writes format 2
// (events grouped by project in parallel arrays, properties as JSON text, the value worked out
// once), and the worker still reads format 1, the jobs an older gateway queued and the dead
// letters made from them. The same events as a format-1 job and as a format-2 job become the
// same usage_events rows; a format-1 dead letter is replayed as it is (marked a replay) and
// stored once. Real Redis, real ClickHouse (the test server), the real worker and sink.

import { Queue } from 'bullmq'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { inject } from 'vitest'
import { clickHouseEventSink } from '../../src/events/clickhouse.js'
import { listDeadLetters, replayDeadLetters, type DeadLetterData } from '../../src/events/deadLetters.js'
import { compactJob, encodeJob, eventCountOfJob, eventsOfJob, valueText } from '../../src/events/jobs.js'
import { BATCH_JOB, QUEUE_PREFIX, ingestJobOptions } from '../../src/events/queue.js'
import type { IngestJobData, IngestJobDataV1, UsageEvent } from '../../src/events/types.js'
import { connectRedis } from '../../src/infra/redis/connection.js'
import { loadLibrary } from '../../src/infra/redis/scripts.js'
import { startIngestWorker, type IngestWorker } from '../../src/workers/ingest.js'
import { uniquePrefix } from '../support/redis.js'
import { waitFor } from '../support/processes.js'
import { openTestStore, type TestStore } from '../support/store.js'

const logger = pino({ level: 'silent' })
const NOW = Date.now()

/** Events of a project: numeric, decimal and absent values, odd properties, one without properties. */
function events(projectId: string): UsageEvent[] {
  const list: UsageEvent[] = Array.from({ length: 40 }, (_, i) => ({
    eventId: `e-${i}`,
    projectId,
    customerId: `c-${i % 3}`,
    eventSlug: i % 2 ? 'llm.call' : 'tool.run',
    properties: { value: i % 3 === 0 ? i / 4 : i % 3 === 1 ? `${i}.10` : 'not a number', note: `tab\there "${i}" \\ ü` },
    timestampMs: NOW - 60_000 + i,
    receivedMs: NOW - 1000 + (i % 7),
  }))
  list.push({ eventId: 'bare', projectId, customerId: 'c-0', eventSlug: 'plain', timestampMs: NOW - 5, receivedMs: NOW })
  list.push({ eventId: 'empty', projectId, customerId: 'c-0', eventSlug: 'plain', properties: {}, timestampMs: NOW - 4, receivedMs: NOW })
  return list
}

/** The same events as the gateway of format 2 would queue them. */
function v2Of(batchId: string, list: UsageEvent[]): IngestJobData {
  return encodeJob(
    batchId,
    list.map((e) => ({
      ...e,
      value: valueText(e.properties),
      properties: e.properties === undefined ? '' : JSON.stringify(e.properties),
    })),
  )
}

let history: TestStore | undefined
let worker: IngestWorker | undefined
const prefix = uniquePrefix()
const queues = { ingestQueue: `usage-events-${prefix}`, deadLetterQueue: `usage-dlq-${prefix}` }
const connection = connectRedis(inject('redisUrl'), 'test-formats', { blocking: true })
const ingest = new Queue<IngestJobData>(queues.ingestQueue, { connection, prefix: QUEUE_PREFIX })

beforeAll(async () => {
  history = await openTestStore('server', `test_${prefix}`, { migrate: true })
  await loadLibrary(connection)
})
afterAll(async () => {
  await worker?.close()
  await ingest.close()
  await connection.quit()
  await history?.close()
})

async function rowsOf(projectId: string): Promise<Record<string, unknown>[]> {
  return history!.store.query(
    `SELECT event_id, customer_id, event_slug, feature_slug, toString(value) AS value, properties, ts_ms, status, decision
     FROM usage_events WHERE project_id = '${projectId}' ORDER BY event_id, feature_slug`,
  )
}

describe('ingest job formats', () => {
  test('a job reads back the same in either format, and format 2 costs at most 60% of the bytes (escaped properties here; ~40% for small ones)', () => {
    const list = events('p-x')
    const v1: IngestJobDataV1 = { v: 1, batchId: 'b', events: list }
    const v2 = JSON.parse(JSON.stringify(v2Of('b', list))) as IngestJobData
    expect(eventsOfJob(v2)).toEqual(list)
    expect(eventCountOfJob(v2)).toBe(list.length)
    expect(eventCountOfJob(v1)).toBe(list.length)
    expect(compactJob(v1)).toEqual(v2)
    expect(JSON.stringify(v2).length).toBeLessThan(JSON.stringify(v1).length * 0.6)
  })

  test('the worker stores the same rows from a format-1 job as from a format-2 job, and replays a format-1 dead letter', async () => {
    const one = `p-v1-${prefix}`
    const two = `p-v2-${prefix}`
    const dead = `p-dead-${prefix}`
    await ingest.add(BATCH_JOB, { v: 1, batchId: `b1-${prefix}`, events: events(one) }, ingestJobOptions({ attempts: 3, backoffMs: 20 }))
    await ingest.add(BATCH_JOB, v2Of(`b2-${prefix}`, events(two)), ingestJobOptions({ attempts: 3, backoffMs: 20 }))
    // A dead letter of format 1, as a worker before format 2 left it.
    const dlq = new Queue<DeadLetterData>(queues.deadLetterQueue, { connection, prefix: QUEUE_PREFIX })
    await dlq.add(BATCH_JOB, {
      v: 1,
      batchId: `b3-${prefix}`,
      events: events(dead),
      deadLetter: { jobId: '7', failedReason: 'the store was down', attempts: 8, atMs: NOW },
    })
    await dlq.close()
    expect((await listDeadLetters({ connection, ...queues })).map((d) => d.events)).toEqual([events(dead).length])
    expect(await replayDeadLetters({ connection, ...queues })).toHaveLength(1)
    const replayed = (await ingest.getJobs(['waiting'])).find((j) => j.data.batchId === `b3-${prefix}`)
    expect(replayed?.data).toMatchObject({ v: 1, replay: true })
    expect(replayed?.data).not.toHaveProperty('deadLetter')

    worker = startIngestWorker({ connection, sink: clickHouseEventSink(history!.store), logger, concurrency: 2, ...queues })
    const n = events(one).length
    for (const p of [one, two, dead]) await waitFor(`rows of ${p}`, async () => (await rowsOf(p)).length === n || undefined, 30_000)
    const fromV1 = await rowsOf(one)
    expect(await rowsOf(two)).toEqual(fromV1)
    expect(await rowsOf(dead)).toEqual(fromV1)
    expect(fromV1.find((r) => r.event_id === 'bare')).toMatchObject({ value: expect.stringMatching(/^1(\.0+)?$/), properties: '{}' })
    expect(fromV1.find((r) => r.event_id === 'e-1')).toMatchObject({
      value: expect.stringMatching(/^1\.10*$/),
      properties: JSON.stringify(events(one)[1]!.properties),
    })
    expect(fromV1.find((r) => r.event_id === 'e-2')?.value).toMatch(/^1(\.0+)?$/)
  })
})
