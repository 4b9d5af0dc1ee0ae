import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { holdJson } from './json.js'
import { Amount, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { BudgetKey, HoldSchema } from '../../../budgets/schemas.js'

export const authorizeHold = defineRoute({
  method: 'POST',
  path: '/v1/budgets/authorize',
  operationId: 'budgets.authorize',
  summary: 'Authorize a hold',
  description: 'Reserves the maximum permitted usage against every hard limit of the budget, or fails with 402 naming the limit that blocked it.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({
    key: BudgetKey,
    amount: Amount,
    ttlMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 31_536_000_000,
        description: "Execution deadline in ms; default the budget's holds.defaultTtlMs; at most holds.maxTtlMs.",
      }),
    ),
    idempotencyKey: IdempotencyKey,
  }),
  response: HoldSchema,
  errors: [402, 409],
  handler: ({ body, projectId, services }) => services.budgets.authorize(projectId, body),
  serialize: holdJson,
})
