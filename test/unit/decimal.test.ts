// Examples for the amount grammar and the exact money representation (src/kernel/money.ts):
// strings of up to 19 integer and 8 fractional digits ↔ BigInt units of 10^-8 ↔ the (hi, lo)
// pair of exact doubles that Lua adds and compares.
import { describe, expect, test } from 'vitest'
import { AMOUNT_PATTERN, LO_BASE, UNITS_PER_ONE, formatUnits, fromPair, ledgerJson, parseAmount, toPair } from '../../src/kernel/money.js'

const NINES_19 = '9'.repeat(19)
/** The largest amount of the grammar, in units: 10^27 − 1. */
const MAX_UNITS = 10n ** 27n - 1n

describe('parseAmount accepts the grammar', () => {
  test.each([
    ['0', 0n],
    ['0.0', 0n],
    ['0.00000000', 0n],
    ['0.00000001', 1n],
    ['1', 100_000_000n],
    ['1.5', 150_000_000n],
    ['1.50', 150_000_000n],
    ['10.5', 1_050_000_000n],
    ['12.34567891', 1_234_567_891n],
    ['007', 700_000_000n],
    ['000.1', 10_000_000n],
    ['0000000000000000007', 700_000_000n], // 19 digits, leading zeros count towards them
    [NINES_19, (10n ** 19n - 1n) * UNITS_PER_ONE],
    [`${NINES_19}.99999999`, MAX_UNITS],
    [`${NINES_19}.9`, (10n ** 19n - 1n) * UNITS_PER_ONE + 90_000_000n],
    ['1' + '0'.repeat(18), 10n ** 18n * UNITS_PER_ONE],
  ])('%j → %s units', (text, units) => {
    expect(parseAmount(text)).toBe(units)
  })

  test('the largest amount has exactly 27 digits of units', () => {
    expect(parseAmount(`${NINES_19}.99999999`)!.toString()).toBe('9'.repeat(27))
  })
})

describe('parseAmount rejects everything else', () => {
  test.each([
    [''],
    ['.5'],
    ['1.'],
    ['.'],
    ['1.123456789'], // 9 fractional digits
    ['1'.repeat(20)], // 20 integer digits
    ['0'.repeat(20)],
    ['0'.repeat(19) + '1'], // 20 digits even though the value is small
    ['-1'],
    ['-0'],
    ['+1'],
    [' 1'],
    ['1 '],
    ['1\n'],
    ['\n1'],
    ['1e5'],
    ['1E5'],
    ['0x10'],
    ['1,5'],
    ['1_000'],
    ['1..5'],
    ['1.2.3'],
    ['Infinity'],
    ['NaN'],
    ['１'], // a full-width digit is not [0-9]
    ['٣'], // nor is an Arabic-Indic digit
  ])('%j', (text) => {
    expect(parseAmount(text)).toBeUndefined()
  })

  test('the exported pattern is the same grammar', () => {
    const re = new RegExp(AMOUNT_PATTERN)
    expect(re.test(`${NINES_19}.99999999`)).toBe(true)
    expect(re.test('1.123456789')).toBe(false)
    expect(re.test('1'.repeat(20))).toBe(false)
  })
})

describe('formatUnits is canonical', () => {
  test.each([
    [0n, '0'],
    [1n, '0.00000001'],
    [10n, '0.0000001'],
    [100_000_000n, '1'],
    [150_000_000n, '1.5'],
    [1_050_000_000n, '10.5'],
    [1_234_567_891n, '12.34567891'],
    [700_000_000n, '7'],
    [MAX_UNITS, `${NINES_19}.99999999`],
    [(10n ** 19n - 1n) * UNITS_PER_ONE, NINES_19],
    // Sums past the grammar's range still format exactly.
    [2n * MAX_UNITS, '19999999999999999999.99999998'],
    [10n ** 40n, '1' + '0'.repeat(32)],
    // Negative remainders (a record pushed consumption past a limit).
    [-1n, '-0.00000001'],
    [-150_000_000n, '-1.5'],
    [-MAX_UNITS, `-${NINES_19}.99999999`],
  ])('%s units → %j', (units, text) => {
    expect(formatUnits(units)).toBe(text)
  })

  test.each([
    ['10.50', '10.5'],
    ['10.00000000', '10'],
    ['007', '7'],
    ['0.0', '0'],
    ['000.10000000', '0.1'],
    ['0000000000000000000.00000001', '0.00000001'],
  ])('%j formats back as %j', (text, canonical) => {
    expect(formatUnits(parseAmount(text)!)).toBe(canonical)
  })
})

describe('toPair / fromPair', () => {
  test.each([
    [0n, 0, 0],
    [1n, 0, 1],
    [LO_BASE - 1n, 0, 99_999_999_999_999],
    [LO_BASE, 1, 0],
    [LO_BASE + 1n, 1, 1],
    [MAX_UNITS, 9_999_999_999_999, 99_999_999_999_999],
    // The top of the documented range: hi = 2^53 − 1 is still exact.
    [(2n ** 53n - 1n) * LO_BASE + LO_BASE - 1n, Number.MAX_SAFE_INTEGER, 99_999_999_999_999],
  ])('%s units ↔ [%d, %d]', (units, hi, lo) => {
    const pair = toPair(units)
    expect(pair).toEqual([hi, lo])
    expect(Number.isSafeInteger(pair[0])).toBe(true)
    expect(Number.isSafeInteger(pair[1])).toBe(true)
    expect(fromPair(...pair)).toBe(units)
    // Redis hands integers back as strings.
    expect(fromPair(String(pair[0]), String(pair[1]))).toBe(units)
  })

  test('negative units have no pair', () => {
    expect(() => toPair(-1n)).toThrow(RangeError)
  })

  test('fromPair reads integer strings exactly, beyond what a double could hold as one number', () => {
    expect(fromPair('9999999999999', '99999999999999')).toBe(MAX_UNITS)
    expect(fromPair('0', '0')).toBe(0n)
  })
})

describe("ledgerJson: the spec's integer, never rounded", () => {
  test.each([
    [0n, 0],
    [250_000_000n, 250_000_000],
    [-250_000_000n, -250_000_000],
    [2n ** 53n - 1n, Number.MAX_SAFE_INTEGER],
    [-(2n ** 53n - 1n), -Number.MAX_SAFE_INTEGER],
    [2n ** 53n, '9007199254740992'],
    [-(2n ** 53n) - 1n, '-9007199254740993'],
    [10n ** 27n - 1n, '999999999999999999999999999'],
  ])('%s → %j', (units, json) => {
    expect(ledgerJson(units)).toBe(json)
    expect(BigInt(ledgerJson(units))).toBe(units)
  })
})
