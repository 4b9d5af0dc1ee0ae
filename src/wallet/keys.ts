import { projectJournalKey } from '../journal/keys.js'
import { PREFIX, projectTag } from '../infra/redis/keys.js'

/**
 * Every Redis key of a customer's wallet, built in one place. All carry the project's hash tag
 * `{cat:<projectId>}` (src/catalog/keys.ts), like the catalog, the customers and the runs, so one
 * script can check a customer, move run budgets and wallet money atomically, on a Cluster too.
 */
export interface WalletKeys {
  /** The wallet hash: currency, cash available and held, idempotency records. */
  wallet: string
  /** The credits hash: creditId → packed credit (lua/includes/wallet.lua). */
  credits: string
  /** The project's outbox list (journal contract): rows for ClickHouse, drained by src/workers/journal.ts. */
  journal: string
  /** The project's counters hash (`credit`, `run`): ids. */
  counters: string
}

export function walletKeys(projectId: string, customerId: string): WalletKeys {
  const tag = projectTag(projectId)
  return {
    wallet: `${PREFIX}${tag}:w:${customerId}`,
    credits: `${PREFIX}${tag}:wc:${customerId}`,
    journal: projectJournalKey(projectId),
    counters: `${PREFIX}${tag}:seq`,
  }
}

/** The project's journal outbox (`mg:{cat:<projectId>}:journal`). */
export { projectJournalKey as journalKey } from '../journal/keys.js'
