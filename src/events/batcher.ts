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
  /**
   * With a `weigh` function: a batch whose items weigh this much together is committed at once
   * (and no batch weighs more, unless its first item alone does). Default: no limit.
   */
  maxWeight?: number
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
  /** The weight of `pending`. */
  private pendingWeight = 0
  private timer: NodeJS.Timeout | undefined
  private inFlight = 0
  private idle: (() => void)[] = []
  /** Batches committed and items in them, for figures and tests. */
  batches = 0
  items = 0

  /** `weigh`: an item's weight against `maxWeight` (e.g. the rows of a job); default 0. */
  constructor(
    private readonly commit: Commit<T, R>,
    private readonly options: BatcherOptions,
    private readonly weigh?: (item: T) => number,
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.add({ item, resolve, reject })
      this.schedule()
    })
  }

  submitMany(items: readonly T[]): Promise<R[]> {
    const all = items.map(
      (item) =>
        new Promise<R>((resolve, reject) => {
          this.add({ item, resolve, reject })
        }),
    )
    this.schedule()
    return Promise.all(all)
  }

  private add(waiting: Waiting<T, R>): void {
    this.pending.push(waiting)
    if (this.weigh) this.pendingWeight += this.weigh(waiting.item)
  }

  /** A batch's worth is waiting: by count, or by weight. */
  private full(): boolean {
    return (
      this.pending.length >= this.options.maxItems ||
      (this.options.maxWeight !== undefined && this.pending.length > 0 && this.pendingWeight >= this.options.maxWeight)
    )
  }

  /** Commits what is waiting now and resolves once no commit is running. */
  async drain(): Promise<void> {
    while (this.pending.length > 0 || this.inFlight > 0) {
      if (this.pending.length > 0 && this.inFlight < this.options.maxInFlight) this.flush()
      else await new Promise<void>((resolve) => this.idle.push(resolve))
    }
  }

  private schedule(): void {
    if (this.full() && this.inFlight < this.options.maxInFlight) {
      while (this.full() && this.inFlight < this.options.maxInFlight) this.flush()
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
    const batch = this.pending.splice(0, this.take())
    if (batch.length === 0) return
    if (this.timer !== undefined && this.pending.length === 0) {
      clearTimeout(this.timer)
      this.timer = undefined
    }
    this.inFlight++
    this.batches++
    this.items += batch.length
    let run: Promise<R[]>
    try {
      run = this.commit(batch.map((w) => w.item))
    } catch (error) {
      run = Promise.reject(error)
    }
    run
      .then(
        (outcomes) => {
          for (const [i, w] of batch.entries()) w.resolve(outcomes[i]!)
        },
        (error: unknown) => {
          for (const w of batch) w.reject(error)
        },
      )
      .finally(() => this.settle())
  }

  /** How many waiting items the next batch takes (and takes their weight off the pending). */
  private take(): number {
    const most = Math.min(this.pending.length, this.options.maxItems)
    if (!this.weigh) return most
    const max = this.options.maxWeight ?? Infinity
    let n = 0
    let weight = 0
    while (n < most) {
      const w = this.weigh(this.pending[n]!.item)
      if (n > 0 && weight + w > max) break
      weight += w
      n++
    }
    this.pendingWeight -= weight
    return n
  }

  private settle(): void {
    this.inFlight--
    // Items that gathered while commits ran go now: their wait already covered maxWaitMs or more.
    if (this.pending.length > 0 && this.timer === undefined) this.flush()
    if (this.pending.length === 0 && this.inFlight === 0) for (const resolve of this.idle.splice(0)) resolve()
    else if (this.idle.length > 0 && this.inFlight < this.options.maxInFlight) for (const resolve of this.idle.splice(0)) resolve()
  }
}
