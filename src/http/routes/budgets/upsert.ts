import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { BudgetUpsertSchema, BudgetViewSchema, CrossedSchema } from '../../../budgets/schemas.js'

export const upsertBudget = defineRoute({
  method: 'POST',
  path: '/v1/budgets/upsert',
  operationId: 'budgets.upsert',
  summary: "Create or replace a budget's configuration",
  description: 'Usage already counted is kept for limits whose id and window are unchanged. A closesAt in the past closes the budget to new holds.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: BudgetUpsertSchema,
  response: Type.Intersect([BudgetViewSchema, Type.Object({ created: Type.Boolean(), crossed: CrossedSchema })]),
  handler: ({ body, projectId, services }) => services.budgets.upsert(projectId, body),
})
