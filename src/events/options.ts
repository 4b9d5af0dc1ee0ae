import type { BatcherOptions } from './batcher.js'
import { DEFAULT_RETRY, INGEST_QUEUE, type RetryPolicy } from './queue.js'
import { envInt } from '../kernel/env.js'

/** The rules and tuning of ingestion, with their defaults and environment variables. */
export interface EventOptions {
  /** How long an accepted (project, idempotencyKey ?? id) makes repeats duplicates. */
  dedupWindowMs: number
  /** The oldest timestamp accepted, before now. */
  horizonMs: number
  /** How far ahead of now a timestamp may be. */
  futureToleranceMs: number
  /** `properties` as JSON (UTF-8 bytes), at most. */
  maxPropertiesBytes: number
  batch: BatcherOptions
  retry: RetryPolicy
  /** The ingest queue (tests use their own). */
  queueName: string
}

const DAY_MS = 86_400_000

export const DEFAULT_EVENT_OPTIONS: EventOptions = {
  dedupWindowMs: DAY_MS,
  horizonMs: 35 * DAY_MS,
  futureToleranceMs: 5 * 60_000,
  maxPropertiesBytes: 16 * 1024,
  batch: { maxWaitMs: 1, maxItems: 2000, maxInFlight: 8 },
  retry: DEFAULT_RETRY,
  queueName: INGEST_QUEUE,
}

export function loadEventOptions(env: NodeJS.ProcessEnv = process.env): EventOptions {
  const d = DEFAULT_EVENT_OPTIONS
  return {
    dedupWindowMs: envInt(env, 'METERING_EVENTS_DEDUP_WINDOW_MS', d.dedupWindowMs, 1),
    horizonMs: envInt(env, 'METERING_EVENTS_HORIZON_DAYS', d.horizonMs / DAY_MS, 1) * DAY_MS,
    futureToleranceMs: d.futureToleranceMs,
    maxPropertiesBytes: envInt(env, 'METERING_EVENTS_MAX_PROPERTIES_BYTES', d.maxPropertiesBytes, 2),
    batch: {
      maxWaitMs: envInt(env, 'METERING_INGEST_BATCH_MS', d.batch.maxWaitMs, 0),
      maxItems: envInt(env, 'METERING_INGEST_BATCH_MAX', d.batch.maxItems, 1),
      maxInFlight: envInt(env, 'METERING_INGEST_IN_FLIGHT', d.batch.maxInFlight, 1),
    },
    retry: {
      attempts: envInt(env, 'METERING_INGEST_ATTEMPTS', d.retry.attempts, 1),
      backoffMs: envInt(env, 'METERING_INGEST_BACKOFF_MS', d.retry.backoffMs, 0),
    },
    queueName: d.queueName,
  }
}
