import type { AnyRoute } from '../route.js'
import { authorizeHold } from './budgets/authorize.js'
import { chargeBudget } from './budgets/charge.js'
import { getBudget } from './budgets/get.js'
import { recordUsage } from './budgets/record.js'
import { releaseHold } from './budgets/release.js'
import { settleHold } from './budgets/settle.js'
import { upsertBudget } from './budgets/upsert.js'
import { createKey } from './keys/create.js'
import { revokeKey } from './keys/revoke.js'
import { createProject } from './projects/create.js'

/** Every route of the API, in the order the OpenAPI document lists them. */
export const routes = [
  createProject, createKey, revokeKey,
  upsertBudget, getBudget, authorizeHold, settleHold, releaseHold, chargeBudget, recordUsage,
] as unknown as readonly AnyRoute[]
