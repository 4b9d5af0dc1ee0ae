/**
 * Group commit: callers submit items one by one (or a request's worth at once); the batcher
 * hands them to `commit` together, once `maxWaitMs` has passed since the first item waiting or
 * as soon as `maxItems` are waiting, and settles each caller's promise with that commit's
 * outcome for its item. While `maxInFlight` commits are running, items keep gathering and go
 * with the next commit when one finishes: under load, batches grow instead of round trips.
 */
export interface BatcherOptions {
  /** How long the first waiting item waits for company. */
  maxWaitMs: number
  /** A batch of this many is committed at once (and no batch is larger). */
  maxItems: number
  /** Commits running at the same time. */
  maxInFlight: number
}

/** Commits a batch: one outcome per item, in order; a throw fails every item of the batch. */
export type Commit<T, R> = (items: T[]) => Promise<R[]>

interface Waiting<T, R> {
  item: T
  resolve(outcome: R): void
  reject(error: unknown): void
}

export class Batcher<T, R> {
  private pending: Waiting<T, R>[] = []
  private timer: NodeJS.Timeout | undefined
  private inFlight = 0
  private idle: (() => void)[] = []
  /** Batches committed and items in them, for figures and tests. */
  batches = 0
  items = 0

  constructor(private readonly commit: Commit<T, R>, private readonly options: BatcherOptions) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject })
      this.schedule()
    })
  }

  submitMany(items: readonly T[]): Promise<R[]> {
    const all = items.map((item) => new Promise<R>((resolve, reject) => { this.pending.push({ item, resolve, reject }) }))
    this.schedule()
    return Promise.all(all)
  }

  /** Commits what is waiting now and resolves once no commit is running. */
  async drain(): Promise<void> {
    while (this.pending.length > 0 || this.inFlight > 0) {
      if (this.pending.length > 0 && this.inFlight < this.options.maxInFlight) this.flush()
      else await new Promise<void>((resolve) => this.idle.push(resolve))
    }
  }

  private schedule(): void {
    if (this.pending.length >= this.options.maxItems && this.inFlight < this.options.maxInFlight) {
      while (this.pending.length >= this.options.maxItems && this.inFlight < this.options.maxInFlight) this.flush()
      if (this.pending.length === 0) return
    }
    if (this.timer === undefined) this.timer = setTimeout(this.onTimer, this.options.maxWaitMs)
  }

  private readonly onTimer = (): void => {
    this.timer = undefined
    // At the in-flight limit the items wait for the next commit to finish (see settle).
    if (this.inFlight < this.options.maxInFlight) this.flush()
  }

  private flush(): void {
    if (this.timer !== undefined && this.pending.length <= this.options.maxItems) {
      clearTimeout(this.timer)
      this.timer = undefined
    }
    const batch = this.pending.splice(0, this.options.maxItems)
    if (batch.length === 0) return
    this.inFlight++
    this.batches++
    this.items += batch.length
    let run: Promise<R[]>
    try {
      run = this.commit(batch.map((w) => w.item))
    } catch (error) {
      run = Promise.reject(error)
    }
    run.then(
      (outcomes) => batch.forEach((w, i) => w.resolve(outcomes[i]!)),
      (error: unknown) => batch.forEach((w) => w.reject(error)),
    ).finally(() => this.settle())
  }

  private settle(): void {
    this.inFlight--
    // Items that gathered while commits ran go now: their wait already covered maxWaitMs or more.
    if (this.pending.length > 0 && this.timer === undefined) this.flush()
    if (this.pending.length === 0 && this.inFlight === 0) for (const resolve of this.idle.splice(0)) resolve()
    else if (this.idle.length > 0 && this.inFlight < this.options.maxInFlight) for (const resolve of this.idle.splice(0)) resolve()
  }
}
