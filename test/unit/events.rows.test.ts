// The value of a ClickHouse row of an event no meter takes (src/events/rows.ts eventValue):
// exact, and never larger than the Decimal(38, 8) column can sum.
import { describe, expect, test } from 'vitest'
import { eventValue } from '../../src/events/rows.js'

describe('eventValue', () => {
  test.each([
    [{ value: 2.5 }, 2.5],
    [{ value: '0.5' }, 0.5],
    [{ value: '-3' }, -3],
    [{ value: '12345678901234567890.12345678' }, '12345678901234567890.12345678'],
    [{ value: 1e19 }, 1e19],
  ])('%j → %j', (properties, value) => {
    expect(eventValue(properties)).toBe(value)
  })

  test.each([
    [undefined],
    [{}],
    [{ value: 'abc' }],
    [{ value: '1e3' }],
    [{ value: 1e20 }],
    [{ value: -1e300 }],
    [{ value: '123456789012345678901' }],
    [{ value: Number.NaN }],
  ])('%j counts once', (properties) => {
    expect(eventValue(properties)).toBe(1)
  })
})
