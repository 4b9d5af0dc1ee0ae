import { defineRoute } from '../../route.js'
import { holdOutcomeJson } from './json.js'
import { strictObject } from '../../../kernel/schema.js'
import { BudgetKey, HoldId, HoldOutcomeSchema } from '../../../budgets/schemas.js'

export const releaseHold = defineRoute({
  method: 'POST',
  path: '/v1/budgets/release',
  operationId: 'budgets.release',
  summary: 'Release an open hold',
  description: 'Only after confirming zero usage and no continuing work. Releasing twice replays.',
  tags: ['budgets'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({ key: BudgetKey, holdId: HoldId }),
  response: HoldOutcomeSchema,
  errors: [409],
  handler: ({ body, projectId, services }) => services.budgets.release(projectId, body),
  serialize: holdOutcomeJson,
})
