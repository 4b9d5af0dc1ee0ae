import { Queue, Worker, type Job } from 'bullmq'
import type { Logger } from 'pino'
import type { DeadLetterData } from '../src/events/deadLetters.js'
import { BATCH_JOB, DEAD_LETTER_QUEUE, INGEST_QUEUE, QUEUE_PREFIX } from '../src/events/queue.js'
import { toRow } from '../src/events/rows.js'
import type { EventSink, IngestJobData, UsageEventRow } from '../src/events/types.js'
import type { RedisClient } from '../src/redis/scripts.js'

export interface IngestWorkerOptions {
  /** A connection made for BullMQ workers: `connectRedis(url, name, { blocking: true })`. */
  connection: RedisClient
  sink: EventSink
  logger: Logger
  /** Jobs processed at the same time. */
  concurrency: number
  /** Queue names; tests use their own. */
  ingestQueue?: string
  deadLetterQueue?: string
  /**
   * Runs after a batch is inserted, with its rows: the limit check of limit.reached
   * (src/notifications/limits.ts). A throw is logged; the batch stays inserted and completed.
   */
  afterInsert?: (rows: UsageEventRow[]) => Promise<unknown>
}

export interface IngestWorker {
  worker: Worker<IngestJobData>
  close(): Promise<void>
}

/**
 * The processor of the ingest queue: writes each batch job's events to the sink in one insert,
 * with the job's batchId as the insert's dedup token. A failing insert is retried with the
 * job's backoff (set by the gateway: exponential, METERING_INGEST_ATTEMPTS attempts); the last
 * failing attempt moves the job to the dead-letter queue (src/events/deadLetters.ts lists and
 * replays it) and completes it. The dead letter's job id is derived from the job's, so a
 * worker killed between the two steps re-adds the same dead letter, which BullMQ ignores.
 */
export function startIngestWorker(options: IngestWorkerOptions): IngestWorker {
  const { connection, sink, logger } = options
  const deadLetters = new Queue<DeadLetterData>(options.deadLetterQueue ?? DEAD_LETTER_QUEUE, { connection, prefix: QUEUE_PREFIX })
  const processJob = async (job: Job<IngestJobData>): Promise<{ rows: number; deadLettered?: true }> => {
    const { batchId, events } = job.data
    try {
      const rows = events.map(toRow)
      await sink.insertEvents(rows, batchId)
      if (options.afterInsert) {
        await options.afterInsert(rows).catch((err: unknown) => logger.error({ err, jobId: job.id, batchId }, 'the check after an inserted batch failed'))
      }
      return { rows: events.length }
    } catch (error) {
      const attempts = job.opts.attempts ?? 1
      if (job.attemptsMade + 1 < attempts) throw error
      const failedReason = error instanceof Error ? error.message : String(error)
      await deadLetters.add(BATCH_JOB, { ...job.data, deadLetter: { jobId: job.id!, failedReason, attempts, atMs: Date.now() } }, { jobId: `dead-${job.id}` })
      logger.error({ err: error, jobId: job.id, batchId, events: events.length }, 'ingest batch failed every attempt: moved to the dead-letter queue')
      return { rows: 0, deadLettered: true }
    }
  }
  const worker = new Worker<IngestJobData>(options.ingestQueue ?? INGEST_QUEUE, processJob, { connection, prefix: QUEUE_PREFIX, concurrency: options.concurrency })
  worker.on('failed', (job, err) => logger.warn({ err, jobId: job?.id, attemptsMade: job?.attemptsMade }, 'ingest batch attempt failed (retried with backoff while attempts remain)'))
  worker.on('error', (err) => logger.error({ err }, 'ingest worker error'))
  return {
    worker,
    async close() {
      await worker.close()
      await deadLetters.close()
    },
  }
}
