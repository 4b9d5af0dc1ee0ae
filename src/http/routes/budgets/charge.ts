import { defineRoute } from '../../route.js'
import { Amount, IdempotencyKey, strictObject } from '../../../kernel/schema.js'
import { BudgetKey, ConsumptionSchema } from '../../../budgets/schemas.js'

export const chargeBudget = defineRoute({
  method: 'POST',
  path: '/v1/budgets/charge',
  operationId: 'budgets.charge',
  summary: 'Charge usage immediately',
  description: 'Immediate consumption, denied (402) when a hard limit cannot take it and (409) on a closed budget.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({ key: BudgetKey, amount: Amount, idempotencyKey: IdempotencyKey }),
  response: ConsumptionSchema,
  errors: [402, 409],
  handler: ({ body, projectId, services }) => services.budgets.charge(projectId, body),
})
