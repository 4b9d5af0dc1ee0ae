// WalletService.applyToInvoice (src/wallet/README.md, "Invoices"): credits in the wallet's order,
// then cash, up to the amount; once per invoice (a rerun answers the same and moves nothing).
// Real Redis, a manual clock, a fresh project per test.
import { afterAll, describe, expect, it } from 'vitest'
import { manualClock } from '../../src/kernel/clock.js'
import { journalKey } from '../../src/wallet/keys.js'
import { WalletService } from '../../src/wallet/service.js'
import { testRedis, uniquePrefix } from '../support/redis.js'

const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
const USD = 100_000_000n
const redis = testRedis()
afterAll(() => redis.quit())

function setup() {
  const clock = manualClock(T0)
  return { clock, wallet: new WalletService(redis, clock), projectId: uniquePrefix() }
}

describe('applyToInvoice', () => {
  it('pays from credits by priority, then earliest expiry, then cash; a rerun moves nothing', async () => {
    const { clock, wallet, projectId } = setup()
    const c = 'cust-1'
    expect((await wallet.topUp(projectId, { customerId: c, amount: 10n * USD, idempotencyKey: 't1' })).ok).toBe(true)
    const low = await wallet.grant(projectId, { customerId: c, amount: 3n * USD, source: 'promo', priority: 10, idempotencyKey: 'g-low' })
    const soon = await wallet.grant(projectId, {
      customerId: c,
      amount: 2n * USD,
      source: 'promo',
      priority: 90,
      expiresAt: T0 + 3_600_000,
      idempotencyKey: 'g-soon',
    })
    const later = await wallet.grant(projectId, {
      customerId: c,
      amount: 4n * USD,
      source: 'manual',
      priority: 90,
      expiresAt: T0 + 7_200_000,
      idempotencyKey: 'g-later',
    })
    if (!low.ok || !soon.ok || !later.ok) throw new Error('grant failed')

    const first = await wallet.applyToInvoice(projectId, c, 'inv_1', 12n * USD + 5n, 'USD', clock())
    expect(first).toEqual({
      allocations: [
        { creditId: soon.value.creditId, source: 'promo', amountLedger: 2n * USD },
        { creditId: later.value.creditId, source: 'manual', amountLedger: 4n * USD },
        { creditId: low.value.creditId, source: 'promo', amountLedger: 3n * USD },
        { creditId: null, source: 'cash_wallet', amountLedger: 3n * USD + 5n },
      ],
      remainingLedger: 0n,
    })
    const after = await wallet.balance(projectId, c)
    if (!after.ok) throw new Error('balance failed')
    expect(after.value.available.ledger_amount).toBe(Number(7n * USD - 5n))
    expect(after.value.credits).toEqual([])

    // A rerun (even at another time, with more money in the wallet) answers the same and moves nothing.
    await wallet.topUp(projectId, { customerId: c, amount: 1n * USD, idempotencyKey: 't2' })
    const journalBefore = await redis.llen(journalKey(projectId))
    clock.advance(60_000)
    expect(await wallet.applyToInvoice(projectId, c, 'inv_1', 12n * USD + 5n, 'USD', clock())).toEqual(first)
    expect(await redis.llen(journalKey(projectId))).toBe(journalBefore)
    const again = await wallet.balance(projectId, c)
    expect(again.ok && again.value.available.ledger_amount).toBe(Number(8n * USD - 5n))
  })

  it('pays what the wallet has and answers the rest; another currency or no wallet pays nothing', async () => {
    const { clock, wallet, projectId } = setup()
    await wallet.grant(projectId, { customerId: 'a', amount: 1n * USD, source: 'promo', idempotencyKey: 'g' })
    const partial = await wallet.applyToInvoice(projectId, 'a', 'inv_a', 5n * USD, 'USD', clock())
    expect(partial.remainingLedger).toBe(4n * USD)
    expect(partial.allocations.map((a) => a.amountLedger)).toEqual([1n * USD])
    expect(await wallet.applyToInvoice(projectId, 'a', 'inv_eur', 5n * USD, 'EUR', clock())).toEqual({ allocations: [], remainingLedger: 5n * USD })
    expect(await wallet.applyToInvoice(projectId, 'nobody', 'inv_n', 5n * USD, 'USD', clock())).toEqual({ allocations: [], remainingLedger: 5n * USD })
  })

  it('does not pay from an expired credit, and journals its expiry', async () => {
    const { clock, wallet, projectId } = setup()
    await wallet.grant(projectId, { customerId: 'e', amount: 2n * USD, source: 'promo', expiresAt: T0 + 1000, idempotencyKey: 'g' })
    clock.advance(1000)
    const applied = await wallet.applyToInvoice(projectId, 'e', 'inv_e', 1n * USD, 'USD', clock())
    expect(applied).toEqual({ allocations: [], remainingLedger: 1n * USD })
    const rows = (await redis.lrange(journalKey(projectId), 0, -1)).map((r) => JSON.parse(r.split('\t')[1]!))
    expect(rows.map((r) => [r.kind, r.amount])).toEqual([
      ['credit_grant', '200000000'],
      ['credit_expiry', '200000000'],
    ])
  })

  it('many concurrent applications of one invoice pay it once', async () => {
    const { clock, wallet, projectId } = setup()
    await wallet.topUp(projectId, { customerId: 'k', amount: 100n * USD, idempotencyKey: 't' })
    const results = await Promise.all(Array.from({ length: 20 }, () => wallet.applyToInvoice(projectId, 'k', 'inv_k', 7n * USD, 'USD', clock())))
    for (const r of results) expect(r).toEqual(results[0])
    const b = await wallet.balance(projectId, 'k')
    expect(b.ok && b.value.available.amount).toBe('93')
  })
})
