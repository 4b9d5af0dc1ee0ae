import { failure, type Failure } from '../kernel/errors.js'

/**
 * What each wallet script answers, in its header's order (lua/*.lua "Returns"), by the storage
 * adapter's function (src/wallet/redis.ts): the adapter accepts no other status from that script.
 * applyWalletToInvoice-3 answers a replayed flag, no status.
 */
export const WALLET_SCRIPT_STATUSES = {
  getWallet: ['ok'],
  topUp: ['ok', 'replayed', 'idempotency_conflict', 'currency_mismatch'],
  grantCredit: ['ok', 'replayed', 'idempotency_conflict', 'currency_mismatch'],
} as const

export type WalletScript = keyof typeof WALLET_SCRIPT_STATUSES
/** The statuses one adapter function's script answers. */
export type StatusOf<F extends WalletScript> = (typeof WALLET_SCRIPT_STATUSES)[F][number]
/** Every status a wallet script answers. */
export type WalletScriptStatus = StatusOf<WalletScript>
/** The statuses that answer the operation: the callers turn them into values. */
export type WalletSuccessStatus = 'ok' | 'replayed'
/** The statuses that refuse it: walletFailure turns them into the domain's Failure. */
export type WalletFailureStatus = Exclude<WalletScriptStatus, WalletSuccessStatus>

/** What a refusal is told about. */
export interface WalletFailureContext {
  /** The wallet's currency, as the script left it. */
  walletCurrency: string
  /** The currency the money in came in. */
  currency: string
}

/** The one translation of a refusing status into the domain's Failure (src/http/errors.ts maps its kind to HTTP). */
const FAILURES: Record<WalletFailureStatus, (c: WalletFailureContext) => Failure> = {
  idempotency_conflict: () => failure('conflict', 'idempotency_conflict', 'This idempotencyKey was used for a different request.'),
  currency_mismatch: (c) => failure('conflict', 'currency_mismatch', `The wallet holds ${c.walletCurrency}; it cannot take ${c.currency}.`),
}

/** Every refusing status: the keys of the one table. */
export const WALLET_FAILURE_STATUSES = Object.keys(FAILURES) as WalletFailureStatus[]

/** The domain's Failure for a status that refused an operation. */
export function walletFailure(status: WalletFailureStatus, context: WalletFailureContext): Failure {
  return FAILURES[status](context)
}
