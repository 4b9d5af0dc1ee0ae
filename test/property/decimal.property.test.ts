// Money is exact (DESIGN.md invariant 1): the grammar round-trips through BigInt units and the
// (hi, lo) pairs, and Lua's pair arithmetic agrees with BigInt for sums far past the grammar's
// range and for comparisons at the exact boundary of a limit.
import fc from 'fast-check'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { manualClock } from '../../src/kernel/clock.js'
import { BudgetService } from '../../src/budgets/service.js'
import { LO_BASE, UNITS_PER_ONE, formatUnits, fromPair, parseAmount, toPair } from '../../src/kernel/money.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

const MAX_INT = 10n ** 19n - 1n
const MAX_FRACTION = 10n ** 8n - 1n
const MAX_UNITS = MAX_INT * UNITS_PER_ONE + MAX_FRACTION
const CANONICAL = /^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/

/** A value of the grammar's range, biased towards the edges where carries and padding matter. */
const intPart = fc.oneof(
  fc.bigInt({ min: 0n, max: MAX_INT }),
  fc.constantFrom(0n, 1n, 9n, 10n, 99_999n, 100_000n, 10n ** 18n, MAX_INT, MAX_INT - 1n, 10n ** 6n - 1n, 10n ** 6n),
)
const fractionPart = fc.oneof(fc.bigInt({ min: 0n, max: MAX_FRACTION }), fc.constantFrom(0n, 1n, 10n, 10_000_000n, 50_000_000n, MAX_FRACTION, 99_999_990n))

/** Renders (int, fraction) in the grammar: random leading zeros, fractional digits, trailing zeros. */
const rendered = fc
  .record({ int: intPart, fraction: fractionPart, leading: fc.nat({ max: 19 }), extraFractionDigits: fc.nat({ max: 8 }), dropZeroFraction: fc.boolean() })
  .map(({ int, fraction, leading, extraFractionDigits, dropZeroFraction }) => {
    let text = int.toString()
    text = text.padStart(Math.min(19, text.length + leading), '0')
    const digits = fraction.toString().padStart(8, '0').replace(/0+$/, '')
    if (fraction === 0n && dropZeroFraction) return { text, units: int * UNITS_PER_ONE }
    // At least the significant digits, at most 8; a zero fraction needs at least one digit.
    const width = Math.min(8, Math.max(digits.length, 1) + extraFractionDigits)
    return { text: `${text}.${digits.padEnd(width, '0')}`, units: int * UNITS_PER_ONE + fraction }
  })

const unitsInRange = fc.oneof(
  fc.bigInt({ min: 0n, max: MAX_UNITS }),
  rendered.map((r) => r.units),
  fc.constantFrom(0n, 1n, LO_BASE - 1n, LO_BASE, LO_BASE + 1n, MAX_UNITS),
)

describe('grammar, units and pairs', () => {
  test('parseAmount reads every rendering of a value as that value', () => {
    fc.assert(
      fc.property(rendered, ({ text, units }) => {
        expect(text).toMatch(/^[0-9]{1,19}(\.[0-9]{1,8})?$/)
        expect(parseAmount(text)).toBe(units)
      }),
      { numRuns: 2000 },
    )
  })

  test('formatUnits is canonical and parse(format(x)) == x over the whole range', () => {
    fc.assert(
      fc.property(unitsInRange, (units) => {
        const text = formatUnits(units)
        expect(text).toMatch(CANONICAL)
        expect(parseAmount(text)).toBe(units)
      }),
      { numRuns: 2000 },
    )
  })

  test('format(parse(s)) is the canonical form of s', () => {
    fc.assert(
      fc.property(rendered, ({ text }) => {
        const canonical = formatUnits(parseAmount(text)!)
        expect(canonical).toMatch(CANONICAL)
        expect(formatUnits(parseAmount(canonical)!)).toBe(canonical)
        expect(parseAmount(canonical)).toBe(parseAmount(text)) // the same amount, however it is written
      }),
      { numRuns: 1000 },
    )
  })

  test('toPair/fromPair round-trip; both halves are exact safe integers', () => {
    const wide = fc.oneof(unitsInRange, fc.bigInt({ min: 0n, max: 2n ** 53n * LO_BASE - 1n }))
    fc.assert(
      fc.property(wide, (units) => {
        const [hi, lo] = toPair(units)
        expect(Number.isSafeInteger(hi)).toBe(true)
        expect(Number.isSafeInteger(lo)).toBe(true)
        expect(lo).toBeGreaterThanOrEqual(0)
        expect(lo).toBeLessThan(Number(LO_BASE))
        expect(BigInt(hi) * LO_BASE + BigInt(lo)).toBe(units)
        expect(fromPair(hi, lo)).toBe(units)
        expect(fromPair(String(hi), String(lo))).toBe(units)
      }),
      { numRuns: 2000 },
    )
  })

  test('negative formatting is the negation of positive formatting', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 3n * MAX_UNITS }), (units) => {
        expect(formatUnits(-units)).toBe('-' + formatUnits(units))
      }),
    )
  })
})

// ---------------------------------------------------------------------------------------------
// Lua pair arithmetic, through the real service and scripts.

let redis: Redis
const project = uniquePrefix()
let budgetSeq = 0
const T0 = Date.UTC(2025, 2, 10, 8, 0, 0)

beforeAll(() => {
  redis = testRedis()
})
afterAll(async () => {
  await redis.quit()
})

/** Amounts biased towards the maximum and towards lo values that force a carry. */
const amountUnits = fc.oneof(
  { weight: 3, arbitrary: fc.bigInt({ min: 0n, max: MAX_UNITS }) },
  { weight: 2, arbitrary: fc.constant(MAX_UNITS) },
  { weight: 2, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 13n - 1n }).map((hi) => hi * LO_BASE + LO_BASE - 1n) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 10n ** 13n - 1n }).map((hi) => hi * LO_BASE) },
  { weight: 1, arbitrary: fc.constantFrom(0n, 1n, LO_BASE - 1n, LO_BASE, LO_BASE + 1n) },
)

/** A rendering of `units` with random trailing zeros, so the service never sees only canonical input. */
function render(units: bigint, pad: number): string {
  const canonical = formatUnits(units)
  if (pad === 0) return canonical
  const dot = canonical.indexOf('.')
  const fractionDigits = dot < 0 ? 0 : canonical.length - dot - 1
  const extra = Math.min(pad, 8 - fractionDigits)
  if (extra <= 0) return canonical
  return (dot < 0 ? canonical + '.' : canonical) + '0'.repeat(extra)
}

/** Units of any canonical decimal the service answers with, unbounded and possibly negative. */
function anyUnits(text: string): bigint {
  const negative = text.startsWith('-')
  const [int = '', fraction = ''] = (negative ? text.slice(1) : text).split('.')
  const units = BigInt(int) * UNITS_PER_ONE + BigInt(fraction.padEnd(8, '0') || '0')
  return negative ? -units : units
}

function newBudgetKey(): string {
  budgetSeq++
  return `b${budgetSeq}`
}

function limitOf(balance: { limits: { id: string; consumed: string; remaining: string; held: string; amount: string }[] }, id: string) {
  const l = balance.limits.find((x) => x.id === id)
  if (!l) throw new Error(`no limit ${id}`)
  return l
}

describe('Lua pair arithmetic agrees with BigInt', () => {
  test('record sums and remaining are exact, past 10^19 and past the limit (remaining < 0)', async () => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    await fc.assert(
      fc.asyncProperty(
        amountUnits, // the hard limit
        amountUnits, // the soft limit
        fc.array(fc.record({ kind: fc.constantFrom('record', 'record', 'record', 'authorize'), units: amountUnits, pad: fc.nat({ max: 8 }) }), {
          minLength: 1,
          maxLength: 40,
        }),
        async (hardAmount, softAmount, ops) => {
          const key = newBudgetKey()
          const up = await service.upsert(project, {
            key,
            limits: [
              { id: 'hard', window: 'never', enforce: 'hard', amount: formatUnits(hardAmount) },
              { id: 'soft', window: 'never', enforce: 'soft', amount: render(softAmount, 3) },
            ],
            holds: { defaultTtlMs: 3_600_000 },
          })
          expect(up.ok).toBe(true)
          let consumed = 0n
          let held = 0n
          for (const [i, op] of ops.entries()) {
            if (op.kind === 'record') {
              const r = await service.record(project, { key, amount: render(op.units, op.pad), idempotencyKey: `r${i}` })
              if (!r.ok) throw new Error(`record failed: ${r.reason}`)
              consumed += op.units
              expect(r.value.amount).toBe(formatUnits(op.units))
              checkBalance(r.value.balance)
            } else {
              const fits = consumed + held + op.units <= hardAmount
              const r = await service.authorize(project, { key, amount: render(op.units, op.pad), idempotencyKey: `a${i}` })
              expect(r.ok ? 'ok' : r.reason).toBe(fits ? 'ok' : 'budget_exceeded')
              if (r.ok) {
                held += op.units
                checkBalance(r.value.balance)
              } else {
                checkBalance((r.details as { balance: Parameters<typeof checkBalance>[0] }).balance)
              }
            }
          }
          function checkBalance(balance: {
            remaining: string | null
            held: string
            limits: { id: string; consumed: string; remaining: string; held: string; amount: string }[]
          }) {
            expect(balance.held).toBe(formatUnits(held))
            const hard = limitOf(balance, 'hard')
            const soft = limitOf(balance, 'soft')
            expect(hard.consumed).toBe(formatUnits(consumed))
            expect(soft.consumed).toBe(formatUnits(consumed))
            expect(hard.remaining).toBe(formatUnits(hardAmount - consumed - held))
            expect(soft.remaining).toBe(formatUnits(softAmount - consumed - held))
            expect(balance.remaining).toBe(formatUnits(hardAmount - consumed - held))
          }
          const got = await service.get(project, key)
          if (!got.ok) throw new Error(got.reason)
          expect(anyUnits(got.value.balance.limits[0]!.consumed)).toBe(consumed)
          expect(got.value.balance.remaining).toBe(formatUnits(hardAmount - consumed - held))
        },
      ),
      { numRuns: 100 },
    )
  })

  test('many maximum amounts: the sum stays exact far past the grammar (hundreds × 10^27)', async () => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    const key = newBudgetKey()
    await service.upsert(project, { key, limits: [{ id: 'n', window: 'never', enforce: 'hard', amount: '1' }] })
    const n = 500
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => service.record(project, { key, amount: formatUnits(MAX_UNITS), idempotencyKey: `max${i}` })),
    )
    expect(answers.every((a) => a.ok)).toBe(true)
    const got = await service.get(project, key)
    if (!got.ok) throw new Error(got.reason)
    const total = BigInt(n) * MAX_UNITS
    expect(got.value.balance.limits[0]!.consumed).toBe(formatUnits(total))
    expect(got.value.balance.remaining).toBe(formatUnits(UNITS_PER_ONE - total))
  })

  test('a sum that a pair cannot hold exactly is refused (409 amount_overflow), never rounded', async () => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    const key = newBudgetKey()
    await service.upsert(project, { key, limits: [{ id: 'n', window: 'never', enforce: 'soft', amount: '1' }] })
    // Each maximum amount adds ~10^13 to the pair's high half: 900 fit below 2^53, the 901st does not.
    const answers = await Promise.all(
      Array.from({ length: 900 }, (_, i) => service.record(project, { key, amount: formatUnits(MAX_UNITS), idempotencyKey: `max${i}` })),
    )
    expect(answers.every((a) => a.ok)).toBe(true)
    const total = 900n * MAX_UNITS
    const over = await service.record(project, { key, amount: formatUnits(MAX_UNITS), idempotencyKey: 'max900' })
    expect(over.ok || [over.kind, over.reason]).toEqual(['conflict', 'amount_overflow'])
    const hold = await service.authorize(project, { key, amount: formatUnits(MAX_UNITS), idempotencyKey: 'hold' })
    expect(hold.ok || hold.reason).toBe('amount_overflow')
    const got = await service.get(project, key)
    if (!got.ok) throw new Error(got.reason)
    expect([got.value.balance.limits[0]!.consumed, got.value.balance.held]).toEqual([formatUnits(total), '0'])
    // Smaller amounts still fit, exactly.
    expect((await service.record(project, { key, amount: '1', idempotencyKey: 'one' })).ok).toBe(true)
    const after = await service.get(project, key)
    expect(after.ok && after.value.balance.limits[0]!.consumed).toBe(formatUnits(total + UNITS_PER_ONE))
  })

  test('authorize and charge at the exact boundary: remaining fits, remaining + 0.00000001 does not', async () => {
    const clock = manualClock(T0)
    const service = new BudgetService(redis, clock)
    await fc.assert(
      fc.asyncProperty(
        amountUnits.filter((u) => u > 0n),
        fc.bigInt({ min: 0n, max: 10n ** 6n }), // per-mille of the limit to consume first
        fc.bigInt({ min: 0n, max: 10n ** 6n }), // per-mille of the rest to hold first
        fc.constantFrom('authorize', 'charge') as fc.Arbitrary<'authorize' | 'charge'>,
        fc.nat({ max: 8 }),
        async (limitUnits, consumedShare, heldShare, op, pad) => {
          const key = newBudgetKey()
          await service.upsert(project, {
            key,
            limits: [
              { id: 'cap', window: 'never', enforce: 'hard', amount: render(limitUnits, pad) },
              // A second, larger hard limit and a smaller soft one must not change the decision.
              { id: 'wide', window: 'day', enforce: 'hard', amount: formatUnits(limitUnits + LO_BASE > MAX_UNITS ? MAX_UNITS : limitUnits + LO_BASE) },
              { id: 'soft', window: 'never', enforce: 'soft', amount: '0' },
            ],
            holds: { defaultTtlMs: 3_600_000 },
          })
          const consumed = (limitUnits * consumedShare) / 10n ** 6n
          const heldAmount = ((limitUnits - consumed) * heldShare) / 10n ** 6n
          if (consumed > 0n) expect((await service.charge(project, { key, amount: formatUnits(consumed), idempotencyKey: 'c0' })).ok).toBe(true)
          if (heldAmount > 0n) expect((await service.authorize(project, { key, amount: formatUnits(heldAmount), idempotencyKey: 'h0' })).ok).toBe(true)
          const remaining = limitUnits - consumed - heldAmount

          const call = (units: bigint, idem: string) =>
            op === 'authorize'
              ? service.authorize(project, { key, amount: render(units, pad), idempotencyKey: idem })
              : service.charge(project, { key, amount: render(units, pad), idempotencyKey: idem })

          // remaining + 1 is beyond the grammar (and rejected by validation) when remaining is the maximum.
          const over = remaining + 1n <= MAX_UNITS ? await call(remaining + 1n, 'over') : undefined
          if (over) expect(over.ok ? 'ok' : over.reason).toBe('budget_exceeded')
          if (over && !over.ok) {
            const blocked = (over.details as { blocked: { limitId: string; remaining: string } }).blocked
            expect(blocked.limitId).toBe('cap')
            expect(blocked.remaining).toBe(formatUnits(remaining))
          }
          const exact = await call(remaining, 'exact')
          expect(exact.ok ? 'ok' : exact.reason).toBe('ok')
          if (exact.ok) {
            expect(exact.value.balance.remaining).toBe('0')
            const cap = exact.value.balance.limits.find((l) => l.id === 'cap')!
            expect(cap.remaining).toBe('0')
            expect(cap.consumed).toBe(formatUnits(op === 'charge' ? limitUnits - heldAmount : consumed))
            expect(cap.held).toBe(formatUnits(op === 'authorize' ? limitUnits - consumed : heldAmount))
          }
          // Full: the smallest amount is now denied; zero still fits.
          const tiny = await call(1n, 'tiny')
          expect(tiny.ok ? 'ok' : tiny.reason).toBe('budget_exceeded')
          const zero = await call(0n, 'zero')
          expect(zero.ok ? 'ok' : zero.reason).toBe('ok')
        },
      ),
      { numRuns: 150 },
    )
  })
})
