import type { AnalyticsService } from './analytics/service.js'
import type { BudgetService } from './budgets/service.js'
import type { CatalogService } from './catalog/service.js'
import type { EventService } from './events/service.js'
import type { KeyService } from './keys/service.js'
import type { WebhookService } from './notifications/webhooks.js'
import type { PaymentService } from './payments/service.js'

/** The domain services a route handler may call. */
export interface Services {
  analytics: AnalyticsService
  budgets: BudgetService
  catalog: CatalogService
  events: EventService
  keys: KeyService
  payments: PaymentService
  webhooks: WebhookService
}
