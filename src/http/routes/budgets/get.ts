import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'
import { BudgetKey, BudgetViewSchema } from '../../../budgets/schemas.js'

export const getBudget = defineRoute({
  method: 'POST',
  path: '/v1/budgets/get',
  operationId: 'budgets.get',
  summary: 'Read a budget and its balance',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:read' },
  body: strictObject({ key: BudgetKey }),
  response: BudgetViewSchema,
  handler: ({ body, projectId, services }) => services.budgets.get(projectId, body.key),
})
