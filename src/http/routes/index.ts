import type { AnyRoute, RawRoute } from '../route.js'
import { listEntitlements } from './access/listEntitlements.js'
import { updateAccess } from './access/update.js'
import { adminRoutes } from './admin/index.js'
import { forecastUsage } from './analytics/usageForecast.js'
import { getUsage } from './analytics/usageGet.js'
import { usageSeries } from './analytics/usageSeries.js'
import { authorizeHold } from './budgets/authorize.js'
import { chargeBudget } from './budgets/charge.js'
import { getBudget } from './budgets/get.js'
import { recordUsage } from './budgets/record.js'
import { releaseHold } from './budgets/release.js'
import { settleHold } from './budgets/settle.js'
import { upsertBudget } from './budgets/upsert.js'
import { budgetSeries } from './budgets/series.js'
import { applyConfig } from './config/apply.js'
import { consoleRoutes } from './console/index.js'
import { listCustomers } from './customers/list.js'
import { getEntitlements } from './entitlements/get.js'
import { listFeatures } from './features/list.js'
import { closeInvoiceCycles } from './invoices/close.js'
import { getInvoice } from './invoices/get.js'
import { listInvoices } from './invoices/list.js'
import { createKey } from './keys/create.js'
import { revokeKey } from './keys/revoke.js'
import { createPaymentMethod } from './paymentMethods/create.js'
import { listPaymentMethods } from './paymentMethods/list.js'
import { sandboxSetupRoutes } from './paymentMethods/sandboxSetup.js'
import { getPlanVersion } from './planVersions/get.js'
import { listPlanVersions } from './planVersions/list.js'
import { listPlansVersions } from './plans/listVersions.js'
import { createProject } from './projects/create.js'
import { consumeRun } from './runs/consume.js'
import { endRun } from './runs/end.js'
import { getRun } from './runs/get.js'
import { startRun } from './runs/start.js'
import { getSubscription } from './subscriptions/get.js'
import { recordEvent } from './usage/record.js'
import { recordEventBatch } from './usage/recordBatch.js'
import { listDeadLetters } from './usage/deadLettersList.js'
import { replayDeadLetters } from './usage/deadLettersReplay.js'
import { deleteWebhook } from './webhooks/delete.js'
import { listWebhookFailures } from './webhooks/failures.js'
import { replayWebhookFailures } from './webhooks/failuresReplay.js'
import { listWebhooks } from './webhooks/list.js'
import { upsertWebhook } from './webhooks/upsert.js'
import { walletBalance } from './wallet/balance.js'
import { grantCredit } from './wallet/grantCredit.js'
import { topUpWallet } from './wallet/topUp.js'

/** Every route of the API, in the order the OpenAPI document lists them. */
export const routes = [
  createProject,
  createKey,
  revokeKey,
  upsertBudget,
  getBudget,
  budgetSeries,
  authorizeHold,
  settleHold,
  releaseHold,
  chargeBudget,
  recordUsage,
  applyConfig,
  listFeatures,
  listCustomers,
  listPlansVersions,
  listPlanVersions,
  getPlanVersion,
  listEntitlements,
  getEntitlements,
  getSubscription,
  updateAccess,
  recordEvent,
  recordEventBatch,
  listDeadLetters,
  replayDeadLetters,
  getUsage,
  forecastUsage,
  usageSeries,
  upsertWebhook,
  listWebhooks,
  deleteWebhook,
  listWebhookFailures,
  replayWebhookFailures,
  createPaymentMethod,
  listPaymentMethods,
  startRun,
  consumeRun,
  endRun,
  getRun,
  walletBalance,
  grantCredit,
  topUpWallet,
  getInvoice,
  listInvoices,
  closeInvoiceCycles,
  ...adminRoutes,
] as unknown as readonly AnyRoute[]

/** Routes outside the JSON API (HTML pages and forms; not in the OpenAPI document). */
export const rawRoutes: readonly RawRoute[] = [...sandboxSetupRoutes, ...consoleRoutes]
