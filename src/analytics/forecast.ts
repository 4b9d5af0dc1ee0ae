/**
 * Usage forecast (spec 4.11, DESIGN.md "Usage forecast"): a pure function of a customer's daily
 * cumulative usage of one feature. The caller reads the facts from the store and adds the
 * identity fields (project_id, customer_id, feature_slug); the algorithm is in ./README.md.
 */

export const DAY_MS = 86_400_000
/** Daily UTC windows looked at, ending at the start of today. */
export const WINDOW_DAYS = 14
export const DEFAULT_HORIZON_DAYS = 14
export const MAX_HORIZON_DAYS = 31
/** Below this many observed days confidence is low; below HIGH_CONFIDENCE_DAYS, medium. */
export const MEDIUM_CONFIDENCE_DAYS = 5
export const HIGH_CONFIDENCE_DAYS = 10
/** Data is stale when none of the last this-many windows (the days before today) has a fact. */
export const STALE_AFTER_DAYS = 2
/** How far ahead exhaustion of a limit is looked for at the projected rate. */
export const MAX_EXHAUSTION_DAYS = 366

export type Confidence = 'high' | 'medium' | 'low'

export interface DailyCumulative {
  /** Start of the UTC day (epoch ms); a value inside the day is taken as that day. */
  dayStartMs: number
  /** Cumulative usage at the end of that day (or as of the latest fact of the day). */
  cumulative: number
  /** Ids of the stored facts behind the value (evidence); by default `day:YYYY-MM-DD`. */
  factIds?: string[]
}

export interface ForecastLimit {
  /** The limit's amount (entitlement limit or budget limit), in usage units. */
  amount: number
  /** Usage already counted against the limit; by default the latest cumulative value given. */
  used?: number
  /** The limit's window (hour, day, week, month, never, or a cycle name), for the sentence. */
  window?: string
  kind: 'entitlement' | 'budget'
  /** When the limit's window resets (epoch ms); exhaustion after it is not reported. */
  resetsAt?: number | null
  /** The limit's id, for the sentence. */
  id?: string
  /** For a budget's limit: the budget's key. */
  budgetKey?: string
}

export interface ForecastInput {
  dailyCumulative: DailyCumulative[]
  now: number
  horizonDays?: number
  limit?: ForecastLimit
  /**
   * The limits of the customer's budget for the feature (service.ts budgetLimits): the answer
   * names the tightest one, the one used up first at the projected rate, as `budget`.
   */
  budgetLimits?: ForecastLimit[]
  periodKey?: string
  /** Only used to word the answer ("usage of api-calls …"). */
  featureSlug?: string
}

export interface ForecastLimitResult {
  kind: 'entitlement' | 'budget'
  id?: string
  budgetKey?: string
  window?: string
  amount: number
  used: number
  remaining: number
  resetsAt?: number | null
  /** When the limit is used up at the projected rate; null when not within MAX_EXHAUSTION_DAYS, before the reset, or the rate is unknown. */
  exhaustsAt: number | null
  exhaustsWithinHorizon: boolean
}

export interface ForecastResult {
  answer: string
  confidence: Confidence
  freshness: { generatedAt: number; dataFrom: number; dataTo: number }
  evidence: { id: string; timestamp: number }[]
  warnings: string[]
  nextActions: string[]
  horizonDays: number
  projectedUsage: number
  observedDays: number
  baselineUsage: number
  trendPerDay: number
  periodKey?: string
  /** Present only when a limit or budget was given: the earliest of limit.exhaustsAt and budget.exhaustsAt. */
  exhaustsAt?: number | null
  limit?: ForecastLimitResult
  /** The tightest limit of the customer's budget for the feature, when budgetLimits were given. */
  budget?: ForecastLimitResult
}

/** Rounds to 2 decimals, half away from zero, on the decimal value as printed (1.005 → 1.01); never -0. */
export function round2(value: number): number {
  if (!Number.isFinite(value)) return 0
  const abs = Math.abs(value)
  if (abs >= 1e15) return value
  // Below 0.001 String() may use an exponent ("1e-7"); such values round to 0 anyway.
  if (abs < 0.001) return 0
  const rounded = Number(`${Math.round(Number(`${abs}e2`))}e-2`)
  if (rounded === 0) return 0
  return value < 0 ? -rounded : rounded
}

export function startOfUtcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS
}

export function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/** The windows the forecast looks at: [from, to) with to the start of today (UTC). */
export function forecastWindow(now: number): { from: number; to: number; days: number } {
  const to = startOfUtcDay(now)
  return { from: to - WINDOW_DAYS * DAY_MS, to, days: WINDOW_DAYS }
}

/**
 * Daily usage rows (per-day sums, as the daily aggregates hold them) → the cumulative series the
 * forecast takes. Days without a row between two rows had no usage: they are filled with the
 * cumulative carried forward (no fact ids), so they count as observed zero-usage days. Days before
 * the first row and after the last are not filled (an idle customer and a stalled pipeline look
 * the same; the forecast's warnings say so). `startCumulative`: usage before the first row.
 */
export function accumulateDaily(rows: { dayStartMs: number; usage: number; factIds?: string[] }[], startCumulative = 0): DailyCumulative[] {
  const byDay = new Map<number, { usage: number; factIds: string[] }>()
  for (const row of rows) {
    if (!Number.isFinite(row.usage) || !Number.isFinite(row.dayStartMs)) continue
    const day = startOfUtcDay(row.dayStartMs)
    const entry = byDay.get(day) ?? { usage: 0, factIds: [] }
    entry.usage += row.usage
    if (row.factIds) entry.factIds.push(...row.factIds)
    byDay.set(day, entry)
  }
  const days = [...byDay.keys()].sort((a, b) => a - b)
  const out: DailyCumulative[] = []
  let cumulative = startCumulative
  const first = days[0]
  const last = days[days.length - 1]
  if (first === undefined || last === undefined) return out
  for (let day = first; day <= last; day += DAY_MS) {
    const entry = byDay.get(day)
    if (entry) {
      cumulative += entry.usage
      out.push(entry.factIds.length > 0 ? { dayStartMs: day, cumulative, factIds: entry.factIds } : { dayStartMs: day, cumulative })
    } else {
      out.push({ dayStartMs: day, cumulative })
    }
  }
  return out
}

interface Day {
  index: number
  dayStartMs: number
  cumulative: number
  factIds: string[]
}

interface Fit {
  /** Fitted daily usage on the last window day (yesterday, index WINDOW_DAYS − 1). */
  intercept: number
  slope: number
}

/**
 * Least squares of daily usage y over the day index x (x = 0 is the first window day); the
 * intercept is moved to the last window day so that horizon day i (i = 1 is today) is
 * intercept + slope·i. One point: slope 0.
 */
function fitLine(points: { x: number; y: number }[]): Fit {
  const n = points.length
  if (n === 0) return { intercept: 0, slope: 0 }
  const meanX = points.reduce((s, p) => s + p.x, 0) / n
  const meanY = points.reduce((s, p) => s + p.y, 0) / n
  let sxx = 0
  let sxy = 0
  for (const p of points) {
    sxx += (p.x - meanX) ** 2
    sxy += (p.x - meanX) * (p.y - meanY)
  }
  const slope = sxx === 0 ? 0 : sxy / sxx
  return { intercept: meanY + slope * (WINDOW_DAYS - 1 - meanX), slope }
}

/** Projected usage of horizon day i (i = 1 is today). */
function dailyAt(f: Fit, i: number): number {
  return Math.max(0, f.intercept + f.slope * i)
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`
}

function fmt(n: number): string {
  return round2(n).toLocaleString('en-US', { maximumFractionDigits: 2 })
}

function dateTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, 'Z')
}

/**
 * When `remaining` is used up at the projected rate, starting at `now`. Usage accrues evenly
 * within a day; day i (i = 1 is today) has rate dailyAt(i) per day. null when not within
 * MAX_EXHAUSTION_DAYS or the rate is zero from some day on.
 */
function exhaustion(f: Fit, remaining: number, now: number, todayStart: number): number | null {
  if (remaining <= 0) return now
  let left = remaining
  let t = now
  for (let i = 1; i <= MAX_EXHAUSTION_DAYS; i++) {
    const dayEnd = todayStart + i * DAY_MS
    const perMs = dailyAt(f, i) / DAY_MS
    if (perMs <= 0) {
      if (f.slope <= 0) return null
      t = dayEnd
      continue
    }
    const capacity = perMs * (dayEnd - t)
    if (capacity >= left) return Math.ceil(t + left / perMs)
    left -= capacity
    t = dayEnd
  }
  return null
}

export function forecastUsage(input: ForecastInput): ForecastResult {
  const { now } = input
  const horizonDays = input.horizonDays ?? DEFAULT_HORIZON_DAYS
  if (!Number.isInteger(horizonDays) || horizonDays < 1 || horizonDays > MAX_HORIZON_DAYS) {
    throw new RangeError(`horizonDays must be an integer from 1 to ${MAX_HORIZON_DAYS}`)
  }
  const window = forecastWindow(now)
  const warnings: string[] = []
  const nextActions: string[] = []
  const subject = input.featureSlug ? `usage of ${input.featureSlug}` : 'usage'

  const { days, invalid } = windowDays(input.dailyCumulative, window)
  if (invalid > 0) warnings.push(`${plural(invalid, 'fact')} with a non-numeric day or value ignored.`)
  const series = dailyDifferences(days, window)
  const stats = statistics(series.points, horizonDays)

  const first = days[0]
  const last = days[days.length - 1]
  const freshness = {
    generatedAt: now,
    dataFrom: first ? first.dayStartMs : window.from,
    dataTo: last ? last.dayStartMs + DAY_MS : window.from,
  }
  const evidence = days.filter((d) => series.used.has(d)).flatMap((d) => d.factIds.map((id) => ({ id, timestamp: d.dayStartMs })))
  dataWarnings(last, series, stats, window, warnings, nextActions)
  const answer = answerOf(subject, horizonDays, stats, last !== undefined)

  const result: ForecastResult = {
    answer,
    confidence: stats.confidence,
    freshness,
    evidence,
    warnings,
    nextActions,
    horizonDays,
    projectedUsage: stats.projectedUsage,
    observedDays: stats.observedDays,
    baselineUsage: stats.baselineUsage,
    trendPerDay: stats.trendPerDay,
  }
  if (input.periodKey !== undefined) result.periodKey = input.periodKey
  addLimits(input, result, { f: stats.f, now, windowTo: window.to, horizonDays, observedDays: stats.observedDays, latestCumulative: latestCumulative(input) })
  return result
}

type Window = ReturnType<typeof forecastWindow>

/**
 * Step 1: the facts inside the 14 windows, one per day. Several facts in a day keep the largest
 * value, since a cumulative series only grows within a day; their ids are all kept as evidence.
 */
function windowDays(facts: readonly DailyCumulative[], window: Window): { days: Day[]; invalid: number } {
  let invalid = 0
  const byIndex = new Map<number, Day>()
  for (const fact of facts) {
    if (!Number.isFinite(fact.dayStartMs) || !Number.isFinite(fact.cumulative)) {
      invalid++
      continue
    }
    const dayStartMs = startOfUtcDay(fact.dayStartMs)
    if (dayStartMs < window.from || dayStartMs >= window.to) continue
    const index = (dayStartMs - window.from) / DAY_MS
    const ids = fact.factIds && fact.factIds.length > 0 ? fact.factIds : [`day:${isoDay(dayStartMs)}`]
    const seen = byIndex.get(index)
    if (!seen) byIndex.set(index, { index, dayStartMs, cumulative: fact.cumulative, factIds: [...ids] })
    else {
      seen.cumulative = Math.max(seen.cumulative, fact.cumulative)
      for (const id of ids) if (!seen.factIds.includes(id)) seen.factIds.push(id)
    }
  }
  const days = [...byIndex.values()].sort((a, b) => a.index - b.index)
  return { days, invalid }
}

interface DailySeries {
  /** Daily usage y on window day x. */
  points: { x: number; y: number }[]
  /** The days some point was taken from: the evidence. */
  used: Set<Day>
  /** Days whose cumulative value fell below the day before's. */
  decreasing: number[]
  /** Window days without a fact between two days with one. */
  missing: number[]
}

/**
 * Step 2: daily usage as differences of consecutive days, kept when ≥ 0. A difference across a
 * gap would lump several days into one, and a negative one is a reset or a correction rather
 * than usage, so neither is a point; both are remembered for the warnings.
 */
function dailyDifferences(days: readonly Day[], window: Window): DailySeries {
  const points: { x: number; y: number }[] = []
  const used = new Set<Day>()
  const decreasing: number[] = []
  const missing: number[] = []
  for (let k = 1; k < days.length; k++) {
    const prev = days[k - 1] as Day
    const cur = days[k] as Day
    if (cur.index !== prev.index + 1) {
      for (let m = prev.index + 1; m < cur.index; m++) missing.push(window.from + m * DAY_MS)
      continue
    }
    const delta = cur.cumulative - prev.cumulative
    if (delta < 0) {
      decreasing.push(cur.dayStartMs)
      continue
    }
    points.push({ x: cur.index, y: delta })
    used.add(prev)
    used.add(cur)
  }
  return { points, used, decreasing, missing }
}

interface Statistics {
  f: Fit
  observedDays: number
  projectedUsage: number
  baselineUsage: number
  trendPerDay: number
  confidence: Confidence
}

/** Step 3: the fitted line, the projection over the horizon, and how far to trust it. */
function statistics(points: { x: number; y: number }[], horizonDays: number): Statistics {
  const f = fitLine(points)
  const observedDays = points.length
  const baseline = observedDays === 0 ? 0 : points.reduce((s, p) => s + p.y, 0) / observedDays
  let projected = 0
  for (let i = 1; i <= horizonDays; i++) projected += dailyAt(f, i)
  const confidence: Confidence = observedDays < MEDIUM_CONFIDENCE_DAYS ? 'low' : observedDays < HIGH_CONFIDENCE_DAYS ? 'medium' : 'high'
  return { f, observedDays, projectedUsage: round2(projected), baselineUsage: round2(baseline), trendPerDay: round2(f.slope), confidence }
}

/** Step 4: what is wrong with the data, appended to `warnings`, and what to do about it, to `nextActions`. */
function dataWarnings(last: Day | undefined, series: DailySeries, stats: Statistics, window: Window, warnings: string[], nextActions: string[]): void {
  const { observedDays, confidence } = stats
  if (!last) {
    warnings.push(`No usage data in the ${WINDOW_DAYS} days before today (${isoDay(window.from)} to ${isoDay(window.to - DAY_MS)}).`)
    nextActions.push('Check that usage events for this customer and feature are being recorded; a forecast needs at least two consecutive days of data.')
    return
  }
  if (observedDays < MEDIUM_CONFIDENCE_DAYS) {
    warnings.push(
      `Sparse data: ${plural(observedDays, 'observed day')} of usage in the last ${WINDOW_DAYS} days; confidence is low below ${MEDIUM_CONFIDENCE_DAYS}.`,
    )
  }
  if (last.dayStartMs < window.to - STALE_AFTER_DAYS * DAY_MS) {
    warnings.push(`Stale data: no usage fact in the last ${STALE_AFTER_DAYS} days; the latest is from ${isoDay(last.dayStartMs)}.`)
    nextActions.push('Check that usage events are still being ingested: recent days have no data.')
  }
  const { decreasing, missing } = series
  if (decreasing.length > 0) {
    warnings.push(
      `Decreasing cumulative usage on ${plural(decreasing.length, 'day')} (${decreasing.map(isoDay).join(', ')}): those days' differences were dropped.`,
    )
  }
  if (missing.length > 0) {
    warnings.push(`Gaps: no data on ${plural(missing.length, 'day')} (${missing.map(isoDay).join(', ')}); differences across a gap are not counted.`)
  }
  if (confidence !== 'high' && observedDays > 0) {
    nextActions.push(`Treat this forecast as a rough estimate until ${HIGH_CONFIDENCE_DAYS} days of usage are observed (now ${observedDays}).`)
  }
}

/** Step 5: the answer in a sentence; `hasData` tells "no data at all" from "no two consecutive days". */
function answerOf(subject: string, horizonDays: number, stats: Statistics, hasData: boolean): string {
  const { observedDays, trendPerDay } = stats
  if (observedDays === 0) {
    return hasData
      ? `Not enough data to forecast ${subject}: no two consecutive days with usage facts in the last ${WINDOW_DAYS} days, so the next ${plural(horizonDays, 'day')} are projected at 0.`
      : `No usage data in the last ${WINDOW_DAYS} days, so ${subject} over the next ${plural(horizonDays, 'day')} is projected at 0.`
  }
  const trend = trendPerDay > 0 ? `rising by ${fmt(trendPerDay)} a day` : trendPerDay < 0 ? `falling by ${fmt(-trendPerDay)} a day` : 'with a flat trend'
  return (
    `${subject[0]?.toUpperCase()}${subject.slice(1)} is projected at ${fmt(stats.projectedUsage)} over the next ${plural(horizonDays, 'day')}, ` +
    `from an average of ${fmt(stats.baselineUsage)} a day ${trend} (${plural(observedDays, 'observed day')}, ${stats.confidence} confidence).`
  )
}

/**
 * The latest cumulative value given up to `now`, today's included: what a limit counts as used
 * when the caller does not say. Unlike the windows, this looks at every valid fact.
 */
function latestCumulative(input: ForecastInput): number {
  const latest = [...input.dailyCumulative]
    .filter((d) => Number.isFinite(d.dayStartMs) && Number.isFinite(d.cumulative) && d.dayStartMs <= input.now)
    .sort((a, b) => a.dayStartMs - b.dayStartMs || a.cumulative - b.cumulative)
    .at(-1)
  return latest?.cumulative ?? 0
}

/**
 * Step 6: the limit and the budget, when there are: when is each used up at the projected rate?
 * Their sentences extend the answer, and their next actions follow those of the data warnings.
 */
function addLimits(input: ForecastInput, result: ForecastResult, context: LimitContext): void {
  const sentences: string[] = []
  const exhaustions: (number | null)[] = []
  if (input.limit) {
    const outcome = limitOutcome(input.limit, context)
    sentences.push(outcome.sentence)
    result.nextActions.push(...outcome.nextActions)
    result.limit = outcome.result
    exhaustions.push(outcome.result.exhaustsAt)
  }
  if (input.budgetLimits && input.budgetLimits.length > 0) {
    // The tightest: used up first (never last), then the least remaining.
    const outcomes = input.budgetLimits.map((lim) => limitOutcome(lim, context))
    const key = (o: LimitOutcome) => o.result.exhaustsAt ?? Infinity
    const tightest = outcomes.reduce((a, b) => (key(b) < key(a) || (key(b) === key(a) && b.result.remaining < a.result.remaining) ? b : a))
    sentences.push(tightest.sentence)
    result.nextActions.push(...tightest.nextActions)
    result.budget = tightest.result
    exhaustions.push(tightest.result.exhaustsAt)
  }
  if (exhaustions.length > 0) {
    const known = exhaustions.filter((x): x is number => x !== null)
    result.exhaustsAt = known.length > 0 ? Math.min(...known) : null
    result.answer = [result.answer, ...sentences].join(' ')
  }
}

interface LimitContext {
  f: ReturnType<typeof fitLine>
  now: number
  windowTo: number
  horizonDays: number
  observedDays: number
  /** The latest cumulative value given (today included): the default of `used`. */
  latestCumulative: number
}

interface LimitOutcome {
  sentence: string
  nextActions: string[]
  result: ForecastLimitResult
}

/** When one limit is used up at the projected rate, in a sentence and as figures (README "Limits"). */
function limitOutcome(lim: ForecastLimit, c: LimitContext): LimitOutcome {
  const { f, now, horizonDays, observedDays } = c
  const usedAmount = lim.used ?? c.latestCumulative
  const remaining = lim.amount - usedAmount
  let exhaustsAt = remaining <= 0 ? now : observedDays === 0 ? null : exhaustion(f, remaining, now, c.windowTo)
  const resetsFirst = exhaustsAt !== null && remaining > 0 && lim.resetsAt != null && lim.resetsAt <= exhaustsAt
  if (resetsFirst) exhaustsAt = null
  const horizonEnd = c.windowTo + horizonDays * DAY_MS
  const within = exhaustsAt !== null && exhaustsAt <= horizonEnd
  const owner = lim.kind === 'budget' ? (lim.budgetKey !== undefined ? `budget ${lim.budgetKey}` : 'budget') : 'entitlement'
  const name = `${owner} limit${lim.id ? ` ${lim.id}` : ''}${lim.window ? ` (${lim.window})` : ''} of ${fmt(lim.amount)}`

  const nextActions: string[] = []
  let sentence: string
  if (remaining <= 0) {
    sentence = `The ${name} is already used up (${fmt(usedAmount)} used).`
    nextActions.push(
      lim.kind === 'budget'
        ? 'Raise the budget limit or wait for its window to reset: usage is being denied or passes the limit.'
        : "Upgrade the customer's plan or grant more: the entitlement limit is used up.",
    )
  } else if (exhaustsAt !== null) {
    sentence =
      `At the projected rate the ${name} (${fmt(remaining)} left) is used up around ${dateTime(exhaustsAt)}` +
      `${within ? `, within the ${horizonDays}-day forecast` : ''}.`
    if (within) {
      nextActions.push(
        lim.kind === 'budget'
          ? `Raise the budget limit or reduce usage before ${dateTime(exhaustsAt)}.`
          : `Upgrade the customer's plan or grant more before ${dateTime(exhaustsAt)}.`,
      )
    }
  } else if (resetsFirst) {
    sentence = `At the projected rate the ${name} (${fmt(remaining)} left) resets at ${dateTime(lim.resetsAt as number)} before it is used up.`
  } else if (observedDays === 0) {
    sentence = `When the ${name} (${fmt(remaining)} left) is used up cannot be estimated without usage data.`
  } else {
    sentence = `At the projected rate the ${name} (${fmt(remaining)} left) is not used up within ${MAX_EXHAUSTION_DAYS} days.`
  }
  return {
    sentence,
    nextActions,
    result: {
      kind: lim.kind,
      ...(lim.id !== undefined ? { id: lim.id } : {}),
      ...(lim.budgetKey !== undefined ? { budgetKey: lim.budgetKey } : {}),
      ...(lim.window !== undefined ? { window: lim.window } : {}),
      amount: lim.amount,
      used: usedAmount,
      remaining: round2(remaining),
      ...(lim.resetsAt !== undefined ? { resetsAt: lim.resetsAt } : {}),
      exhaustsAt,
      exhaustsWithinHorizon: within,
    },
  }
}
