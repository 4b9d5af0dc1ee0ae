// An agent that pays for each step out of a budget, with the typed client (sdk/):
// every step holds the most it may cost, does its work, and settles what it really cost (or
// releases the hold when it fails); its token usage goes to /v1/usage/record-batch in batches.
// When the budget cannot take another step, the 402 says which limit and what would help.
//
//   METERING_URL=http://localhost:8787 METERING_KEY=mk_... npx tsx examples/agent.ts
//
// Optional: METERING_BUDGET (default agent-demo), METERING_CUSTOMER (default demo-customer),
// METERING_RUN (names this run's idempotency keys: run it again with the same value and every
// step replays instead of paying twice; default: a new one).
import { pathToFileURL } from 'node:url'
import { BudgetExceededError, fromUnits, MeteringClient, type RecordResult, toUnits } from '../sdk/src/index.js'

/** A made-up task: the model's answer and the tokens it used (a real agent calls its model here). */
const STEPS = ['read the ticket', 'search the docs', 'draft a reply', 'check the draft', 'send it']
const PRICE_PER_TOKEN = '0.0003'
const MOST_A_STEP_COSTS = '0.50'

export interface AgentSummary {
  completed: number
  spent: string
  stoppedBy?: { limitId: string | undefined; remedy: string | undefined }
  /** Usage events the gateway accepted. */
  eventsAccepted: number
}

export async function main(env: Record<string, string | undefined> = process.env, log: (line: string) => void = console.log): Promise<AgentSummary> {
  const baseUrl = env.METERING_URL
  const apiKey = env.METERING_KEY
  if (!baseUrl || !apiKey) throw new Error('set METERING_URL and METERING_KEY')
  const budget = env.METERING_BUDGET ?? 'agent-demo'
  const customerId = env.METERING_CUSTOMER ?? 'demo-customer'
  const run = env.METERING_RUN ?? `run-${Date.now()}`
  const client = new MeteringClient({ baseUrl, apiKey })

  // 2 USD a day, hard: the fifth step will not fit.
  await client.budgets.upsert({ key: budget, unit: 'USD', limits: [{ id: 'daily', window: 'day', enforce: 'hard', amount: '2' }] })

  const summary: AgentSummary = { completed: 0, spent: '0', eventsAccepted: 0 }
  const usage: Promise<RecordResult[]>[] = []
  for (const [i, task] of STEPS.entries()) {
    try {
      const step = await client.hold(
        budget,
        MOST_A_STEP_COSTS,
        async (hold) => {
          const tokens = 1200 + 100 * i
          usage.push(client.record({ customerId, eventSlug: 'llm.completion', idempotencyKey: `${hold.idempotencyKey}:tokens`, properties: { value: tokens } }))
          return { cost: fromUnits(BigInt(tokens) * toUnits(PRICE_PER_TOKEN)), value: `${task}: done` }
        },
        { idempotencyKey: `${run}:step-${i}` },
      )
      summary.completed++
      summary.spent = fromUnits(toUnits(summary.spent) + toUnits(step.cost))
      log(
        `step ${i + 1} ${step.value} (held ${MOST_A_STEP_COSTS}, cost ${step.cost}, remaining ${step.settled.balance.remaining}${step.settled.replayed ? ', replayed' : ''})`,
      )
    } catch (err) {
      if (!(err instanceof BudgetExceededError)) throw err
      summary.stoppedBy = { limitId: err.blocked?.limitId, remedy: err.remedy }
      log(`step ${i + 1} refused: limit ${err.blocked?.limitId} has ${err.blocked?.remaining} left; remedy: ${err.remedy} (request ${err.requestId})`)
      break
    }
  }
  // Sends what is still buffered; each event's result says whether the gateway took it.
  await client.close()
  const results = (await Promise.all(usage)).flat()
  summary.eventsAccepted = results.filter((r) => r.accepted).length
  for (const r of results) if (!r.accepted) log(`usage event refused: ${r.error.code} ${r.error.message}`)
  log(`done: ${summary.completed} steps, ${summary.spent} USD, ${summary.eventsAccepted} usage events recorded`)
  return summary
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
