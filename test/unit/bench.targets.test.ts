// The `targets` bench scenario's arithmetic: every issue-11 target judged PASS/MISS (N/A without a
// figure) from an authorize and an ingest report, and the cost model's core-seconds and dollars.
import { describe, expect, it } from 'vitest'
import type { IngestLeg, IngestReport } from '../../bench/lib/ingestReport.js'
import type { LegResult, Report } from '../../bench/lib/report.js'
import { cost, costModel, costOptions, DEFAULT_COST, formatCost, perEventCpuUs, usd } from '../../bench/lib/targetsCost.js'
import { formatLimit, formatTargets, formatValue, grid, judge, mergeIngest, TARGETS, targetRows, type TargetRow } from '../../bench/lib/targetsTable.js'

function authLeg(id: string, x: Partial<LegResult>): LegResult {
  return { id, label: id, ok: true, ...x }
}

const redis = (usecLow: number, cpuUs: number): LegResult['redis'] => ({ perOp: { usecLow, usecHigh: usecLow + 5, cpuUs } }) as unknown as LegResult['redis']

function authReport(legs: LegResult[], connections = 64): Report {
  return { scenario: 'authorize', timestamp: 't', options: { connections }, machine: {}, legs, ratios: {}, targets: [] }
}

function ingestLeg(id: string, x: Partial<IngestLeg>): IngestLeg {
  return { id, label: id, kind: 'ingest', ok: true, ...x }
}

function ingestReport(legs: IngestLeg[]): IngestReport {
  return { scenario: 'ingest', timestamp: 't', options: {}, machine: {}, legs, targets: [] }
}

const AUTH = authReport([
  authLeg('hello', { opsPerSec: 40_000, cpuUsPerReq: 16, otherCpuPct: 3 }),
  authLeg('peer', { opsPerSec: 15_000, cpuUsPerReq: 40, otherCpuPct: 12 }),
  authLeg('ours-authorize', { opsPerSec: 32_000, cpuUsPerReq: 24, redis: redis(9, 11), latency: { p50: 1, p99: 4.2 } as never, otherCpuPct: 5 }),
  authLeg('ours-always', { opsPerSec: 20_000, cpuUsPerReq: 30, redis: redis(12, 20), latency: { p50: 2, p99: 9 } as never, otherCpuPct: 40 }),
])

const INGEST = ingestReport([
  ingestLeg('ch-insert-server', { kind: 'ceiling', eventsPerSec: 200_000, otherCpuPct: 2 }),
  ingestLeg('ch-insert-once', { kind: 'ceiling', eventsPerSec: 170_000, otherCpuPct: 7 }),
  ingestLeg('single', { eventsPerSec: 30_000, otherCpuPct: 1 }),
  ingestLeg('batch', {
    eventsPerSec: 250_000,
    drain: { eventsPerSec: 200_000, storedDuringLoadPerSec: 200_000, stored: 1 },
    cpuPct: { gateway: 50, redis: 25, worker: 40, clickhouse: 20, bench: 90 },
  }),
  ingestLeg('drain', { kind: 'drain', eventsPerSec: 140_000 }),
  ingestLeg('single-always', { eventsPerSec: 19_000 }),
  ingestLeg('batch-always', { eventsPerSec: 180_000 }),
])

const find = (rows: TargetRow[], fsync: string, name: string): TargetRow => {
  const r = rows.find((x) => x.fsync === fsync && x.name === name)
  if (!r) throw new Error(`no row ${fsync} ${name}`)
  return r
}

describe('judge', () => {
  it('takes the limit itself as a PASS, either side of it as the target says, and no figure as N/A', () => {
    expect(judge('vsHello', 0.75)).toBe(true)
    expect(judge('vsHello', 0.7499)).toBe(false)
    expect(judge('cpuVsHello', 1.5)).toBe(true)
    expect(judge('cpuVsHello', 1.51)).toBe(false)
    expect(judge('redisUs', 10)).toBe(true)
    expect(judge('redisUs', 10.01)).toBe(false)
    expect(judge('batch', 199_999)).toBe(false)
    expect(judge('p99', null)).toBe(null)
  })
})

describe('targetRows', () => {
  const rows = targetRows(AUTH, INGEST)

  it('has every target of the issue once at everysec and once at always', () => {
    for (const t of Object.values(TARGETS)) {
      expect(rows.filter((r) => r.name === t.name).map((r) => r.fsync)).toEqual(['everysec', 'always'])
    }
    expect(rows).toHaveLength(2 * Object.keys(TARGETS).length)
  })

  it('computes the everysec figures from ours-authorize and the everysec ingest legs', () => {
    const e = (name: string) => find(rows, 'everysec', name)
    expect(e(TARGETS.vsHello.name)).toMatchObject({ value: 0.8, pass: true, otherCpuPct: 5 })
    expect(e(TARGETS.vsPeer.name).value).toBeCloseTo(32 / 15, 10)
    expect(e(TARGETS.vsPeer.name).pass).toBe(true)
    expect(e(TARGETS.cpuVsHello.name)).toMatchObject({ value: 1.5, pass: true })
    expect(e(TARGETS.redisUs.name)).toMatchObject({ value: 9, pass: true })
    expect(e(TARGETS.p99.name)).toMatchObject({ value: 4.2, pass: true })
    expect(e(TARGETS.batch.name)).toMatchObject({ value: 250_000, pass: true })
    expect(e(TARGETS.drain.name)).toMatchObject({ value: 140_000, pass: false })
    expect(e(TARGETS.insertOnce.name)).toMatchObject({ value: 0.85, pass: true, otherCpuPct: 7 })
    expect(e(TARGETS.single.name)).toMatchObject({ value: 30_000 / 32_000, pass: true })
  })

  it('judges the always rows on the always legs, and has no figure where there is no always variant', () => {
    const a = (name: string) => find(rows, 'always', name)
    expect(a(TARGETS.vsHello.name)).toMatchObject({ value: 0.5, pass: false, otherCpuPct: 40 })
    expect(a(TARGETS.cpuVsHello.name)).toMatchObject({ value: 30 / 16, pass: false })
    expect(a(TARGETS.redisUs.name)).toMatchObject({ value: 12, pass: false })
    expect(a(TARGETS.p99.name)).toMatchObject({ value: 9, pass: false })
    expect(a(TARGETS.batch.name)).toMatchObject({ value: 180_000, pass: false })
    expect(a(TARGETS.single.name)).toMatchObject({ value: 19_000 / 20_000, pass: true })
    for (const t of [TARGETS.drain, TARGETS.insertOnce]) {
      expect(a(t.name).value).toBe(null)
      expect(a(t.name).pass).toBe(null)
      expect(a(t.name).note).toMatch(/no always/)
    }
  })

  it('makes a target N/A when a leg it needs failed or is missing, and notes the connection count', () => {
    const auth = authReport(
      AUTH.legs.map((l) => (l.id === 'hello' ? { ...l, ok: false } : l)),
      32,
    )
    const r = targetRows(auth, undefined)
    expect(find(r, 'everysec', TARGETS.vsHello.name)).toMatchObject({ value: null, pass: null, note: 'a leg it needs failed or did not run' })
    expect(find(r, 'everysec', TARGETS.vsPeer.name).pass).toBe(true)
    expect(find(r, 'everysec', TARGETS.p99.name).note).toBe('measured at 32 connections')
    expect(find(r, 'everysec', TARGETS.batch.name).pass).toBe(null)
    expect(find(r, 'everysec', TARGETS.single.name).pass).toBe(null)
    expect(targetRows(undefined, undefined).every((x) => x.pass === null)).toBe(true)
  })

  it("takes the legs of every ingest run that came back, so one failed run leaves the others' targets", () => {
    const [ceilings, everysec, always] = [INGEST.legs.slice(0, 2), INGEST.legs.slice(2, 5), INGEST.legs.slice(5)]
    const merged = mergeIngest([ingestReport(ceilings), { error: 'probe event did not reach ClickHouse' }, ingestReport(always)])
    expect('error' in merged).toBe(false)
    const r = targetRows(AUTH, merged as IngestReport)
    expect(find(r, 'everysec', TARGETS.insertOnce.name).value).toBeCloseTo(0.85, 12)
    expect(find(r, 'everysec', TARGETS.batch.name).pass).toBe(null)
    expect(find(r, 'always', TARGETS.batch.name).value).toBe(180_000)
    expect((mergeIngest([ingestReport(everysec)]) as IngestReport).legs).toHaveLength(3)
    expect(mergeIngest([{ error: 'a' }, { error: 'b' }])).toEqual({ error: 'a; b' })
  })

  it('prints one line per row with its verdict, and the count', () => {
    const text = formatTargets(rows)
    for (const r of rows) expect(text).toContain(r.name)
    expect(text.match(/PASS/g)?.length).toBeGreaterThanOrEqual(rows.filter((r) => r.pass === true).length)
    expect(text).toContain(`${rows.filter((r) => r.pass === true).length} PASS, ${rows.filter((r) => r.pass === false).length} MISS, 2 N/A`)
    expect(text).toMatch(/drain into ClickHouse, events\/s\s+always\s+—\s+≥ 150,000\/s\s+N\/A/)
    expect(formatLimit('vsPeer')).toBe('≥ 2.0×')
    expect(formatLimit('vsHello')).toBe('≥ 0.75×')
    expect(formatLimit('redisUs')).toBe('≤ 10 µs')
    expect(formatLimit('drain')).toBe('≥ 150,000/s')
    expect(
      grid(
        [
          ['a', 'n', 'b'],
          ['xyz', '1', 'q'],
          ['w', '100', 'qq'],
        ],
        [0, 2],
      ),
    ).toBe('a      n  b\n---  ---  --\nxyz    1  q\nw    100  qq')
    expect(formatValue({ value: 0.8, unit: 'ratio' })).toBe('0.80×')
    expect(formatValue({ value: 212_345.6, unit: 'events/s' })).toBe('212,346/s')
    expect(formatValue({ value: 4.236, unit: 'ms' })).toBe('4.24 ms')
  })
})

describe('cost model', () => {
  it('turns CPU µs per op into core-seconds, provisioned core-hours and dollars', () => {
    const c = cost(1e6, 36, { coreHourUsd: 0.04, utilization: 0.5 })
    expect(c.coreSeconds).toBeCloseTo(36, 10)
    expect(c.coreHours).toBeCloseTo(0.02, 12) // 36 s / 3600 / 0.5
    expect(c.usd).toBeCloseTo(0.0008, 12)
    expect(c.opsPerCorePerSec).toBeCloseTo(500_000 / 36, 8)
    expect(cost(1e9, null, DEFAULT_COST)).toEqual({ coreSeconds: null, coreHours: null, usd: null, opsPerCorePerSec: null })
  })

  it('reads CPU µs per event from % of a core: gateway and Redis per accepted event, worker and ClickHouse per stored event', () => {
    const batch = INGEST.legs.find((l) => l.id === 'batch')!
    // 50% of a core at 250k accepted/s = 2 µs; 40% at 200k stored/s = 2 µs.
    expect(perEventCpuUs(batch)).toEqual({ gateway: 2, redis: 1, worker: 2, clickhouse: 1 })
    const noStored = { ...batch, drain: undefined }
    expect(perEventCpuUs(noStored).worker).toBeCloseTo(1.6, 12)
    expect(perEventCpuUs({ ...batch, cpuPct: { gateway: 50 } }).redis).toBe(null)
  })

  it('sums the processes on each path, and leaves the total unknown when one is missing', () => {
    const o = { coreHourUsd: 0.04, utilization: 0.7 }
    const rows = costModel(AUTH, INGEST, o)
    const byId = (id: string) => rows.find((r) => r.id === id)!
    expect(byId('authorize')).toMatchObject({ n: 1e6, cpuUs: { gateway: 24, redis: 11 }, totalUs: 35 })
    expect(byId('authorize').usd).toBeCloseTo(((1e6 * 35) / 1e6 / 3600 / 0.7) * 0.04, 12)
    expect(byId('authorize, fsync always').totalUs).toBe(50)
    const ev = byId('event via /record-batch')
    expect(ev).toMatchObject({ n: 1e9, totalUs: 6, coreSeconds: 6000 })
    expect(ev.usd).toBeCloseTo((6000 / 3600 / 0.7) * 0.04, 12)
    // The single leg has no CPU figures here.
    expect(byId('event via /record')).toMatchObject({ totalUs: null, usd: null })
    expect(costModel(undefined, undefined, o).every((r) => r.totalUs === null)).toBe(true)
  })

  it('reads its options from the environment and refuses nonsense', () => {
    expect(costOptions({})).toEqual(DEFAULT_COST)
    expect(costOptions({ CORE_HOUR_USD: '0.1', CORE_UTILIZATION: '0.5' })).toEqual({ coreHourUsd: 0.1, utilization: 0.5 })
    expect(() => costOptions({ CORE_UTILIZATION: '0' })).toThrow(/CORE_UTILIZATION/)
    expect(() => costOptions({ CORE_UTILIZATION: '1.2' })).toThrow(/CORE_UTILIZATION/)
    expect(() => costOptions({ CORE_HOUR_USD: 'cheap' })).toThrow(/CORE_HOUR_USD/)
  })

  it('prints dollars rounded', () => {
    expect(usd(0.000698412)).toBe('$0.000698')
    expect(usd(12.3456)).toBe('$12.35')
    expect(usd(1234.5)).toBe('$1,234.50')
    expect(usd(null)).toBe('—')
    const text = formatCost(costModel(AUTH, INGEST, DEFAULT_COST), DEFAULT_COST)
    expect(text).toContain('cores run at 70%')
    expect(text).toContain('$0.04 per core-hour')
    expect(text).toMatch(/event via \/record-batch\s+2\.0\s+1\.0\s+2\.0\s+1\.0\s+6\.0\s+1B events\s+6,000\s+\$0\.0952/)
  })
})
