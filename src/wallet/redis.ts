import { fromPair, toPair } from '../kernel/money.js'
import { Script, type RedisClient } from '../infra/redis/scripts.js'
import { WALLET_SCRIPT_STATUSES, type StatusOf, type WalletScript, type WalletScriptStatus } from './errors.js'
import { walletKeys } from './keys.js'

/** Storage adapter of wallets: one script per function, each one round trip. */
const scripts = {
  get: new Script('getWallet-3'),
  topUp: new Script('topUpWallet-3'),
  grant: new Script('grantCredit-4'),
  invoice: new Script('applyWalletToInvoice-3'),
}

/** Each adapter function's statuses as a set: a reply's status is checked against its script's. */
const KNOWN = {} as Record<WalletScript, ReadonlySet<string>>
for (const fn of Object.keys(WALLET_SCRIPT_STATUSES) as WalletScript[]) KNOWN[fn] = new Set(WALLET_SCRIPT_STATUSES[fn])

export interface StoredCredit {
  id: string
  source: string
  createdAtMs: number
  /** 0: never. */
  expiresAtMs: number
  issued: bigint
  available: bigint
  priority: number
}

export interface WalletSnapshot<S extends WalletScriptStatus = WalletScriptStatus> {
  status: S
  /** '' when the wallet never held money. */
  currency: string
  available: bigint
  held: bigint
  credits: StoredCredit[]
}

/** Reads walletReply (lua/includes/wallet.lua) from `at`; a status its script is not known to answer is a bug, thrown. */
function readWallet<F extends WalletScript>(fn: F, script: Script, reply: unknown[], at = 0): WalletSnapshot<StatusOf<F>> {
  const status = String(reply[at])
  if (!KNOWN[fn].has(status)) throw new Error(`${script.name} answered an unknown status: ${status}`)
  const credits: StoredCredit[] = []
  for (let i = at + 6; i + 8 < reply.length; i += 9) {
    credits.push({
      id: String(reply[i]),
      source: String(reply[i + 1]),
      createdAtMs: Number(reply[i + 2]),
      expiresAtMs: Number(reply[i + 3]),
      issued: fromPair(reply[i + 4] as number, reply[i + 5] as number),
      available: fromPair(reply[i + 6] as number, reply[i + 7] as number),
      priority: Number(reply[i + 8]),
    })
  }
  return {
    status: status as StatusOf<F>,
    currency: String(reply[at + 1]),
    available: fromPair(reply[at + 2] as number, reply[at + 3] as number),
    held: fromPair(reply[at + 4] as number, reply[at + 5] as number),
    credits,
  }
}

const pair = (units: bigint) => toPair(units).map(String)

export async function getWallet(redis: RedisClient, projectId: string, customerId: string, nowMs: number): Promise<WalletSnapshot<StatusOf<'getWallet'>>> {
  const k = walletKeys(projectId, customerId)
  return readWallet('getWallet', scripts.get, await scripts.get.run(redis, [k.wallet, k.credits, k.journal], [projectId, customerId, nowMs]))
}

export async function topUp(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  idempotencyKey: string,
  currency: string,
  amount: bigint,
  fingerprint: string,
): Promise<WalletSnapshot<StatusOf<'topUp'>>> {
  const k = walletKeys(projectId, customerId)
  const args = [projectId, customerId, nowMs, idempotencyKey, currency, ...pair(amount), fingerprint]
  return readWallet('topUp', scripts.topUp, await scripts.topUp.run(redis, [k.wallet, k.credits, k.journal], args))
}

export async function grantCredit(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  input: { idempotencyKey: string; currency: string; amount: bigint; source: string; priority: number; expiresAtMs: number; fingerprint: string },
): Promise<{ creditId: string; wallet: WalletSnapshot<StatusOf<'grantCredit'>> }> {
  const k = walletKeys(projectId, customerId)
  const args = [
    projectId,
    customerId,
    nowMs,
    input.idempotencyKey,
    input.currency,
    ...pair(input.amount),
    input.source,
    input.priority,
    input.expiresAtMs,
    input.fingerprint,
  ]
  const reply = await scripts.grant.run(redis, [k.wallet, k.credits, k.journal, k.counters], args)
  return { creditId: String(reply[0]), wallet: readWallet('grantCredit', scripts.grant, reply, 1) }
}

export async function applyToInvoice(
  redis: RedisClient,
  projectId: string,
  customerId: string,
  nowMs: number,
  invoiceId: string,
  currency: string,
  amount: bigint,
): Promise<{ replayed: boolean; remaining: bigint; allocations: { creditId: string; source: string; amount: bigint }[] }> {
  const k = walletKeys(projectId, customerId)
  const reply = await scripts.invoice.run(redis, [k.wallet, k.credits, k.journal], [projectId, customerId, nowMs, invoiceId, currency, ...pair(amount)])
  const allocations: { creditId: string; source: string; amount: bigint }[] = []
  for (let i = 3; i + 3 < reply.length; i += 4) {
    allocations.push({ creditId: String(reply[i]), source: String(reply[i + 1]), amount: fromPair(String(reply[i + 2]), String(reply[i + 3])) })
  }
  return { replayed: Number(reply[0]) === 1, remaining: fromPair(String(reply[1]), String(reply[2])), allocations }
}
