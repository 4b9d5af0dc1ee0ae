// The hot budget routes write their answers as text (src/http/routes/budgets/json.ts) instead of
// JSON.stringify: the bytes must be JSON.stringify's for every value the service builds, with
// amounts from formatUnits, any limit id (escapes and non-ASCII included), null and present
// remaining/resetsAt, crossed limits, and settle's optional fields present or absent.
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { formatUnits } from '../../src/kernel/money.js'
import { balanceJson, holdJson, holdOutcomeJson } from '../../src/http/routes/budgets/json.js'
import type { Balance, Crossed, Hold, HoldOutcome } from '../../src/budgets/types.js'

const amount = fc.bigInt({ min: -(10n ** 28n), max: 10n ** 28n }).map(formatUnits)
const windowName = fc.constantFrom('hour', 'day', 'week', 'month', 'never' as const)
const enforce = fc.constantFrom('hard', 'soft' as const)
/** Limit ids as a user may write them, and strings that need escaping (quotes, controls, unicode). */
const id = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}$/),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('"', '\\', '\n', '\u2028', 'é', '\ud800'),
)
const epochMs = fc.oneof(fc.integer({ min: 0, max: 253402300799999 }), fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -0))

const balance: fc.Arbitrary<Balance> = fc.record({
  remaining: fc.option(amount, { nil: null }),
  held: amount,
  limits: fc.array(
    fc.record({
      id,
      window: windowName,
      enforce,
      amount,
      consumed: amount,
      held: amount,
      remaining: amount,
      resetsAt: fc.option(epochMs, { nil: null }),
    }),
    { maxLength: 5 },
  ),
  asOf: epochMs,
})

const crossed: fc.Arbitrary<Crossed[]> = fc.array(fc.record({ limitId: id, enforce, window: windowName, amount, consumed: amount }), { maxLength: 3 })
const holdId = fc.bigInt({ min: 1n, max: 10n ** 16n - 1n }).map((n) => `h_${n}`)

describe('budget answers written as text', () => {
  test('a Balance: the bytes of JSON.stringify', () => {
    fc.assert(
      fc.property(balance, (b) => {
        expect(balanceJson(b)).toBe(JSON.stringify(b))
      }),
      { numRuns: 2000 },
    )
  })

  test("authorize's Hold: the bytes of JSON.stringify", () => {
    const hold = fc.record({ holdId, amount, expiresAt: epochMs, replayed: fc.boolean(), balance }).map((h): Hold => ({ allowed: true, ...h }))
    fc.assert(
      fc.property(hold, (h) => {
        expect(holdJson(h)).toBe(JSON.stringify(h))
      }),
      { numRuns: 2000 },
    )
  })

  test("settle's and release's HoldOutcome, with and without settledBy/settledAmount: the bytes of JSON.stringify", () => {
    const outcome = fc
      .record({
        holdId,
        state: fc.constantFrom('settled', 'released' as const),
        amount,
        expiresAt: epochMs,
        replayed: fc.boolean(),
        balance,
        crossed,
        settled: fc.option(fc.record({ settledBy: fc.constantFrom('settle', 'expiry' as const), settledAmount: amount }), { nil: undefined }),
      })
      .map(({ settled, ...o }): HoldOutcome => {
        // Built as closeHold builds it: the optional fields are added last, only when settled.
        const value: HoldOutcome = { ...o }
        if (settled) {
          value.settledBy = settled.settledBy
          value.settledAmount = settled.settledAmount
        }
        return value
      })
    fc.assert(
      fc.property(outcome, (o) => {
        expect(holdOutcomeJson(o)).toBe(JSON.stringify(o))
      }),
      { numRuns: 2000 },
    )
  })
})
