import { QUEUE_PREFIX } from '../infra/redis/keys.js'

/** The BullMQ queues of ingestion, under the same hash-tagged prefix as every queue of the service. */
export { QUEUE_PREFIX }
/** Batches of accepted raw events, consumed by src/workers/ingest.ts. */
export const INGEST_QUEUE = 'usage-events'
/** Batches whose every attempt failed; listed and replayed with src/events/deadLetters.ts. */
export const DEAD_LETTER_QUEUE = 'usage-dlq'
/** The name of the jobs of both queues. */
export const BATCH_JOB = 'batch'

/** Retries of an ingest job: exponential backoff from `backoffMs`, then the dead-letter queue. */
export interface RetryPolicy {
  attempts: number
  backoffMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 8, backoffMs: 1000 }

export function ingestJobOptions(retry: RetryPolicy) {
  return {
    attempts: retry.attempts,
    backoff: { type: 'exponential', delay: retry.backoffMs },
    // A completed job's events are in the sink; a job that throws on its last attempt (the
    // dead-letter add failed) is kept in the failed set rather than dropped.
    removeOnComplete: true,
    removeOnFail: false,
  } as const
}
