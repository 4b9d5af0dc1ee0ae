// examples/agent.ts, run as a user runs it (its own Node process, METERING_URL and METERING_KEY)
// against a real gateway: four steps fit the 2 USD budget and are settled at what they cost,
// the fifth is refused with its remedy, every usage event is accepted; run again with the same
// METERING_RUN, every step replays and nothing is counted twice.
import { afterAll, beforeAll, expect, test } from 'vitest'
import { main } from '../../examples/agent.js'
import { MeteringClient } from '../../sdk/src/index.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { spawnNode } from '../support/processes.js'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway()
})
afterAll(async () => {
  await gw?.close()
})

async function runAgent(env: Record<string, string>): Promise<string> {
  const agent = spawnNode('examples/agent.ts', 'examples/agent.ts', env)
  const deadline = setTimeout(() => void agent.kill(), 60_000)
  const exit = await agent.exited
  clearTimeout(deadline)
  expect(exit, agent.output()).toEqual({ code: 0, signal: null })
  return agent.output()
}

test('the example agent: four steps paid, the fifth refused with its remedy; a rerun replays', async () => {
  const { apiKey } = await gw.project()
  const env = { METERING_URL: gw.url, METERING_KEY: apiKey, METERING_RUN: 'run-42', METERING_BUDGET: 'agent-demo' }
  const output = await runAgent(env)
  const expected = [
    'step 1 read the ticket: done (held 0.50, cost 0.36, remaining 1.64)',
    'step 2 search the docs: done (held 0.50, cost 0.39, remaining 1.25)',
    'step 3 draft a reply: done (held 0.50, cost 0.42, remaining 0.83)',
    'step 4 check the draft: done (held 0.50, cost 0.45, remaining 0.38)',
    expect.stringMatching(/^step 5 refused: limit daily has 0\.38 left; remedy: wait_for_reset \(request .+\)$/),
    'done: 4 steps, 1.62 USD, 4 usage events recorded',
  ]
  expect(output.trim().split('\n')).toEqual(expected)

  const client = new MeteringClient({ baseUrl: gw.url, apiKey })
  const before = await client.budgets.get({ key: 'agent-demo' })
  expect(before.balance.limits[0]).toMatchObject({ consumed: '1.62', held: '0' })

  // The same run again: each step's hold and settle replay (the balance as it is now), nothing is paid twice.
  const replayed = expected.map((line, i) => (i < 4 ? (line as string).replace(/remaining [0-9.]+\)$/, 'remaining 0.38, replayed)') : line))
  expect((await runAgent(env)).trim().split('\n')).toEqual(replayed)
  const after = await client.budgets.get({ key: 'agent-demo' })
  expect(after.balance.limits[0]).toMatchObject({ consumed: '1.62', held: '0' })
})

test('without METERING_URL and METERING_KEY it says what to set', async () => {
  await expect(main({}, () => undefined)).rejects.toThrow('set METERING_URL and METERING_KEY')
})
