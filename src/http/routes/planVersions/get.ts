import { PlanVersionGetResponseSchema } from '../../../catalog/schemas.js'
import { success } from '../../../kernel/errors.js'
import { defineRoute } from '../../route.js'

export const getPlanVersion = defineRoute({
  method: 'GET',
  path: '/v1/plan-versions/get/:planVersionId',
  operationId: 'planVersions.get',
  summary: 'A published plan version',
  description:
    '`{planVersion}`: the plan version with its plan, its features with their full configuration (type, featureType, usageMode, ' +
    'tierMode, unlike the list variant) and its flat price. A draft or an unknown id is 404.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  response: PlanVersionGetResponseSchema,
  handler: async ({ params, projectId, services }) => {
    const found = await services.catalog.getPlanVersion(projectId, params.planVersionId!)
    return found.ok ? success({ planVersion: found.value }) : found
  },
})
