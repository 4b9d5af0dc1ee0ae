import { Type } from '@sinclair/typebox'
import { PlanFeatureSchema, PlanSchema, PlanVersionSchema } from '../../../catalog/schemas.js'
import { defineRoute } from '../../route.js'

export const getPlanVersion = defineRoute({
  method: 'GET',
  path: '/v1/plan-versions/get/:planVersionId',
  operationId: 'planVersions.get',
  summary: 'A published plan version',
  description: 'The plan version with its plan, features and flat price. A draft or an unknown id is 404.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  response: Type.Intersect(
    [
      PlanVersionSchema,
      Type.Object({
        plan: PlanSchema,
        planFeatures: Type.Array(PlanFeatureSchema),
        flatPrice: Type.String({ description: 'Sum of the flat prices of the version, formatted for people, e.g. "$49".' }),
      }),
    ],
    { description: 'A published plan version with its plan and features.' },
  ),
  handler: ({ params, projectId, services }) => services.catalog.getPlanVersion(projectId, params.planVersionId!),
})
