import { defineRoute } from '../../route.js'
import { Amount, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { BudgetKey, ConsumptionSchema } from '../../../budgets/schemas.js'

export const recordUsage = defineRoute({
  method: 'POST',
  path: '/v1/budgets/record',
  operationId: 'budgets.record',
  summary: 'Record usage after the fact',
  description: 'Never denied: the only way past a hard limit.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({ key: BudgetKey, amount: Amount, idempotencyKey: IdempotencyKey }),
  response: ConsumptionSchema,
  errors: [409],
  handler: ({ body, projectId, services }) => services.budgets.record(projectId, body),
})
