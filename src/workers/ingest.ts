import { hash } from 'node:crypto'
import { Queue, Worker, type Job } from 'bullmq'
import { Batcher } from '../events/batcher.js'
import type { Logger } from 'pino'
import type { DeadLetterData } from '../events/deadLetters.js'
import { BATCH_JOB, DEAD_LETTER_QUEUE, INGEST_QUEUE, QUEUE_PREFIX } from '../events/queue.js'
import { CatalogReads } from '../catalog/service.js'
import {
  countsOfEvents,
  reachedDecisionOf,
  type CountableEvent,
  type EventCount,
  type EventRowFeature,
  type LimitReachedDecision,
} from '../entitlements/usage.js'
import { compactJob, eventCountOfJob } from '../events/jobs.js'
import { claimEvents } from '../events/redis.js'
import { appendEventRows } from '../events/rows.js'
import type { EventSink, IngestJobData, IngestJobDataV2, ProjectEvents } from '../events/types.js'
import { UsageEventColumns } from '../infra/clickhouse/tables.js'
import type { RedisClient } from '../infra/redis/scripts.js'

export interface IngestWorkerOptions {
  /** A connection made for BullMQ workers: `connectRedis(url, name, { blocking: true })`. */
  connection: RedisClient
  sink: EventSink
  logger: Logger
  /**
   * ClickHouse inserts running at the same time; each carries the rows of one or more jobs,
   * and the worker holds `16 × concurrency` jobs at once (BullMQ concurrency).
   */
  concurrency: number
  /**
   * How jobs share an insert (MergeOptions). Each ClickHouse insert makes parts in usage_events
   * and both aggregates, which merges then rewrite, so one insert per small job costs ClickHouse
   * far more CPU than its rows do (bench/README.md).
   */
  merge?: Partial<MergeOptions>
  /** BullMQ lockDuration and stalledInterval (default 30 s): how soon a crashed worker's jobs are taken over. */
  lockMs?: number
  /** Queue names; tests use their own. */
  ingestQueue?: string
  deadLetterQueue?: string
  /**
   * Told, right after a claim, of the counts that took a customer's usage of a feature to its
   * limit (the script's decision: exact used, limit and period; src/notifications/README.md,
   * limit.reached). Called before the insert: a retried batch's claim decides nothing again. A
   * throw is logged, never retried (the decision stands; that notification is lost).
   */
  onLimitReached?: (projectId: string, decisions: LimitReachedDecision[]) => Promise<unknown>
}

export interface MergeOptions {
  /** A job's rows wait this long for other jobs' rows. */
  maxWaitMs: number
  /** Jobs per insert, at most. */
  maxJobs: number
  /** Rows per insert, at most (a job's rows are never split; a larger job goes alone). */
  maxRows: number
}

export const DEFAULT_MERGE: MergeOptions = { maxWaitMs: 50, maxJobs: 16, maxRows: 40_000 }

/** Jobs held at once per insert in flight (BullMQ concurrency = this × concurrency). */
const JOBS_PER_INSERT_SLOT = 16

export interface IngestWorker {
  worker: Worker<IngestJobData>
  close(): Promise<void>
}

/** A job's rows on their way to a (possibly shared) insert. */
interface InsertPart {
  batchId: string
  rows: UsageEventColumns
  /** The job's first start and no replay: nothing of it can be stored yet. */
  firstAttempt: boolean
}

/**
 * The insert's dedup token: a lone job's batchId (kept on its retries and replays); for jobs
 * merged into one insert, a digest of their batchIds (the same if the same jobs merge again).
 */
function dedupTokenOf(parts: readonly InsertPart[]): string {
  if (parts.length === 1) return parts[0]!.batchId
  return (
    'm_' +
    hash(
      'sha256',
      parts
        .map((p) => p.batchId)
        .sort()
        .join('\n'),
      'base64url',
    )
  )
}

/**
 * A worker that crashes while it holds a job leaves it "stalled"; BullMQ gives it to another
 * worker, and past this many stalls fails it without running our processor (then the failed
 * listener below dead-letters it, so its events are never lost).
 */
const MAX_STALLS = 10

/**
 * An event of a format-2 group as countsOfEvents reads it. Its properties are parsed from the
 * job's JSON text only if a meter of its customer looks at them (most events: never).
 */
class GroupEvent implements CountableEvent {
  readonly customerId: string
  readonly eventSlug: string
  readonly timestampMs: number
  readonly receivedMs: number
  private parsed: Record<string, unknown> | undefined | null = null

  constructor(
    private readonly group: ProjectEvents,
    private readonly i: number,
    t: number,
  ) {
    this.customerId = group.customers[i]!
    this.eventSlug = group.slugs[i]!
    this.receivedMs = t + group.received[i]!
    this.timestampMs = this.receivedMs + group.ts[i]!
  }

  get properties(): Record<string, unknown> | undefined {
    if (this.parsed === null) {
      const text = this.group.properties[this.i]!
      this.parsed = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>)
    }
    return this.parsed
  }
}

const NO_COUNTS: { counts: EventCount[]; rows: EventRowFeature[][] } = { counts: [], rows: [] }

/**
 * The rows of the events of a batch that this batch owns, appended to `columns` (one claim
 * script per project), each event's rows naming the features whose meters take it. The claim
 * also counts each newly claimed event's usage against its customer's entitlements
 * (src/entitlements/README.md), from the customers' read documents (one pipelined read per
 * project), and says which features refused it; the counts that reached a limit go to
 * `onLimitReached` at once. A project none of whose customers the catalog knows counts nothing
 * and needs no per-event work before the claim.
 */
async function ownedRows(
  connection: RedisClient,
  catalog: CatalogReads,
  job: IngestJobDataV2,
  columns: UsageEventColumns,
  onLimitReached: (projectId: string, decisions: LimitReachedDecision[]) => Promise<void>,
): Promise<void> {
  for (const group of job.projects) {
    const { projectId } = group
    const customers = await catalog.customers(projectId, [...new Set(group.customers)])
    const { counts, rows } =
      customers.size === 0
        ? NO_COUNTS
        : countsOfEvents(
            group.ids.map((_, i) => new GroupEvent(group, i, job.t)),
            customers,
          )
    const claim = await claimEvents(connection, projectId, job.batchId, group.ids, Date.now(), counts)
    for (let i = 0; i < group.ids.length; i++) {
      const refused = claim.owned.get(group.ids[i]!)
      if (refused) appendEventRows(columns, group, job.t, i, rows[i] ?? [], refused)
    }
    if (claim.reached.length > 0)
      await onLimitReached(
        projectId,
        claim.reached.map((r) => reachedDecisionOf(r.count, r)),
      )
  }
}

/**
 * The processor of the ingest queue: writes each batch job's events to the sink, in one insert
 * shared with the other jobs that arrive within `merge.maxWaitMs` (up to `merge.maxJobs` jobs
 * and `merge.maxRows` rows; a
 * lone job's batchId is the insert's dedup token). A job completes only once the insert that
 * carries its rows returned; a retried or replayed job inserts alone. Exactly once: the gateway may put an
 * event into two jobs (a retry racing its first send), and two workers may run both at once;
 * each event is first claimed in Redis for one batch (lua/claimEvents-N.lua), and a batch
 * inserts only the events it owns; the sink skips those an earlier attempt of the same batch
 * already stored. A failing insert is retried with the
 * job's backoff (set by the gateway: exponential, METERING_INGEST_ATTEMPTS attempts); the last
 * failing attempt moves the job to the dead-letter queue (src/events/deadLetters.ts lists and
 * replays it) and completes it. The dead letter's job id is derived from the job's, so a
 * worker killed between the two steps re-adds the same dead letter, which BullMQ ignores.
 */
export function startIngestWorker(options: IngestWorkerOptions): IngestWorker {
  const { connection, sink, logger } = options
  const catalog = new CatalogReads(connection)
  const merge: MergeOptions = { ...DEFAULT_MERGE, ...options.merge }
  const deadLetters = new Queue<DeadLetterData>(options.deadLetterQueue ?? DEAD_LETTER_QUEUE, { connection, prefix: QUEUE_PREFIX })
  const deadLetter = (job: Job<IngestJobData>, failedReason: string, attempts: number) =>
    deadLetters.add(BATCH_JOB, { ...job.data, deadLetter: { jobId: job.id!, failedReason, attempts, atMs: Date.now() } }, { jobId: `dead-${job.id}` })
  const insert = async (parts: InsertPart[]): Promise<void> => {
    const rows = UsageEventColumns.concat(parts.map((p) => p.rows))
    // The first start of a batch that is no replay cannot find any of its owned events stored
    // (no other batch inserts them), so the sink may skip looking: half the insert's cost.
    const options = { firstAttempt: parts.every((p) => p.firstAttempt) }
    if (sink.insertEventColumns) await sink.insertEventColumns(rows, dedupTokenOf(parts), options)
    else
      await sink.insertEvents(
        Array.from({ length: rows.length }, (_, i) => rows.row(i)),
        dedupTokenOf(parts),
        options,
      )
  }
  const onLimitReached = async (projectId: string, decisions: LimitReachedDecision[]): Promise<void> => {
    await options.onLimitReached?.(projectId, decisions).catch((err: unknown) => logger.error({ err, projectId, decisions }, 'could not queue limit.reached'))
  }
  // First attempts share inserts; a failed insert fails every job in it, and each retries alone
  // (below), so a job the sink keeps refusing cannot drag other jobs to the dead-letter queue.
  const merged = new Batcher<InsertPart, void>(
    async (parts) => {
      await insert(parts)
      return parts.map(() => undefined)
    },
    { maxWaitMs: merge.maxWaitMs, maxItems: merge.maxJobs, maxWeight: merge.maxRows, maxInFlight: options.concurrency },
    (part) => part.rows.length,
  )
  const processJob = async (job: Job<IngestJobData>): Promise<{ rows: number; deadLettered?: true }> => {
    const { batchId } = job.data
    const events = eventCountOfJob(job.data)
    try {
      // Format 1 (jobs queued before format 2, their dead letters) is turned into format 2 first.
      const rows = new UsageEventColumns()
      await ownedRows(connection, catalog, compactJob(job.data), rows, onLimitReached)
      const part: InsertPart = { batchId, rows, firstAttempt: job.attemptsStarted === 1 && job.data.replay !== true }
      if (rows.length > 0) await (part.firstAttempt ? merged.submit(part) : insert([part]))
      return { rows: events }
    } catch (error) {
      const attempts = job.opts.attempts ?? 1
      if (job.attemptsMade + 1 < attempts) throw error
      await deadLetter(job, error instanceof Error ? error.message : String(error), attempts)
      logger.error({ err: error, jobId: job.id, batchId, events }, 'ingest batch failed every attempt: moved to the dead-letter queue')
      return { rows: 0, deadLettered: true }
    }
  }
  const worker = new Worker<IngestJobData>(options.ingestQueue ?? INGEST_QUEUE, processJob, {
    connection,
    prefix: QUEUE_PREFIX,
    concurrency: Math.max(options.concurrency * JOBS_PER_INSERT_SLOT, merge.maxJobs),
    maxStalledCount: MAX_STALLS,
    lockDuration: options.lockMs ?? 30_000,
    stalledInterval: options.lockMs ?? 30_000,
  })
  worker.on('failed', (job, err) => {
    logger.warn({ err, jobId: job?.id, attemptsMade: job?.attemptsMade }, 'ingest batch attempt failed (retried with backoff while attempts remain)')
    // A job failed by BullMQ itself (it stalled too often: workers kept dying on it) never
    // reached the processor's last-attempt branch: dead-letter it here (idempotent job id).
    if (job && err.name === 'UnrecoverableError') {
      deadLetter(job, err.message, job.attemptsMade).catch((e: unknown) =>
        logger.error({ err: e, jobId: job.id }, 'could not dead-letter a stalled ingest batch'),
      )
    }
  })
  worker.on('error', (err) => logger.error({ err }, 'ingest worker error'))
  return {
    worker,
    async close() {
      await worker.close()
      await merged.drain()
      await deadLetters.close()
    },
  }
}
