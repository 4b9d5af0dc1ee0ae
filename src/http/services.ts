import type { AnalyticsService } from '../analytics/service.js'
import type { BudgetService } from '../budgets/service.js'
import type { CatalogService } from '../catalog/service.js'
import type { EntitlementService } from '../entitlements/service.js'
import type { EventService } from '../events/service.js'
import type { ClickHouseStore } from '../infra/clickhouse/store.js'
import type { InvoiceService } from '../invoices/service.js'
import type { KeyService } from '../keys/service.js'
import type { WebhookService } from '../notifications/webhooks.js'
import type { PaymentService } from '../payments/service.js'
import type { RunService } from '../runs/service.js'
import type { WalletService } from '../wallet/service.js'

/** The domain services a route handler may call. */
export interface Services {
  analytics: AnalyticsService
  budgets: BudgetService
  catalog: CatalogService
  entitlements: EntitlementService
  events: EventService
  /** The usage history, for root's read-only SQL (POST /v1/admin/sql); undefined without ClickHouse. */
  history: ClickHouseStore | undefined
  invoices: InvoiceService
  keys: KeyService
  payments: PaymentService
  runs: RunService
  wallet: WalletService
  webhooks: WebhookService
}
