import { defineRoute } from '../../route.js'
import { listPlanVersions } from '../planVersions/list.js'

/** The spec names the plan version list under two paths (4.10): one operation, two routes. */
export const listPlansVersions = defineRoute({
  ...listPlanVersions,
  path: '/v1/plans/versions/list',
  operationId: 'plans.versions.list',
  description: `${listPlanVersions.description} The same operation as POST /v1/plan-versions/list.`,
})
