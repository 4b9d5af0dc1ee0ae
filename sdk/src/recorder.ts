// record(events): usage events buffered and sent to POST /v1/usage/record-batch together. A batch
// leaves when it holds maxEvents events or about maxBytes of JSON, or lingerMs after its first
// event, or on flush()/close(). Each event's promise settles with that event's own result, the
// route's (accepted, or refused with the code and the JSON paths of its problems); a batch that
// fails as a whole (after the transport's retries) reports every one of its events as refused
// with that error. So record() never rejects for what the gateway answers, and fire-and-forget
// callers get no unhandled rejection.
// Every event that names itself neither by `id` nor by `idempotencyKey` is given an `id` before
// it is buffered: the gateway deduplicates by it, so a batch that is retried (503, a network
// error) is not counted twice.
import type { UsageEvent, UsageRecordBatchResponse } from './generated.js'
import { MeteringError } from './errors.js'

/** One event's result, `index` being its position in the array given to record(). */
export type RecordResult = UsageRecordBatchResponse['results'][number]

/** A result without its index: what one buffered event settles with. */
type EventResult = RecordResult extends infer R ? (R extends unknown ? Omit<R, 'index'> : never) : never

export interface BatchOptions {
  /** Events per request, at most (default 100; the route takes 1,000). */
  maxEvents?: number
  /** JSON bytes per request, about (default 512 KiB; the gateway's default limit is 1 MiB). */
  maxBytes?: number
  /** How long the first event of a batch waits for others (default 20 ms). */
  lingerMs?: number
}

export const DEFAULT_BATCH: Required<BatchOptions> = { maxEvents: 100, maxBytes: 512 * 1024, lingerMs: 20 }

interface Pending {
  event: UsageEvent
  bytes: number
  settle: (result: EventResult) => void
}

/** Sends one batch; throws a MeteringError (or anything else) when the batch fails as a whole. */
export type SendBatch = (events: UsageEvent[]) => Promise<UsageRecordBatchResponse>

export class Recorder {
  private buffer: Pending[] = []
  private bytes = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  private readonly inFlight = new Set<Promise<void>>()
  private closed = false
  private readonly options: Required<BatchOptions>

  constructor(
    private readonly send: SendBatch,
    private readonly newId: () => string,
    options: BatchOptions = {},
  ) {
    this.options = { ...DEFAULT_BATCH, ...options }
    if (this.options.maxEvents < 1 || this.options.maxEvents > 1000) throw new RangeError('maxEvents must be 1 to 1000')
  }

  /** Buffers the events; resolves with one result per event, in order, once their batches are answered. */
  record(events: UsageEvent | UsageEvent[]): Promise<RecordResult[]> {
    if (this.closed) return Promise.reject(new Error('record() after close()'))
    const list = Array.isArray(events) ? events : [events]
    const results = list.map((event, index) => this.add(event).then((result) => ({ ...result, index }) as RecordResult))
    return Promise.all(results)
  }

  /** Sends what is buffered and resolves once every batch sent so far is answered. */
  async flush(): Promise<void> {
    this.dispatch()
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight])
  }

  /** Refuses new events, then flushes. */
  async close(): Promise<void> {
    this.closed = true
    await this.flush()
  }

  private add(event: UsageEvent): Promise<EventResult> {
    const named = event.id !== undefined || event.idempotencyKey !== undefined ? event : { ...event, id: this.newId() }
    const bytes = JSON.stringify(named).length + 1
    if (this.buffer.length > 0 && this.bytes + bytes > this.options.maxBytes) this.dispatch()
    return new Promise<EventResult>((settle) => {
      this.buffer.push({ event: named, bytes, settle })
      this.bytes += bytes
      if (this.buffer.length >= this.options.maxEvents || this.bytes >= this.options.maxBytes) this.dispatch()
      else this.timer ??= setTimeout(() => this.dispatch(), this.options.lingerMs)
    })
  }

  /** Sends the buffer as one batch. */
  private dispatch(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    const batch = this.buffer
    if (batch.length === 0) return
    this.buffer = []
    this.bytes = 0
    const sent = this.deliver(batch).finally(() => this.inFlight.delete(sent))
    this.inFlight.add(sent)
  }

  private async deliver(batch: Pending[]): Promise<void> {
    try {
      const { results } = await this.send(batch.map((p) => p.event))
      const byIndex = new Map(results.map((r) => [r.index, r]))
      batch.forEach((pending, i) => {
        const result = byIndex.get(i)
        pending.settle(result ? withoutIndex(result) : refused('INVALID_RESPONSE', 'missing_result', `the answer has no result for event ${i}`))
      })
    } catch (err) {
      const error =
        err instanceof MeteringError
          ? refused(err.code, err.reason ?? 'batch_failed', err.message)
          : refused('CLIENT_ERROR', 'batch_failed', err instanceof Error ? err.message : String(err))
      for (const pending of batch) pending.settle(error)
    }
  }
}

function withoutIndex(result: RecordResult): EventResult {
  const { index: _index, ...rest } = result
  return rest as EventResult
}

function refused(code: string, reason: string, message: string): EventResult {
  return { accepted: false, error: { code, reason, message } }
}
