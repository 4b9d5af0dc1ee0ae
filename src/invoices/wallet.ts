import type { Clock } from '../kernel/clock.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { WalletService } from '../wallet/service.js'
import type { InvoiceWallet } from './types.js'

/**
 * The wallet invoices are paid from: the customer's wallet (src/wallet), whose applyToInvoice
 * is idempotent per invoice. The wallet service keeps no state of its own (Redis and a clock),
 * so invoices may hold their own instance.
 */
export function walletForInvoices(redis: RedisClient, clock: Clock): InvoiceWallet {
  return new WalletService(redis, clock)
}
