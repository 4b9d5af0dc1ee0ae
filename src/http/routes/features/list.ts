import { FeaturesListResponseSchema } from '../../../catalog/schemas.js'
import { defineRoute } from '../../route.js'

export const listFeatures = defineRoute({
  method: 'GET',
  path: '/v1/features/list',
  operationId: 'features.list',
  summary: 'List features',
  description: 'Features of the project, without createdAtM and updatedAtM.',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  response: FeaturesListResponseSchema,
  handler: ({ projectId, services }) => services.catalog.listFeatures(projectId),
})
