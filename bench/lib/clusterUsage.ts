// The usage leg of the cluster bench: events recorded through every gateway, each batch and
// each single event sent twice at once through two gateways (a client retrying elsewhere), into
// projects whose ingestion keys ({cat:<project>}) sit on every master; then the M workers drain
// them, and ClickHouse must hold each event exactly once.

import { randomBytes } from 'node:crypto'
import { Queue } from 'bullmq'
import { Cluster } from 'ioredis'
import { DEAD_LETTER_QUEUE, INGEST_QUEUE, QUEUE_PREFIX } from '../../src/events/queue.js'
import { eventIdOf } from '../../src/events/service.js'
import { projectTag } from '../../src/infra/redis/keys.js'
import { chText } from './ingestMonitor.js'
import type { BenchCluster } from './clusterRedis.js'
import { call, pool, post, type Rig } from './clusterRig.js'
import { delay } from './proc.js'

const BATCH = 500
const BATCHES = 4
const SINGLES = 100
const DRAIN_TIMEOUT_MS = 120_000

export interface UsageFigures {
  projects: number
  /** Distinct events sent (each sent twice). */
  events: number
  /** Requests answered (batches and singles, retries included) and their wall time. */
  requests: number
  acceptedPerSec: number
  refused: number
  non200: number
  /** From the first request to the last event queryable in ClickHouse (s). */
  drainedS: number
  /** Per project: rows in usage_events, distinct event ids, usage_daily's event_count (counts every insert), expected. */
  stored: {
    projectId: string
    master: number
    rows: number
    distinct: number
    inserted: number
    expected: number
    missingIds: number
    /** A few of the missing event ids (ev-<run>-<n>: sent with an id; ik_…: with an idempotency key). */
    missingSample: string[]
  }[]
  exactlyOnce: boolean
  /** The ingest queue's job counts at the end, and the dead-letter queue's: where missing events went. */
  queue: Record<string, number>
}

/** Projects until every master holds one's {cat:<project>} tag: one project per master. */
async function projectsPerMaster(rig: Rig, cluster: BenchCluster): Promise<{ projectId: string; apiKey: string; master: number }[]> {
  const found = new Map<number, { projectId: string; apiKey: string; master: number }>()
  for (let i = 0; found.size < cluster.masters.length && i < 200; i++) {
    const p = await post(rig.urls[i % rig.urls.length]!, '/v1/projects/create', rig.rootKey, { name: `usage-${i}` })
    const [master] = await cluster.mastersOf([projectTag(p.projectId)])
    if (!found.has(master!)) found.set(master!, { projectId: p.projectId, apiKey: p.apiKey, master: master! })
  }
  if (found.size < cluster.masters.length) throw new Error('no project landed on some master in 200 tries')
  return [...found.values()]
}

interface Sent {
  requests: number
  refused: number
  non200: number
}

/** Every request twice at once, through gateways i and i+1; half the events carry an id, half an idempotencyKey. */
async function sendProject(rig: Rig, p: { projectId: string; apiKey: string }, run: string, offset: number): Promise<{ sent: Sent; ids: string[] }> {
  const ids: string[] = []
  const event = (n: number): Record<string, unknown> => {
    const e = n % 2 === 0 ? { id: `ev-${run}-${n}` } : { idempotencyKey: `ik-${run}-${n}` }
    ids.push(eventIdOf(p.projectId, e))
    return { ...e, customerId: `c-${n % 16}`, eventSlug: 'api_call', properties: { value: 1 } }
  }
  const reqs: { route: string; body: unknown }[] = []
  for (let b = 0; b < BATCHES; b++)
    reqs.push({ route: '/v1/usage/record-batch', body: { events: Array.from({ length: BATCH }, (_, i) => event(b * BATCH + i)) } })
  for (let s = 0; s < SINGLES; s++) reqs.push({ route: '/v1/usage/record', body: event(BATCHES * BATCH + s) })
  const sent: Sent = { requests: 0, refused: 0, non200: 0 }
  const n = rig.urls.length
  await pool(reqs, 8, async (r, i) => {
    const twice = [rig.urls[(offset + i) % n]!, rig.urls[(offset + i + 1) % n]!].map((url) => call(url, r.route, p.apiKey, r.body))
    for (const a of await Promise.all(twice)) {
      sent.requests++
      if (a.status !== 200) sent.non200++
      else if (a.body.results) sent.refused += (a.body.results as { accepted: boolean }[]).filter((x) => !x.accepted).length
      else if (a.body.accepted !== true) sent.refused++
    }
  })
  return { sent, ids }
}

/** Jobs of the ingest queue not yet done (waiting, active, delayed, retried). */
async function pendingJobs(queue: Queue): Promise<number> {
  const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children')
  return Object.values(c).reduce((s, v) => s + v, 0)
}

const sq = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`

async function storedOf(chUrl: string, database: string, projectId: string, ids: string[]) {
  const q = async (sql: string): Promise<number> => Number((await chText(chUrl, sql, database)).trim())
  const rows = await q(`SELECT count() FROM usage_events WHERE project_id = ${sq(projectId)}`)
  const distinct = await q(`SELECT uniqExact(event_id) FROM usage_events WHERE project_id = ${sq(projectId)}`)
  // The materialized view adds every inserted row here, so a duplicate insert shows even after
  // ReplacingMergeTree merged it away in usage_events.
  const inserted = await q(`SELECT sum(event_count) FROM usage_daily WHERE project_id = ${sq(projectId)}`)
  const expected = new Set(ids)
  const found = (await chText(chUrl, `SELECT DISTINCT event_id FROM usage_events WHERE project_id = ${sq(projectId)} FORMAT TSV`, database))
    .split('\n')
    .filter(Boolean)
  const have = new Set(found)
  const missing = [...expected].filter((id) => !have.has(id))
  return { rows, distinct, inserted, expected: expected.size, missingIds: missing.length, missingSample: missing.slice(0, 5) }
}

export async function usageLeg(rig: Rig, cluster: BenchCluster, chUrl: string, database: string): Promise<UsageFigures> {
  const projects = await projectsPerMaster(rig, cluster)
  const run = randomBytes(4).toString('hex')
  const t0 = Date.now()
  const sends = await Promise.all(projects.map((p, i) => sendProject(rig, p, run, i)))
  const sendS = (Date.now() - t0) / 1000
  const connection = new Cluster(cluster.masters.map((m) => ({ host: '127.0.0.1', port: m.port })))
  const queue = new Queue(INGEST_QUEUE, { connection, prefix: QUEUE_PREFIX })
  try {
    const deadline = Date.now() + DRAIN_TIMEOUT_MS
    let stored = await Promise.all(projects.map((p, i) => storedOf(chUrl, database, p.projectId, sends[i]!.ids)))
    // Done when every project has all its events and the queue is empty (no late duplicate to come).
    while (Date.now() < deadline && (stored.some((s) => s.distinct < s.expected) || (await pendingJobs(queue)) > 0)) {
      await delay(100)
      stored = await Promise.all(projects.map((p, i) => storedOf(chUrl, database, p.projectId, sends[i]!.ids)))
    }
    const drainedS = (Date.now() - t0) / 1000
    const events = sends.reduce((s, x) => s + new Set(x.ids).size, 0)
    const sent = sends.reduce((s, x) => ({ requests: s.requests + x.sent.requests, refused: s.refused + x.sent.refused, non200: s.non200 + x.sent.non200 }), {
      requests: 0,
      refused: 0,
      non200: 0,
    })
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed')
    const dlq = new Queue(DEAD_LETTER_QUEUE, { connection, prefix: QUEUE_PREFIX })
    const dead = await dlq.getJobCounts('waiting', 'failed').finally(() => dlq.close())
    const queueCounts = { ...counts, deadLetterWaiting: dead.waiting ?? 0, deadLetterFailed: dead.failed ?? 0 }
    const rows = stored.map((s, i) => ({ projectId: projects[i]!.projectId, master: projects[i]!.master, ...s }))
    const exactlyOnce =
      sent.refused === 0 &&
      sent.non200 === 0 &&
      rows.every((s) => s.rows === s.expected && s.distinct === s.expected && s.inserted === s.expected && s.missingIds === 0)
    return { projects: projects.length, events, ...sent, acceptedPerSec: events / sendS, drainedS, stored: rows, exactlyOnce, queue: queueCounts }
  } finally {
    await queue.close()
    connection.disconnect()
  }
}
