import { hash, randomUUID } from 'node:crypto'
import { Queue, type Job } from 'bullmq'
import type { Logger } from 'pino'
import type { Clock } from '../kernel/clock.js'
import { failure, invalid, success, type Issue, type Result } from '../kernel/errors.js'
import { compile, depthIssue } from '../kernel/validation.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { Batcher } from './batcher.js'
import { DEFAULT_EVENT_OPTIONS, type EventOptions } from './options.js'
import { replayDeadLetters, type DeadLetterData } from './deadLetters.js'
import { BATCH_JOB, DEAD_LETTER_QUEUE, INGEST_QUEUE, QUEUE_PREFIX, ingestJobOptions } from './queue.js'
import { admitEvents, markEventsSeen, type Verdict } from './redis.js'
import { UsageEventInput, type BatchResult } from './schemas.js'
import { encodeJob, projectEventsOfJob, valueText, type CompactEvent } from './jobs.js'
import type { Admission, IngestJobData } from './types.js'

/** An event waiting for its group commit. */
interface Pending {
  event: CompactEvent
  /** idempotencyKey ?? id: the dedup key within the project; undefined = never a duplicate. */
  key: string | undefined
}

const eventValidator = compile(UsageEventInput)

/** How many dead letters (the oldest) a project's listing looks through: each is read whole. */
export const DEAD_LETTERS_EXAMINED = 1000

/** A dead letter as a project sees it: only its own events are described. */
export interface ProjectDeadLetter {
  id: string
  batchId: string
  /** The project's events in it. */
  events: number
  /** Their customers (at most 20). */
  customerIds: string[]
  /** The earliest and latest of their timestamps, epoch ms. */
  fromMs: number
  toMs: number
  failedReason: string
  attempts: number
  /** When it was given up, epoch ms. */
  atMs: number
}

/**
 * Raw usage ingestion (src/events/README.md): validates events, and answers once each is in a
 * BullMQ job in Redis (or was, for a duplicate). Concurrent requests share one job per group
 * commit: admit (one script per project) → add the job → mark the keys seen → answer.
 */
export class EventService {
  private readonly queue: Queue<IngestJobData>
  private readonly batcher: Batcher<Pending, Admission>
  /** Marks sent and not yet answered (step 3 of a commit); close waits for them. */
  private readonly marking = new Set<Promise<void>>()
  readonly options: EventOptions

  /**
   * `queueConnection` is the queue's own (as for notifications: BullMQ on the command
   * connection slows the budget hot path); the service quits it on close.
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly queueConnection: RedisClient,
    private readonly clock: Clock,
    private readonly logger: Logger,
    options: Partial<EventOptions> = {},
  ) {
    this.options = { ...DEFAULT_EVENT_OPTIONS, ...options }
    this.queue = new Queue<IngestJobData>(this.options.queueName, { connection: queueConnection, prefix: QUEUE_PREFIX })
    this.batcher = new Batcher((items) => this.commit(items), this.options.batch)
  }

  /** Group commits so far and the events in them. */
  get batchStats(): { batches: number; events: number } {
    return { batches: this.batcher.batches, events: this.batcher.items }
  }

  /** POST /v1/usage/record: 400 for a bad event, 403 customer_disabled, else accepted. */
  async record(projectId: string, input: UsageEventInput): Promise<Result<{ accepted: true }>> {
    const now = this.clock()
    const { issues, properties } = this.check(input, now, '$')
    if (issues.length > 0) return invalid(issues, 'The event is not valid; nothing was stored.')
    const admission = await this.batcher.submit(this.pending(projectId, input, now, properties))
    if (admission === 'customer_disabled') return customerDisabled(input.customerId)
    return success({ accepted: true })
  }

  /**
   * POST /v1/usage/record-batch: each element is validated on its own (nesting depth, schema,
   * then the rules of `record`); the valid ones go through one group commit together; one
   * result per element. The route leaves the depth to this method (handlerChecksDepth), so an
   * element nested too deep is refused alone, and each element is walked once.
   */
  async recordBatch(projectId: string, inputs: readonly unknown[]): Promise<{ results: BatchResult[] }> {
    const now = this.clock()
    const results: BatchResult[] = new Array(inputs.length)
    const submitted: { index: number; item: Pending }[] = []
    inputs.forEach((input, index) => {
      const at = `$.events[${index}]`
      let issues: Issue[]
      let properties = ''
      const deep = depthIssue(input, at)
      if (deep) issues = [deep]
      else if (!eventValidator.check(input)) issues = eventValidator.issues(input).map((i) => ({ path: at + i.path.slice(1), message: i.message }))
      else ({ issues, properties } = this.check(input as UsageEventInput, now, at))
      if (issues.length > 0) {
        results[index] = {
          index,
          accepted: false,
          error: { code: 'BAD_REQUEST', reason: 'invalid_request', message: 'The event is not valid; it was not stored.', issues },
        }
      } else {
        submitted.push({ index, item: this.pending(projectId, input as UsageEventInput, now, properties) })
      }
    })
    const admissions = await this.batcher.submitMany(submitted.map((s) => s.item))
    submitted.forEach(({ index, item }, i) => {
      results[index] =
        admissions[i] === 'customer_disabled'
          ? { index, accepted: false, error: { code: 'FORBIDDEN', reason: 'customer_disabled', message: customerDisabled(item.event.customerId).message } }
          : { index, accepted: true }
    })
    return { results }
  }

  /** Commits what is waiting, then closes the queue and its connection. */
  async close(): Promise<void> {
    await this.batcher.drain()
    await Promise.all(this.marking)
    await this.queue.close()
    await this.queueConnection.quit()
  }

  /**
   * The dead letters holding events of the project (POST /v1/usage/dead-letters/list), oldest
   * first, at most `limit`, among the oldest `DEAD_LETTERS_EXAMINED` of the dead-letter queue. A dead letter is a
   * whole group commit, which may hold other projects' events: only this project's are described
   * (how many, of which customers, over which timestamps).
   */
  async projectDeadLetters(projectId: string, limit: number): Promise<ProjectDeadLetter[]> {
    const jobs = await this.withDeadLetters((dlq) => dlq.getJobs(['waiting', 'delayed', 'prioritized'], 0, DEAD_LETTERS_EXAMINED - 1, true))
    const mine: ProjectDeadLetter[] = []
    for (const job of jobs as (Job<DeadLetterData> | undefined)[]) {
      const described = job && describeDeadLetter(job, projectId)
      if (described) mine.push(described)
      if (mine.length === limit) break
    }
    return mine
  }

  /**
   * Replays dead letters that hold events of the project (POST /v1/usage/dead-letters/replay;
   * replayDeadLetters in deadLetters.ts): each goes back to the ingest queue whole, with its
   * batchId, so events of other projects in it are written once too (ClickHouse dedups them).
   * An id that is not a dead letter with events of the project is `notFound`.
   */
  async replayProjectDeadLetters(projectId: string, ids: readonly string[]): Promise<{ requeued: string[]; notFound: string[] }> {
    const wanted = [...new Set(ids)]
    const jobs = await this.withDeadLetters((dlq) => Promise.all(wanted.map((id) => dlq.getJob(id) as Promise<Job<DeadLetterData> | undefined>)))
    const owned = wanted.filter((_, i) => {
      const data = jobs[i]?.data
      return data !== undefined && projectEventsOfJob(data, projectId).length > 0
    })
    const requeued =
      owned.length === 0
        ? []
        : await replayDeadLetters({
            connection: this.queueConnection,
            ingestQueue: this.options.queueName,
            deadLetterQueue: this.deadLetterQueueName(),
            ids: owned,
            retry: this.options.retry,
          })
    return { requeued, notFound: wanted.filter((id) => !requeued.includes(id)) }
  }

  /** The ingest queue's dead letters, as src/container.ts starts the ingest worker with. */
  private deadLetterQueueName(): string {
    return this.options.queueName === INGEST_QUEUE ? DEAD_LETTER_QUEUE : `${this.options.queueName}-dlq`
  }

  private async withDeadLetters<T>(use: (dlq: Queue<DeadLetterData>) => Promise<T>): Promise<T> {
    const dlq = new Queue<DeadLetterData>(this.deadLetterQueueName(), { connection: this.queueConnection, prefix: QUEUE_PREFIX })
    try {
      return await use(dlq)
    } finally {
      await dlq.close()
    }
  }

  /**
   * The rules beyond the schema, with JSON paths under `at`. JSON.stringify recurses, and it
   * meets `properties` only after its depth was checked (MAX_JSON_DEPTH: the HTTP pipeline
   * checks a record's body, recordBatch each event), so its stack use is bounded. The properties'
   * JSON text measured here is the one the job carries and the row stores ('' when absent).
   */
  private check(input: UsageEventInput, now: number, at: string): { issues: Issue[]; properties: string } {
    const issues: Issue[] = []
    const { timestamp, properties } = input
    if (timestamp !== undefined) {
      if (timestamp > now + this.options.futureToleranceMs) {
        issues.push({
          path: `${at}.timestamp`,
          message: `must be at most ${this.options.futureToleranceMs / 60_000} minutes ahead of the server's time (${now})`,
        })
      } else if (timestamp < now - this.options.horizonMs) {
        issues.push({ path: `${at}.timestamp`, message: `must be at most ${this.options.horizonMs / 86_400_000} days old (the ingestion horizon)` })
      }
    }
    let text = ''
    if (properties !== undefined) {
      text = JSON.stringify(properties)
      const bytes = Buffer.byteLength(text)
      if (bytes > this.options.maxPropertiesBytes)
        issues.push({ path: `${at}.properties`, message: `is ${bytes} bytes as JSON; at most ${this.options.maxPropertiesBytes}` })
    }
    return { issues, properties: text }
  }

  /**
   * The event as its job carries it (format 2, jobs.ts): `properties` is the JSON text `check`
   * measured, and the value its row holds when no meter takes it is worked out here, once.
   */
  private pending(projectId: string, input: UsageEventInput, now: number, properties: string): Pending {
    const event: CompactEvent = {
      projectId,
      eventId: eventIdOf(projectId, input),
      customerId: input.customerId,
      eventSlug: input.eventSlug,
      timestampMs: input.timestamp ?? now,
      receivedMs: now,
      value: valueText(input.properties),
      properties,
    }
    return { event, key: input.idempotencyKey ?? input.id }
  }

  /**
   * One group commit. The order is what makes "accepted" safe (README): the keys are marked
   * seen only after the job carrying their events is in Redis, so a crash in between can only
   * cause a second copy on a retry (dropped by event id in ClickHouse), never a lost event.
   */
  private async commit(items: Pending[]): Promise<Admission[]> {
    const now = this.clock()
    const byProject = new Map<string, number[]>()
    items.forEach((item, i) => {
      const list = byProject.get(item.event.projectId)
      if (list) list.push(i)
      else byProject.set(item.event.projectId, [i])
    })
    // 1. Admit: one read-only script per project (access flags and dedup window).
    const verdicts: Verdict[] = new Array(items.length)
    await Promise.all(
      [...byProject].map(async ([projectId, indexes]) => {
        const found = await admitEvents(
          this.redis,
          projectId,
          indexes.map((i) => ({ customerId: items[i]!.event.customerId, key: items[i]!.key })),
          now,
          this.options.dedupWindowMs,
        )
        indexes.forEach((i, j) => {
          verdicts[i] = found[j]!
        })
      }),
    )
    // A key twice in this commit: the first copy goes, the others are its duplicates.
    const outcomes: Admission[] = new Array(items.length)
    const events: CompactEvent[] = []
    const seen = new Set<string>()
    const newKeys = new Map<string, string[]>()
    items.forEach((item, i) => {
      const verdict = verdicts[i]!
      if (verdict === 'customer_disabled') outcomes[i] = 'customer_disabled'
      else if (verdict === 'duplicate') outcomes[i] = 'duplicate'
      else if (item.key !== undefined && seen.has(`${item.event.projectId}\0${item.key}`)) outcomes[i] = 'duplicate'
      else {
        outcomes[i] = 'accepted'
        events.push(item.event)
        if (item.key !== undefined) {
          seen.add(`${item.event.projectId}\0${item.key}`)
          const keys = newKeys.get(item.event.projectId)
          if (keys) keys.push(item.key)
          else newKeys.set(item.event.projectId, [item.key])
        }
      }
    })
    if (events.length === 0) return outcomes
    // 2. Durable: one job for the whole commit. A failure here fails every request of it (500).
    await this.queue.add(BATCH_JOB, encodeJob(randomUUID(), events), ingestJobOptions(this.options.retry))
    // 3. Seen: from now on a repeat is a duplicate. A failure costs at most a second copy.
    // Sent now, answered without waiting for the reply: Redis runs one connection's commands
    // in order, so every later admit of this gateway (same connection, same slot) sees the
    // marks; the reply would only say what a failure says, and that is only logged.
    const marks = Promise.all(
      [...newKeys].map(([projectId, keys]) =>
        markEventsSeen(this.redis, projectId, keys, now, this.options.dedupWindowMs).catch((err: unknown) => {
          this.logger.warn({ err, projectId, events: keys.length }, 'events are queued but could not be marked seen; a retry may queue them again')
        }),
      ),
    ).then(() => {
      this.marking.delete(marks)
    })
    this.marking.add(marks)
    return outcomes
  }
}

/**
 * An event's stable id: its `id`; else derived from the project and idempotencyKey (so every
 * retry has the same one); else a new one (such an event cannot be recognized when retried).
 */
export function eventIdOf(projectId: string, input: { id?: string | undefined; idempotencyKey?: string | undefined }): string {
  if (input.id !== undefined) return input.id
  if (input.idempotencyKey !== undefined) return 'ik_' + hash('sha256', `${projectId}\0${input.idempotencyKey}`, 'base64url').slice(0, 32)
  return 'ev_' + randomUUID().replace(/-/g, '')
}

function customerDisabled(customerId: string) {
  return failure('forbidden', 'customer_disabled', `Customer ${customerId} is disabled (POST /v1/access/update); its usage is refused.`)
}

/** A dead letter as the project sees it: only its own events; undefined when it holds none. */
function describeDeadLetter(job: Job<DeadLetterData>, projectId: string): ProjectDeadLetter | undefined {
  const own = job.data ? projectEventsOfJob(job.data, projectId) : []
  if (own.length === 0) return undefined
  const times = own.map((e) => e.timestampMs)
  const { failedReason, attempts, atMs } = job.data.deadLetter
  return {
    id: job.id!,
    batchId: job.data.batchId,
    events: own.length,
    customerIds: [...new Set(own.map((e) => e.customerId))].slice(0, 20),
    fromMs: Math.min(...times),
    toMs: Math.max(...times),
    failedReason,
    attempts,
    atMs,
  }
}
