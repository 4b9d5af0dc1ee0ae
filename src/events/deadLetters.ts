import { Queue, type Job } from 'bullmq'
import type { RedisClient } from '../infra/redis/scripts.js'
import { BATCH_JOB, DEAD_LETTER_QUEUE, DEFAULT_RETRY, INGEST_QUEUE, QUEUE_PREFIX, ingestJobOptions, type RetryPolicy } from './queue.js'
import { eventCountOfJob } from './jobs.js'
import type { IngestJobData } from './types.js'

/** A batch that failed every attempt: its events (the job's data, in its format), and why and when it was given up. */
export type DeadLetterData = IngestJobData & {
  deadLetter: {
    /** The ingest job it came from. */
    jobId: string
    failedReason: string
    attempts: number
    atMs: number
  }
}

export interface DeadLetter {
  id: string
  batchId: string
  events: number
  jobId: string
  failedReason: string
  attempts: number
  atMs: number
}

export interface DeadLetterQueues {
  connection: RedisClient
  /** The ingest queue replays go to; `usage-events` unless tests use their own. */
  ingestQueue?: string
  deadLetterQueue?: string
}

function open(connection: RedisClient, name: string): Queue {
  return new Queue(name, { connection, prefix: QUEUE_PREFIX })
}

/** The dead letters, oldest first. Nothing consumes the dead-letter queue: its jobs wait there until replayed. */
export async function listDeadLetters(options: DeadLetterQueues, start = 0, end = -1): Promise<DeadLetter[]> {
  const dlq = open(options.connection, options.deadLetterQueue ?? DEAD_LETTER_QUEUE)
  try {
    const jobs = (await dlq.getJobs(['waiting', 'delayed', 'prioritized'], start, end, true)) as Job<DeadLetterData>[]
    return jobs.filter(Boolean).map((job) => ({
      id: job.id!,
      batchId: job.data.batchId,
      events: eventCountOfJob(job.data),
      ...job.data.deadLetter,
    }))
  } finally {
    await dlq.close()
  }
}

/**
 * Moves dead letters back to the ingest queue (all, or those named by id) as fresh jobs with
 * the full retry policy. Each keeps its batchId, so the sink gets the same dedup token. The new
 * job is added before the dead letter is removed: a crash in between replays it twice, which
 * the sink's dedup absorbs, never zero times. Returns the ids replayed.
 */
export async function replayDeadLetters(options: DeadLetterQueues & { ids?: string[]; retry?: RetryPolicy }): Promise<string[]> {
  const dlq = open(options.connection, options.deadLetterQueue ?? DEAD_LETTER_QUEUE)
  const ingest = open(options.connection, options.ingestQueue ?? INGEST_QUEUE)
  try {
    const jobs = options.ids
      ? await Promise.all(options.ids.map((id) => dlq.getJob(id) as Promise<Job<DeadLetterData> | undefined>))
      : ((await dlq.getJobs(['waiting', 'delayed', 'prioritized'], 0, -1, true)) as Job<DeadLetterData>[])
    const replayed: string[] = []
    for (const job of jobs) {
      if (!job) continue
      // The job as it was (either format: the worker reads both), marked as a replay.
      const { deadLetter: _, ...data } = job.data
      await ingest.add(BATCH_JOB, { ...data, replay: true } satisfies IngestJobData, ingestJobOptions(options.retry ?? DEFAULT_RETRY))
      await job.remove()
      replayed.push(job.id!)
    }
    return replayed
  } finally {
    await Promise.all([dlq.close(), ingest.close()])
  }
}
