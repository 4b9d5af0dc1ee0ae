import { PlanVersionsListRequest, PlanVersionsListResponseSchema } from '../../../catalog/schemas.js'
import { defineRoute } from '../../route.js'

export const listPlanVersions = defineRoute({
  method: 'POST',
  path: '/v1/plan-versions/list',
  operationId: 'planVersions.list',
  summary: 'List plan versions',
  description: 'Plan versions of the project with their plan, features and flat price, by plan slug and version. Every filter given must hold.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  body: PlanVersionsListRequest,
  response: PlanVersionsListResponseSchema,
  handler: ({ body, projectId, services }) => services.catalog.listPlanVersions(projectId, body),
})
