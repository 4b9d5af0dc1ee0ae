import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { BudgetKey, CrossedSchema, EpochMs, strictObject } from '../../../kernel/schema.js'
import { BudgetViewSchema, LimitConfigSchema } from '../../../budgets/schemas.js'

export const upsertBudget = defineRoute({
  method: 'POST',
  path: '/v1/budgets/upsert',
  operationId: 'budgets.upsert',
  summary: "Create or replace a budget's configuration",
  description: 'Usage already counted is kept for limits whose id and window are unchanged. A closesAt in the past closes the budget to new holds.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({
    key: BudgetKey,
    unit: Type.Optional(Type.String({ maxLength: 32, description: 'What amounts count, e.g. USD or tokens. Informational.' })),
    limits: Type.Array(LimitConfigSchema, { maxItems: 32 }),
    holds: Type.Optional(strictObject({
      defaultTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
      maxTtlMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000_000 })),
    })),
    closesAt: Type.Optional(Type.Union([EpochMs, Type.Null()])),
  }),
  response: Type.Intersect([BudgetViewSchema, Type.Object({ created: Type.Boolean(), crossed: CrossedSchema })]),
  handler: ({ body, projectId, services }) => services.budgets.upsert(projectId, body),
})
