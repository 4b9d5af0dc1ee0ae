import type { BillingInterval } from './schemas.js'

/**
 * Billing and reset cycles of a subscription phase, laid in the subscription's IANA time zone.
 * Calendar arithmetic is done on "wall" milliseconds (the local date and time written as if it
 * were UTC) and converted to instants at the end, so months, days and DST come out as a person in
 * that zone would count them.
 */

/** Stands for "no end" in fields the spec types as numbers: 9999-12-31T23:59:59.999Z. */
export const FOREVER_MS = 253_402_300_799_999

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

const formatters = new Map<string, Intl.DateTimeFormat>()
function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(zone, f)
  }
  return f
}

/** Whether the runtime knows the IANA zone. */
export function isTimeZone(zone: string): boolean {
  try {
    formatter(zone)
    return true
  } catch {
    return false
  }
}

/** The zone's offset from UTC at an instant, in ms (whole seconds). */
function offsetAt(zone: string, instant: number): number {
  if (zone === 'UTC') return 0
  const parts: Record<string, number> = {}
  for (const p of formatter(zone).formatToParts(new Date(instant))) if (p.type !== 'literal') parts[p.type] = Number(p.value)
  const wall = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!)
  return wall - Math.floor(instant / 1000) * 1000
}

function toWall(instant: number, zone: string): number {
  return instant + offsetAt(zone, instant)
}

/** The instant of a wall time; a time skipped by a DST jump lands just after it. */
function toInstant(wall: number, zone: string): number {
  const guess = wall - offsetAt(zone, wall)
  return wall - offsetAt(zone, guess)
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate()
}

/** A wall time `months` calendar months later, its day clamped to the month's last (31 Jan + 1 → 28/29 Feb). */
function addMonths(wall: number, months: number, day = new Date(wall).getUTCDate()): number {
  const d = new Date(wall)
  const total = d.getUTCFullYear() * 12 + d.getUTCMonth() + months
  const year = Math.floor(total / 12)
  const month = total - year * 12
  const timeOfDay = wall - Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
  return Date.UTC(year, month, Math.min(day, daysInMonth(year, month))) + timeOfDay
}

export interface Cadence {
  interval: BillingInterval
  count: number
  /** 'dayOfCreation' or a number whose meaning depends on the interval (see the document schema). */
  anchor: number | 'dayOfCreation'
}

/**
 * The first cycle boundary at or after `startWall`, and the wall time of boundary k from it.
 * A numeric anchor makes the first cycle a partial one, up to the first anchored boundary.
 */
function boundaries(startWall: number, cadence: Cadence): { first: number; at: (k: number) => number } {
  const { interval, count, anchor } = cadence
  const step = (ms: number, first: number) => ({ first, at: (k: number) => first + k * count * ms })
  const monthly = (months: number, first: number, day: number) => ({ first, at: (k: number) => addMonths(first, k * count * months, day) })
  const d = new Date(startWall)
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
  switch (interval) {
    case 'minute':
      return step(MINUTE_MS, startWall)
    case 'day': {
      if (anchor === 'dayOfCreation') return step(DAY_MS, startWall)
      const first = midnight + anchor * HOUR_MS
      return step(DAY_MS, first >= startWall ? first : first + DAY_MS)
    }
    case 'week': {
      if (anchor === 'dayOfCreation') return step(7 * DAY_MS, startWall)
      const isoToday = ((d.getUTCDay() + 6) % 7) + 1
      const first = midnight + ((anchor - isoToday + 7) % 7) * DAY_MS
      return step(7 * DAY_MS, first >= startWall ? first : first + 7 * DAY_MS)
    }
    case 'month':
    case 'year': {
      const months = interval === 'month' ? 1 : 12
      if (anchor === 'dayOfCreation') return monthly(months, startWall, d.getUTCDate())
      const day = Math.max(1, anchor)
      const first = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), Math.min(day, daysInMonth(d.getUTCFullYear(), d.getUTCMonth())))
      return monthly(months, first >= startWall ? first : addMonths(first, 1, day), day)
    }
    case 'onetime':
      return { first: FOREVER_MS, at: () => FOREVER_MS }
  }
}

/**
 * The cycle that contains `now`, for a phase that started at `startAt`: [start, end), the end
 * cut at the phase's end. Before the phase starts, its first cycle.
 */
export function cycleAt(now: number, startAt: number, endAt: number | null, cadence: Cadence, zone: string): { start: number; end: number } {
  const cut = (start: number, end: number) => ({ start, end: endAt === null ? end : Math.min(end, endAt) })
  if (cadence.interval === 'onetime') return cut(startAt, FOREVER_MS)
  const startWall = toWall(startAt, zone)
  const b = boundaries(startWall, cadence)
  const nowWall = toWall(Math.max(now, startAt), zone)
  if (nowWall < b.first) return cut(startAt, toInstant(b.first, zone))
  // Estimate k from an average cycle length, then step to the exact one: calendar months vary.
  const average = { minute: MINUTE_MS, day: DAY_MS, week: 7 * DAY_MS, month: 30.436875 * DAY_MS, year: 365.2425 * DAY_MS }[cadence.interval] * cadence.count
  let k = Math.max(0, Math.floor((nowWall - b.first) / average))
  while (k > 0 && b.at(k) > nowWall) k--
  while (b.at(k + 1) <= nowWall) k++
  const start = k === 0 && b.first === startWall ? startAt : toInstant(b.at(k), zone)
  return cut(start, toInstant(b.at(k + 1), zone))
}

/** `units` intervals after `startAt` (a trial's end), in the zone's calendar. */
export function addIntervals(startAt: number, interval: BillingInterval, units: number, zone: string): number {
  if (units === 0 || interval === 'onetime') return startAt
  const b = boundaries(toWall(startAt, zone), { interval, count: 1, anchor: 'dayOfCreation' })
  return toInstant(b.at(units), zone)
}

/** The numeric anchor of a cadence at a phase start: day of month, ISO weekday, hour, or 0. */
export function resolveAnchor(startAt: number, cadence: Cadence, zone: string): number {
  if (cadence.anchor !== 'dayOfCreation') return cadence.anchor
  const d = new Date(toWall(startAt, zone))
  switch (cadence.interval) {
    case 'month':
    case 'year':
      return d.getUTCDate()
    case 'week':
      return ((d.getUTCDay() + 6) % 7) + 1
    case 'day':
      return d.getUTCHours()
    default:
      return 0
  }
}
