import type { Logger } from 'pino'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import { drainJournal, type DrainOptions, type DrainResult } from '../journal/drain.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { isUnavailable } from '../infra/availability.js'
import { serialLoop } from './every.js'

export interface JournalWorkerOptions extends Omit<DrainOptions, 'redis' | 'store' | 'logger'> {
  redis: RedisClient
  store: ClickHouseStore
  logger: Logger
  /** Pause between rounds (METERING_JOURNAL_INTERVAL_MS, default 1000); a round that left entries behind is followed at once. */
  intervalMs: number
  /** Told about every round (tests wait on it). */
  onRound?: (result: DrainResult) => void
}

export interface JournalWorker {
  /** Runs one round now (after the one in flight, if any). */
  drainNow(): Promise<DrainResult>
  /** Stops the timer and waits for the round in flight. */
  close(): Promise<void>
}

/**
 * The journal worker: drains every outbox list `mg:<tag>:journal` into ClickHouse
 * (src/journal/README.md), one round at a time, every intervalMs. Any number of workers may run
 * (gateways in-process, `npm run worker`): claims keep them off each other's lists.
 */
export function startJournalWorker(options: JournalWorkerOptions): JournalWorker {
  const { intervalMs, logger, onRound, ...drain } = options
  const loop = serialLoop({
    intervalMs,
    work: () => drainJournal({ ...drain, logger }),
    observe: onRound,
    // A round that left entries behind is followed at once.
    delayAfter: (r) => (r.more ? 0 : intervalMs),
    onError: (err) => logger[isUnavailable(err) ? 'warn' : 'error']({ err }, 'journal drain failed; retrying'),
  })
  return { drainNow: loop.runNow, close: loop.close }
}
