import { Type } from '@sinclair/typebox'
import { MAX_RUN_TTL_MS } from '../../../runs/types.js'
import { WalletCurrencySchema } from '../../../wallet/types.js'
import { defineRoute } from '../../route.js'
import { IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { BudgetKey } from '../../../budgets/schemas.js'
import { CustomerId, RunId, RunSchema } from '../../../runs/schemas.js'

const Label = (description: string) => Type.String({ minLength: 1, maxLength: 128, description })

export const startRun = defineRoute({
  method: 'POST',
  path: '/v1/runs/start',
  operationId: 'runs.start',
  summary: 'Start a run: reserve its budget from the wallet, from a budget (budgetKey), or from its parent run',
  description:
    "A root run reserves budgetAmountMinor from the customer's wallet (credits first, then cash; the wallet's held grows); " +
    "not enough available is 402 insufficient_funds. A child run (parentRunId) reserves from its parent's remaining (402 insufficient_budget when it " +
    'does not fit; 409 parent_not_running) and never outlives it. Once per idempotencyKey per customer: the same request answers the same run, another ' +
    "is 409. With budgetKey a root run leases from that budget instead of the wallet: the lease counts in the budget's held like a hold " +
    "(402 BUDGET_EXCEEDED with the budget's blocked details when a hard limit cannot take it; 409 budget_closed; 400 when ttlMs exceeds the budget's " +
    "holds.maxTtlMs), each accepted consume moves its cost into the budget's consumed, and ending releases the rest. The budget's unit must be the " +
    "run's currency (budgetAmountMinor / 10^exponent of it); another unit is 409 budget_unit_mismatch. See src/runs/README.md.",
  tags: ['runs'],
  access: { kind: 'project', scope: 'runs:write' },
  body: strictObject({
    customerId: CustomerId,
    budgetAmountMinor: Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'The budget in minor currency units (cents for USD and EUR).',
    }),
    currency: Type.Optional(WalletCurrencySchema),
    idempotencyKey: IdempotencyKey,
    workloadType: Type.Optional(Label('What runs, e.g. `agent` (the default).')),
    workloadId: Type.Optional(Label("The caller's id of the workload.")),
    traceId: Type.Optional(Label('A trace id to find the run by.')),
    parentRunId: Type.Optional(RunId),
    budgetKey: Type.Optional(
      Type.String({
        minLength: BudgetKey.minLength,
        maxLength: BudgetKey.maxLength,
        pattern: BudgetKey.pattern,
        description: "Lease from this budget instead of the wallet (root runs only: with parentRunId it is 400). Its unit must be the run's currency.",
      }),
    ),
    ttlMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_RUN_TTL_MS,
        description: 'Deadline from now; default 15 minutes, at most 7 days. A child run ends no later than its parent.',
      }),
    ),
  }),
  response: RunSchema,
  errors: [402, 409, 412],
  handler: ({ body, projectId, services }) => services.runs.start(projectId, body),
})
