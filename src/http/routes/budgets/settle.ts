import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { holdOutcomeJson } from './json.js'
import { Amount, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { BudgetKey, HoldId, HoldOutcomeSchema } from '../../../budgets/schemas.js'

export const settleHold = defineRoute({
  method: 'POST',
  path: '/v1/budgets/settle',
  operationId: 'budgets.settle',
  summary: 'Settle a hold with the final usage',
  description:
    "Final usage up to the hold's amount (more is 409: record the excess). Settling again with the same amount replays. An expired hold was settled at its full amount; only that amount settles it.",
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({ key: BudgetKey, holdId: HoldId, amount: Amount, idempotencyKey: Type.Optional(IdempotencyKey) }),
  response: HoldOutcomeSchema,
  errors: [409],
  handler: ({ body, projectId, services }) => services.budgets.settle(projectId, body),
  serialize: holdOutcomeJson,
})
