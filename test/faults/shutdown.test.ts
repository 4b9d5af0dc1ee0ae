// Issue 9, "Graceful shutdown": SIGTERM to the gateway of `npm start` while clients keep their
// keep-alive connections busy. Every request the gateway received is answered 2xx (none is cut
// off by Redis closing under it), each acknowledged hold is in Redis after a restart, and the
// process exits 0. With its Redis stalled, the gateway still exits, by METERING_SHUTDOWN_MS.
import { afterEach, describe, expect, test } from 'vitest'
import { waitFor } from '../support/processes.js'
import { GatewayProcess } from './gatewayProcess.js'

const CLIENTS = 32

interface Tally {
  statuses: Map<number, number>
  holdIds: string[]
  /** Requests that got no answer: the connection was refused or closed (after the listener closed). */
  connectionErrors: number
  otherErrors: string[]
}

/** One client: authorizes $1 holds one after another until its connection fails. */
async function client(gw: GatewayProcess, id: number, tally: Tally, running: () => boolean): Promise<void> {
  for (let i = 0; running(); i++) {
    try {
      const answer = await gw.call('/v1/budgets/authorize', { key: 'load', amount: '1', idempotencyKey: `c${id}-${i}` })
      tally.statuses.set(answer.status, (tally.statuses.get(answer.status) ?? 0) + 1)
      if (answer.status === 200) tally.holdIds.push(answer.body.holdId)
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause
      if (cause?.code && ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(cause.code)) tally.connectionErrors++
      else tally.otherErrors.push(String((err as Error).message))
      return
    }
  }
}

describe('SIGTERM', () => {
  let gw: GatewayProcess | undefined
  let stalled: number | undefined
  afterEach(async () => {
    await gw?.cleanUp(stalled === undefined ? [] : [stalled])
    gw = undefined
    stalled = undefined
  })

  test('under load: 0 non-2xx answers, every acknowledged hold kept, exit code 0', async () => {
    gw = new GatewayProcess()
    await gw.start()
    await gw.setUp('load', '1000000000')
    const tally: Tally = { statuses: new Map(), holdIds: [], connectionErrors: 0, otherErrors: [] }
    const answered = () => [...tally.statuses.values()].reduce((a, b) => a + b, 0)
    const clients = Array.from({ length: CLIENTS }, (_, id) => client(gw!, id, tally, () => true))
    await waitFor('load to be flowing', () => answered() >= 1_000, 30_000)
    const atSignal = answered()
    const exit = await gw.proc.kill('SIGTERM')
    await Promise.all(clients)

    const detail = JSON.stringify({ statuses: [...tally.statuses], atSignal, connectionErrors: tally.connectionErrors, other: tally.otherErrors.slice(0, 3) })
    expect(exit.code, gw.proc.output()).toBe(0)
    expect([...tally.statuses.keys()], detail).toEqual([200])
    expect(tally.otherErrors, detail).toEqual([])
    expect(new Set(tally.holdIds).size).toBe(tally.holdIds.length)

    // What was acknowledged is in the embedded Redis of the same data directory.
    await gw.start()
    const budget = await gw.call('/v1/budgets/get', { key: 'load' })
    expect(budget.body.balance.limits[0].held).toBe(String(tally.holdIds.length))
  }, 90_000)

  test('with Redis stalled: the process still exits by METERING_SHUTDOWN_MS', async () => {
    gw = new GatewayProcess({ METERING_SHUTDOWN_MS: '3000', METERING_REDIS_TIMEOUT_MS: '300' })
    await gw.start()
    await gw.setUp('load', '1000')
    stalled = await gw.redisPid()
    process.kill(stalled, 'SIGSTOP')
    const started = performance.now()
    const exit = await gw.proc.kill('SIGTERM')
    const took = performance.now() - started
    expect(took, gw.proc.output()).toBeLessThan(3_000 + 2_000)
    expect(exit.code === 0 || exit.code === 1, JSON.stringify(exit)).toBe(true)
  }, 60_000)
})
