// The hold lifecycle of src/budgets (README "Budgets with holds", spec 2.1 / 3.1 / 4.1 / 7) as a
// TABLE of steps, TigerBeetle style: every scenario is a list of rows
// { op, input, expect } run in order against one fresh budget (a fresh random projectId), with
// time moved only by the injected manual clock. The same table runs against the standalone
// redis-server AND the real 3-master Redis Cluster from test/support/globalSetup.ts.
//
// Isolation of the background sweep (src/workers/holdExpiry.ts): the sweep SCANs every budget of a
// server and applies its own `now` to each, which would disturb budgets of other test files that
// share the servers. So
//  - on the standalone server this whole suite runs in its own logical database (SELECT
//    SUITE_DB) and the sweep runs unmodified over that database;
//  - on the cluster (database 0 only) the sweep gets the real Cluster client whose masters'
//    SCAN is narrowed to this scenario's project (`mg:{<projectId>/*}:x` instead of
//    `mg:{*}:x`); everything else the sweep does (iterating masters, parsing tags, one
//    expireHolds script per budget through BudgetService.expire) is the real code.

import type { Cluster, NodeRole, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { budgetKeys, budgetTag } from '../../src/budgets/keys.js'
import { BudgetService, type UpsertInput } from '../../src/budgets/service.js'
import type { Blocked, Crossed } from '../../src/budgets/types.js'
import { manualClock } from '../../src/kernel/clock.js'
import type { Result } from '../../src/kernel/errors.js'
import type { RedisClient } from '../../src/infra/redis/scripts.js'
import { sweepExpiredHolds } from '../../src/workers/holdExpiry.js'
import { testCluster, testRedis, uniquePrefix } from '../support/redis.js'

// ---------------------------------------------------------------------------------------------
// Time. Every scenario starts at T0 = Wednesday 2025-03-12 10:00:00 UTC.
// ---------------------------------------------------------------------------------------------
const SEC = 1_000
const MIN = 60 * SEC
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const T0 = Date.UTC(2025, 2, 12, 10, 0, 0)
const NEXT_DAY = Date.UTC(2025, 2, 13) // end of T0's UTC day
const NEXT_WEEK = Date.UTC(2025, 2, 17) // Monday after T0
const NEXT_MONTH = Date.UTC(2025, 3, 1) // end of T0's UTC month
const DEFAULT_TTL = 60_000 // DEFAULT_TTL_MS of the service
const RETENTION = DAY // closed holds are kept this long (BudgetService default)

/** The budget every scenario works on (a key with every special character the spec allows). */
const KEY = 'team/agent:1_x.y@z-0'
/** The standalone server's logical database this suite runs in (see the header). */
const SUITE_DB = 11

type LimitIn = UpsertInput['limits'][number]
const hard = (id: string, window: LimitIn['window'], amount: string, anchor?: number): LimitIn =>
  anchor === undefined ? { id, window, enforce: 'hard', amount } : { id, window, enforce: 'hard', amount, anchor }
const soft = (id: string, window: LimitIn['window'], amount: string): LimitIn => ({ id, window, enforce: 'soft', amount })

/** day hard 10 + month hard 100: the budget most scenarios use. */
const STD: LimitIn[] = [hard('day', 'day', '10'), hard('month', 'month', '100')]

// ---------------------------------------------------------------------------------------------
// The table's vocabulary.
// ---------------------------------------------------------------------------------------------
interface LimitExpect {
  consumed?: string
  held?: string
  remaining?: string
  resetsAt?: number | null
  enforce?: 'hard' | 'soft'
  window?: string
}

interface Expect {
  ok?: boolean // default: true unless `reason` is given
  reason?: string // Failure.reason: budget_not_found, idempotency_conflict, ...
  kind?: string // Failure.kind: not_found, conflict, invalid, budget_exceeded
  issues?: string[] // paths of details.issues (kind invalid)
  created?: boolean // upsert
  holdId?: string
  replayed?: boolean
  amount?: string
  expiresAt?: number
  state?: 'settled' | 'released'
  settledBy?: 'settle' | 'expiry' | null // null: the field is absent
  settledAmount?: string | null
  remaining?: string | null // balance.remaining (details.balance on a 402)
  held?: string // balance.held
  limits?: Record<string, LimitExpect> // balance.limits by id
  limitIds?: string[] // exact ids of balance.limits, in order
  crossed?: string[] // ids in the answer's `crossed` (settle, release, charge, record), sorted
  notified?: string[] // ids passed to onCrossed for this budget during the step, sorted
  blocked?: Partial<Blocked> // details.blocked of a 402
  closesAt?: number | null // get / upsert
  expired?: number // sweep via service.expire: exact count for this budget
  expiredAtLeast?: number // sweep via the worker: total over the swept budgets
  purgedAtLeast?: number
}

// Peeks read only what src/budgets/keys.ts names (the open-hold and purge indexes, idempotency
// records), not the layout of the budget hash, which is the scripts' private business.
interface PeekExpect {
  open?: boolean // in the open-hold index (keys.open)
  closed?: boolean // in the index of closed holds awaiting their purge (keys.purge)
  /** An idempotency record is kept while its hold is open ('hold'), or at least this long from now. */
  idemKeptFor?: 'hold' | number
}

type Step =
  | { op: 'upsert'; input: Omit<UpsertInput, 'key'> & { key?: string }; expect?: Expect }
  | { op: 'authorize'; input: { amount: string; idem: string; ttlMs?: number; key?: string }; expect?: Expect }
  | { op: 'settle'; input: { holdId: string; amount: string; key?: string }; expect?: Expect }
  | { op: 'release'; input: { holdId: string; key?: string }; expect?: Expect }
  | { op: 'charge' | 'record'; input: { amount: string; idem: string; key?: string }; expect?: Expect }
  | { op: 'get'; input?: { key?: string }; expect?: Expect }
  | { op: 'tick'; input: { ms: number } | { to: number } }
  /** `service`: BudgetService.expire(tag) for this budget; `worker`: sweepExpiredHolds. */
  | { op: 'sweep'; input: { via: 'service' | 'worker' }; expect?: Expect }
  /** Raw reads of the budget's index keys; runs no script, so it touches nothing. */
  | { op: 'peek'; input: { holdId?: string; idem?: string }; expect: PeekExpect }
  /** A new client (and a new service over it) for the rest of the scenario. */
  | { op: 'reconnect' }

// ---------------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------------
const SCENARIOS: Record<string, Step[]> = {
  'authorize: ok, replay, idempotency conflicts on amount and ttlMs': [
    {
      op: 'upsert',
      input: { limits: STD },
      expect: {
        created: true,
        remaining: '10',
        held: '0',
        closesAt: null,
        limitIds: ['day', 'month'],
        limits: { day: { consumed: '0', held: '0', remaining: '10', resetsAt: NEXT_DAY }, month: { consumed: '0', remaining: '100', resetsAt: NEXT_MONTH } },
      },
    },
    {
      op: 'authorize',
      input: { amount: '4', idem: 'k1' },
      expect: {
        holdId: 'h_1',
        replayed: false,
        amount: '4',
        expiresAt: T0 + DEFAULT_TTL,
        remaining: '6',
        held: '4',
        limits: { day: { consumed: '0', held: '4', remaining: '6' }, month: { consumed: '0', held: '4', remaining: '96' } },
      },
    },
    // same key, same request: the same hold, applied once
    { op: 'authorize', input: { amount: '4', idem: 'k1' }, expect: { holdId: 'h_1', replayed: true, expiresAt: T0 + DEFAULT_TTL, held: '4', remaining: '6' } },
    // the same amount written differently is the same request
    { op: 'authorize', input: { amount: '4.00000000', idem: 'k1' }, expect: { holdId: 'h_1', replayed: true, held: '4' } },
    { op: 'authorize', input: { amount: '5', idem: 'k1' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'authorize', input: { amount: '4', idem: 'k1', ttlMs: 30_000 }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'tick', input: { ms: SEC } },
    { op: 'authorize', input: { amount: '1', idem: 'k2', ttlMs: 5_000 }, expect: { holdId: 'h_2', replayed: false, expiresAt: T0 + SEC + 5_000, held: '5' } },
    { op: 'authorize', input: { amount: '1', idem: 'k2', ttlMs: 6_000 }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'authorize', input: { amount: '1', idem: 'k2' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'tick', input: { ms: SEC } },
    // a replay answers the original deadline, not one computed from the new now
    { op: 'authorize', input: { amount: '1', idem: 'k2', ttlMs: 5_000 }, expect: { holdId: 'h_2', replayed: true, expiresAt: T0 + SEC + 5_000, held: '5' } },
    { op: 'get', expect: { held: '5', remaining: '5', limits: { day: { consumed: '0', held: '5' } } } },
  ],

  'authorize: ttlMs above holds.maxTtlMs is invalid at $.ttlMs and leaves nothing behind': [
    { op: 'upsert', input: { limits: STD, holds: { defaultTtlMs: 1_000, maxTtlMs: 5_000 } } },
    { op: 'authorize', input: { amount: '1', idem: 'k1', ttlMs: 5_001 }, expect: { reason: 'invalid_request', kind: 'invalid', issues: ['$.ttlMs'] } },
    // the invalid attempt recorded no idempotency record and used no hold number
    { op: 'authorize', input: { amount: '1', idem: 'k1', ttlMs: 5_000 }, expect: { holdId: 'h_1', replayed: false, expiresAt: T0 + 5_000 } },
    { op: 'authorize', input: { amount: '1', idem: 'k2' }, expect: { holdId: 'h_2', expiresAt: T0 + 1_000, held: '2' } },
    { op: 'get', expect: { held: '2', remaining: '8' } },
  ],

  'closesAt: a closed budget refuses new holds and charges; replays, settles and records still work': [
    { op: 'upsert', input: { limits: STD, closesAt: T0 + 10 * SEC }, expect: { closesAt: T0 + 10 * SEC } },
    { op: 'authorize', input: { amount: '2', idem: 'k1' }, expect: { holdId: 'h_1' } },
    { op: 'charge', input: { amount: '1', idem: 'c1' }, expect: { replayed: false } },
    { op: 'tick', input: { to: T0 + 10 * SEC - 1 } },
    { op: 'authorize', input: { amount: '1', idem: 'k0' }, expect: { holdId: 'h_2' } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { state: 'released' } },
    { op: 'tick', input: { to: T0 + 10 * SEC } }, // exactly closesAt: closed
    { op: 'authorize', input: { amount: '2', idem: 'k2' }, expect: { reason: 'budget_closed', kind: 'conflict' } },
    // replay precedes budget_closed (README precedence), the hold keeps its answer
    { op: 'authorize', input: { amount: '2', idem: 'k1' }, expect: { holdId: 'h_1', replayed: true, held: '2' } },
    { op: 'charge', input: { amount: '1', idem: 'c2' }, expect: { reason: 'budget_closed', kind: 'conflict' } },
    { op: 'charge', input: { amount: '1', idem: 'c1' }, expect: { replayed: true, limits: { day: { consumed: '1' } } } },
    { op: 'record', input: { amount: '1', idem: 'r1' }, expect: { replayed: false, limits: { day: { consumed: '2' } } } },
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '2' },
      expect: { state: 'settled', settledBy: 'settle', held: '0', limits: { day: { consumed: '4' }, month: { consumed: '4' } } },
    },
    // closesAt set in the past by an upsert closes the budget too; usage is kept
    { op: 'upsert', input: { limits: STD, closesAt: T0 - 1 }, expect: { created: false, closesAt: T0 - 1, limits: { day: { consumed: '4' } } } },
    { op: 'authorize', input: { amount: '1', idem: 'k3' }, expect: { reason: 'budget_closed' } },
    { op: 'upsert', input: { limits: STD, closesAt: null }, expect: { closesAt: null } },
    // reopened; the refused k3 left no idempotency record
    { op: 'authorize', input: { amount: '1', idem: 'k3' }, expect: { holdId: 'h_3', replayed: false } },
    { op: 'get', expect: { closesAt: null, held: '1', limits: { day: { consumed: '4', remaining: '5' } } } },
  ],

  '402: hard limit cannot take the amount; remedy release_holds; exact fit is allowed': [
    { op: 'upsert', input: { limits: STD } },
    { op: 'authorize', input: { amount: '6', idem: 'k1' }, expect: { holdId: 'h_1' } },
    {
      op: 'authorize',
      input: { amount: '5', idem: 'k2' },
      expect: {
        reason: 'budget_exceeded',
        kind: 'budget_exceeded',
        remaining: '4',
        held: '6',
        limits: { day: { consumed: '0', held: '6', remaining: '4' }, month: { remaining: '94' } },
        blocked: { limitId: 'day', window: 'day', remaining: '4', held: '6', resetsAt: NEXT_DAY, remedy: 'release_holds' },
      },
    },
    // consumed + held + amount == limit is not "passing" it
    { op: 'authorize', input: { amount: '4', idem: 'k3' }, expect: { holdId: 'h_2', remaining: '0' } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { state: 'released', held: '6' } },
    { op: 'release', input: { holdId: 'h_1' }, expect: { state: 'released', held: '0', remaining: '10' } },
    // the denied k2 left no record: the retry is applied now that it fits
    { op: 'authorize', input: { amount: '5', idem: 'k2' }, expect: { holdId: 'h_3', replayed: false, remaining: '5' } },
  ],

  '402: blocked = failing limit that resets last; remedy wait_for_reset': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), hard('week', 'week', '10.5'), hard('month', 'month', '100')] } },
    { op: 'charge', input: { amount: '9', idem: 'c1' }, expect: { limits: { day: { consumed: '9' }, week: { consumed: '9', resetsAt: NEXT_WEEK } } } },
    // day (9+2 > 10) and week (9+2 > 10.5) fail, neither is smaller than 2: the week resets last
    {
      op: 'authorize',
      input: { amount: '2', idem: 'k1' },
      expect: {
        reason: 'budget_exceeded',
        remaining: '1',
        blocked: { limitId: 'week', window: 'week', remaining: '1.5', held: '0', resetsAt: NEXT_WEEK, remedy: 'wait_for_reset' },
      },
    },
    {
      op: 'charge',
      input: { amount: '2', idem: 'c2' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'week', remedy: 'wait_for_reset' },
      },
    },
    { op: 'tick', input: { to: NEXT_DAY } },
    { op: 'get', expect: { limits: { day: { consumed: '0', resetsAt: NEXT_DAY + DAY }, week: { consumed: '9' }, month: { consumed: '9' } } } },
    {
      op: 'authorize',
      input: { amount: '2', idem: 'k1' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'week', remaining: '1.5', resetsAt: NEXT_WEEK, remedy: 'wait_for_reset' },
      },
    },
    { op: 'authorize', input: { amount: '1.5', idem: 'k2' }, expect: { holdId: 'h_1', remaining: '0' } },
  ],

  '402: remedy looks at every failing limit (release_holds / wait_for_reset / raise_limit)': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), hard('month', 'month', '12')] } },
    { op: 'charge', input: { amount: '5', idem: 'c1' } },
    { op: 'authorize', input: { amount: '4', idem: 'k1' }, expect: { holdId: 'h_1', held: '4', remaining: '1' } },
    // 5+4+4 passes both; without the hold 5+4 fits both
    {
      op: 'authorize',
      input: { amount: '4', idem: 'k2' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'month', window: 'month', remaining: '3', held: '4', resetsAt: NEXT_MONTH, remedy: 'release_holds' },
      },
    },
    // without the hold 5+6 passes the day; after the resets 4+6 fits both
    {
      op: 'authorize',
      input: { amount: '6', idem: 'k3' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'month', remedy: 'wait_for_reset' },
      },
    },
    // neither: 5+9 > 10 and 4+9 > 10
    {
      op: 'authorize',
      input: { amount: '9', idem: 'k4' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'month', remaining: '3', remedy: 'raise_limit' },
      },
    },
  ],

  '402: a failing limit smaller than the request is named first (the smallest), remedy raise_limit': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '100'), hard('week', 'week', '4'), hard('month', 'month', '3'), hard('life', 'never', '1000')] } },
    {
      op: 'authorize',
      input: { amount: '5', idem: 'k1' },
      expect: {
        reason: 'budget_exceeded',
        remaining: '3',
        blocked: { limitId: 'month', window: 'month', remaining: '3', held: '0', resetsAt: NEXT_MONTH, remedy: 'raise_limit' },
      },
    },
    { op: 'charge', input: { amount: '5', idem: 'c1' }, expect: { reason: 'budget_exceeded', blocked: { limitId: 'month', remedy: 'raise_limit' } } },
  ],

  '402: the too-small limit wins over one that resets later': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '3'), hard('month', 'month', '100')] } },
    { op: 'record', input: { amount: '97', idem: 'r1' }, expect: { crossed: ['day'], notified: ['day'], limits: { day: { remaining: '-94' } } } },
    // day (3 < 5) and month (97+5 > 100) fail; the month resets later but the day is too small
    {
      op: 'authorize',
      input: { amount: '5', idem: 'k1' },
      expect: {
        reason: 'budget_exceeded',
        remaining: '-94',
        blocked: { limitId: 'day', window: 'day', remaining: '-94', resetsAt: NEXT_DAY, remedy: 'raise_limit' },
      },
    },
  ],

  '402: `never` resets last of all; a failing never limit cannot wait for a reset': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), hard('life', 'never', '20')] } },
    // record is never denied and can pass a hard limit
    {
      op: 'record',
      input: { amount: '18', idem: 'r1' },
      expect: {
        crossed: ['day'],
        notified: ['day'],
        remaining: '-8',
        limits: { day: { consumed: '18', remaining: '-8' }, life: { consumed: '18', remaining: '2', resetsAt: null } },
      },
    },
    {
      op: 'authorize',
      input: { amount: '3', idem: 'k1' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'life', window: 'never', remaining: '2', held: '0', resetsAt: null, remedy: 'raise_limit' },
      },
    },
    // only the day fails now (18+2 = 20 fits the never limit)
    {
      op: 'authorize',
      input: { amount: '2', idem: 'k2' },
      expect: {
        reason: 'budget_exceeded',
        blocked: { limitId: 'day', window: 'day', remaining: '-8', resetsAt: NEXT_DAY, remedy: 'wait_for_reset' },
      },
    },
    { op: 'tick', input: { to: NEXT_DAY } },
    {
      op: 'authorize',
      input: { amount: '2', idem: 'k2' },
      expect: { holdId: 'h_1', remaining: '0', limits: { day: { consumed: '0', remaining: '8' }, life: { consumed: '18', remaining: '0' } } },
    },
  ],

  'soft limits never deny, go negative, and show in crossed once usage passes them': [
    { op: 'upsert', input: { limits: [soft('warn', 'day', '5'), hard('month', 'month', '100')] } },
    {
      op: 'authorize',
      input: { amount: '8', idem: 'k1' },
      expect: {
        holdId: 'h_1',
        remaining: '92',
        held: '8',
        limits: { warn: { enforce: 'soft', consumed: '0', held: '8', remaining: '-3' }, month: { remaining: '92' } },
      },
    },
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '7' },
      expect: {
        state: 'settled',
        settledBy: 'settle',
        settledAmount: '7',
        amount: '8',
        crossed: ['warn'],
        notified: ['warn'],
        limits: { warn: { consumed: '7', held: '0', remaining: '-2' }, month: { consumed: '7', remaining: '93' } },
      },
    },
    // already past: not crossed again
    { op: 'charge', input: { amount: '1', idem: 'c1' }, expect: { crossed: [], notified: [], limits: { warn: { consumed: '8', remaining: '-3' } } } },
    { op: 'tick', input: { to: NEXT_DAY } },
    { op: 'get', expect: { notified: [], limits: { warn: { consumed: '0', remaining: '5' }, month: { consumed: '8' } } } },
    // a new period: crossing again is reported again
    {
      op: 'charge',
      input: { amount: '6', idem: 'c2' },
      expect: { crossed: ['warn'], notified: ['warn'], limits: { warn: { consumed: '6', remaining: '-1' } } },
    },
  ],

  'a budget with only soft limits has remaining null and never denies': [
    { op: 'upsert', input: { limits: [soft('warn', 'day', '5')] }, expect: { remaining: null } },
    { op: 'authorize', input: { amount: '50', idem: 'k1' }, expect: { holdId: 'h_1', remaining: null, limits: { warn: { remaining: '-45' } } } },
    { op: 'charge', input: { amount: '50', idem: 'c1' }, expect: { remaining: null, crossed: ['warn'] } },
  ],

  'budget_not_found and hold_not_found': [
    { op: 'authorize', input: { key: 'missing', amount: '1', idem: 'k1' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'settle', input: { key: 'missing', holdId: 'h_1', amount: '1' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'release', input: { key: 'missing', holdId: 'h_1' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'charge', input: { key: 'missing', amount: '1', idem: 'c1' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'record', input: { key: 'missing', amount: '1', idem: 'r1' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'get', input: { key: 'missing' }, expect: { reason: 'budget_not_found', kind: 'not_found' } },
    { op: 'upsert', input: { limits: STD } },
    { op: 'settle', input: { holdId: 'h_1', amount: '1' }, expect: { reason: 'hold_not_found', kind: 'not_found' } },
    { op: 'authorize', input: { amount: '1', idem: 'k1' }, expect: { holdId: 'h_1' } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { reason: 'hold_not_found', kind: 'not_found' } },
    { op: 'settle', input: { holdId: 'h_7', amount: '1' }, expect: { reason: 'hold_not_found', kind: 'not_found' } },
    { op: 'get', expect: { held: '1' } },
  ],

  'settle and release: amounts, replays and conflicts': [
    { op: 'upsert', input: { limits: STD } },
    { op: 'authorize', input: { amount: '5', idem: 'k1' }, expect: { holdId: 'h_1' } },
    { op: 'settle', input: { holdId: 'h_1', amount: '5.00000001' }, expect: { reason: 'exceeds_hold_amount', kind: 'conflict' } },
    { op: 'get', expect: { held: '5', limits: { day: { consumed: '0' } } } },
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '3.5' },
      expect: {
        holdId: 'h_1',
        state: 'settled',
        settledBy: 'settle',
        settledAmount: '3.5',
        amount: '5',
        replayed: false,
        expiresAt: T0 + DEFAULT_TTL,
        held: '0',
        remaining: '6.5',
        crossed: [],
        limits: { day: { consumed: '3.5', held: '0', remaining: '6.5' }, month: { consumed: '3.5' } },
      },
    },
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '3.5' },
      expect: { state: 'settled', settledBy: 'settle', settledAmount: '3.5', replayed: true, limits: { day: { consumed: '3.5' } } },
    },
    { op: 'settle', input: { holdId: 'h_1', amount: '3.50' }, expect: { replayed: true, limits: { day: { consumed: '3.5' } } } },
    { op: 'settle', input: { holdId: 'h_1', amount: '5' }, expect: { reason: 'hold_already_settled', kind: 'conflict' } },
    { op: 'release', input: { holdId: 'h_1' }, expect: { reason: 'hold_already_settled', kind: 'conflict' } },
    { op: 'authorize', input: { amount: '2', idem: 'k2' }, expect: { holdId: 'h_2', held: '2' } },
    {
      op: 'release',
      input: { holdId: 'h_2' },
      expect: {
        holdId: 'h_2',
        state: 'released',
        settledBy: null,
        settledAmount: null,
        amount: '2',
        replayed: false,
        held: '0',
        crossed: [],
        limits: { day: { consumed: '3.5' } },
      },
    },
    { op: 'release', input: { holdId: 'h_2' }, expect: { state: 'released', replayed: true, held: '0' } },
    { op: 'settle', input: { holdId: 'h_2', amount: '2' }, expect: { reason: 'hold_already_released', kind: 'conflict' } },
    { op: 'settle', input: { holdId: 'h_2', amount: '0' }, expect: { reason: 'hold_already_released', kind: 'conflict' } },
    // settling the full amount and zero are both fine
    { op: 'authorize', input: { amount: '5', idem: 'k3' }, expect: { holdId: 'h_3' } },
    { op: 'settle', input: { holdId: 'h_3', amount: '5' }, expect: { settledAmount: '5', limits: { day: { consumed: '8.5' } } } },
    { op: 'settle', input: { holdId: 'h_3', amount: '0' }, expect: { reason: 'hold_already_settled' } },
    { op: 'authorize', input: { amount: '1', idem: 'k4' }, expect: { holdId: 'h_4' } },
    {
      op: 'settle',
      input: { holdId: 'h_4', amount: '0' },
      expect: { settledBy: 'settle', settledAmount: '0', held: '0', limits: { day: { consumed: '8.5' } } },
    },
    { op: 'get', expect: { held: '0', remaining: '1.5', limits: { day: { consumed: '8.5' }, month: { consumed: '8.5' } } } },
  ],

  'expiry, lazily on the next touch: the full amount is consumed, never released': [
    { op: 'upsert', input: { limits: [...STD, soft('warn', 'never', '4')] } },
    { op: 'authorize', input: { amount: '5', idem: 'k1', ttlMs: 30_000 }, expect: { holdId: 'h_1', expiresAt: T0 + 30_000 } },
    { op: 'authorize', input: { amount: '1', idem: 'k2' }, expect: { holdId: 'h_2', expiresAt: T0 + DEFAULT_TTL } },
    { op: 'tick', input: { to: T0 + 30_000 - 1 } },
    { op: 'get', expect: { held: '6', notified: [], limits: { day: { consumed: '0', held: '6' } } } },
    { op: 'tick', input: { to: T0 + 30_000 } }, // the deadline is reached
    {
      op: 'get',
      expect: {
        held: '1',
        remaining: '4',
        notified: ['warn'],
        limits: { day: { consumed: '5', held: '1', remaining: '4' }, month: { consumed: '5' }, warn: { consumed: '5', remaining: '-2' } },
      },
    },
    // settling an expired hold with its full amount replays the expiry
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '5' },
      expect: {
        state: 'settled',
        settledBy: 'expiry',
        settledAmount: '5',
        replayed: true,
        crossed: [],
        notified: [],
        limits: { day: { consumed: '5' } },
      },
    },
    { op: 'settle', input: { holdId: 'h_1', amount: '4' }, expect: { reason: 'hold_expired', kind: 'conflict' } },
    { op: 'settle', input: { holdId: 'h_1', amount: '0' }, expect: { reason: 'hold_expired', kind: 'conflict' } },
    { op: 'release', input: { holdId: 'h_1' }, expect: { reason: 'hold_expired', kind: 'conflict' } },
    // a release that itself reaches the deadline expires the hold first
    { op: 'tick', input: { to: T0 + DEFAULT_TTL } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { reason: 'hold_expired', kind: 'conflict' } },
    { op: 'get', expect: { held: '0', limits: { day: { consumed: '6' }, warn: { consumed: '6' } } } },
    { op: 'settle', input: { holdId: 'h_2', amount: '1' }, expect: { settledBy: 'expiry', replayed: true } },
    // the authorize's idempotency record still replays after the hold expired
    { op: 'authorize', input: { amount: '5', idem: 'k1', ttlMs: 30_000 }, expect: { holdId: 'h_1', replayed: true, expiresAt: T0 + 30_000, held: '0' } },
  ],

  'expiry, at the settle itself: only the full amount settles an open hold past its deadline': [
    { op: 'upsert', input: { limits: STD } },
    { op: 'authorize', input: { amount: '5', idem: 'k1', ttlMs: 1_000 }, expect: { holdId: 'h_1' } },
    { op: 'authorize', input: { amount: '2', idem: 'k2', ttlMs: 1_000 }, expect: { holdId: 'h_2' } },
    { op: 'tick', input: { ms: 1_000 } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' }, expect: { reason: 'hold_expired', kind: 'conflict' } },
    { op: 'settle', input: { holdId: 'h_2', amount: '2' }, expect: { state: 'settled', settledBy: 'expiry', settledAmount: '2', replayed: true } },
    { op: 'get', expect: { held: '0', limits: { day: { consumed: '7' } } } },
  ],

  'expiry by BudgetService.expire(tag), without any other touch': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), soft('warn', 'day', '2')] } },
    { op: 'authorize', input: { amount: '3', idem: 'k1', ttlMs: 1_000 }, expect: { holdId: 'h_1' } },
    { op: 'tick', input: { ms: 999 } },
    { op: 'sweep', input: { via: 'service' }, expect: { expired: 0, notified: [] } },
    { op: 'tick', input: { ms: 1 } },
    { op: 'peek', input: { holdId: 'h_1' }, expect: { open: true, closed: false } },
    { op: 'sweep', input: { via: 'service' }, expect: { expired: 1, notified: ['warn'] } },
    { op: 'peek', input: { holdId: 'h_1' }, expect: { open: false, closed: true } },
    { op: 'sweep', input: { via: 'service' }, expect: { expired: 0, notified: [] } },
    { op: 'get', expect: { held: '0', notified: [], limits: { day: { consumed: '3' }, warn: { consumed: '3', remaining: '-1' } } } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' }, expect: { settledBy: 'expiry', replayed: true } },
  ],

  'expiry by the background sweep (src/workers/holdExpiry.ts); closed holds forgotten after the retention': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), soft('warn', 'day', '2')] } },
    { op: 'authorize', input: { amount: '3', idem: 'k1', ttlMs: 1_000 }, expect: { holdId: 'h_1' } },
    { op: 'authorize', input: { amount: '1', idem: 'k2', ttlMs: 5_000 }, expect: { holdId: 'h_2' } },
    { op: 'tick', input: { to: T0 + 1_000 } },
    { op: 'sweep', input: { via: 'worker' }, expect: { expiredAtLeast: 1, notified: ['warn'] } },
    { op: 'peek', input: { holdId: 'h_1' }, expect: { open: false, closed: true } },
    { op: 'peek', input: { holdId: 'h_2' }, expect: { open: true, closed: false } },
    { op: 'get', expect: { held: '1', notified: [], limits: { day: { consumed: '3' }, warn: { consumed: '3' } } } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' }, expect: { settledBy: 'expiry', replayed: true } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { state: 'released', held: '0' } },
    // kept for the retention (24 h from its close), so retries replay...
    { op: 'tick', input: { to: T0 + 1_000 + RETENTION - 1 } },
    { op: 'sweep', input: { via: 'worker' } },
    { op: 'peek', input: { holdId: 'h_1' }, expect: { closed: true } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' }, expect: { settledBy: 'expiry', replayed: true } },
    // ...and forgotten by the sweep once it is over
    { op: 'tick', input: { to: T0 + 1_000 + RETENTION } },
    { op: 'sweep', input: { via: 'worker' }, expect: { purgedAtLeast: 1 } },
    { op: 'peek', input: { holdId: 'h_1' }, expect: { open: false, closed: false } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' }, expect: { reason: 'hold_not_found', kind: 'not_found' } },
    { op: 'release', input: { holdId: 'h_2' }, expect: { reason: 'hold_not_found', kind: 'not_found' } }, // released at T0 + 1 s too
  ],

  'expiry whose deadline fell in an earlier, already reset period does not count in the new period': [
    { op: 'tick', input: { to: Date.UTC(2025, 2, 12, 23, 59, 0) } },
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), hard('month', 'month', '100'), soft('life', 'never', '1000')] } },
    { op: 'authorize', input: { amount: '4', idem: 'k1', ttlMs: 30_000 }, expect: { holdId: 'h_1', expiresAt: Date.UTC(2025, 2, 12, 23, 59, 30) } },
    { op: 'authorize', input: { amount: '2', idem: 'k2', ttlMs: 2 * MIN }, expect: { holdId: 'h_2', expiresAt: Date.UTC(2025, 2, 13, 0, 1, 0) } },
    { op: 'authorize', input: { amount: '1', idem: 'k3', ttlMs: HOUR }, expect: { holdId: 'h_3' } },
    { op: 'authorize', input: { amount: '0.5', idem: 'k4', ttlMs: MIN }, expect: { holdId: 'h_4', expiresAt: NEXT_DAY } },
    { op: 'tick', input: { to: Date.UTC(2025, 2, 13, 0, 2, 0) } },
    // h_1 expired on the 12th: its day is over. h_2 and h_4 (deadline exactly at midnight)
    // expired in the new day. The month and the never limit count all of them.
    {
      op: 'get',
      expect: {
        held: '1',
        limits: {
          day: { consumed: '2.5', held: '1', resetsAt: Date.UTC(2025, 2, 14) },
          month: { consumed: '6.5' },
          life: { consumed: '6.5', resetsAt: null },
        },
      },
    },
    { op: 'settle', input: { holdId: 'h_1', amount: '4' }, expect: { settledBy: 'expiry', replayed: true, limits: { day: { consumed: '2.5' } } } },
    // a hold authorized yesterday and settled today counts today
    {
      op: 'settle',
      input: { holdId: 'h_3', amount: '1' },
      expect: { settledBy: 'settle', held: '0', limits: { day: { consumed: '3.5' }, month: { consumed: '7.5' } } },
    },
    // the same through the sweep, days after the deadline
    { op: 'authorize', input: { amount: '5', idem: 'k5', ttlMs: SEC }, expect: { holdId: 'h_5' } },
    { op: 'tick', input: { to: Date.UTC(2025, 2, 15, 12) } },
    { op: 'sweep', input: { via: 'service' }, expect: { expired: 1 } },
    { op: 'get', expect: { held: '0', limits: { day: { consumed: '0' }, month: { consumed: '12.5' }, life: { consumed: '12.5' } } } },
  ],

  'charge: consumes at once; replay, conflicts, 402 and budget_closed': [
    { op: 'upsert', input: { limits: STD } },
    {
      op: 'charge',
      input: { amount: '4', idem: 'c1' },
      expect: { amount: '4', replayed: false, crossed: [], remaining: '6', limits: { day: { consumed: '4' }, month: { consumed: '4' } } },
    },
    { op: 'charge', input: { amount: '4', idem: 'c1' }, expect: { amount: '4', replayed: true, limits: { day: { consumed: '4' } } } },
    { op: 'charge', input: { amount: '5', idem: 'c1' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'record', input: { amount: '4', idem: 'c1' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'authorize', input: { amount: '4', idem: 'c1' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'authorize', input: { amount: '2', idem: 'k1' }, expect: { holdId: 'h_1', held: '2', remaining: '4' } },
    { op: 'charge', input: { amount: '2', idem: 'k1' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    {
      op: 'charge',
      input: { amount: '5', idem: 'c2' },
      expect: {
        reason: 'budget_exceeded',
        kind: 'budget_exceeded',
        remaining: '4',
        held: '2',
        blocked: { limitId: 'day', window: 'day', remaining: '4', held: '2', resetsAt: NEXT_DAY, remedy: 'release_holds' },
      },
    },
    {
      op: 'charge',
      input: { amount: '4', idem: 'c2' },
      expect: { replayed: false, remaining: '0', limits: { day: { consumed: '8', held: '2', remaining: '0' } } },
    },
    { op: 'upsert', input: { limits: STD, closesAt: T0 }, expect: { limits: { day: { consumed: '8' } } } },
    { op: 'charge', input: { amount: '0', idem: 'c3' }, expect: { reason: 'budget_closed', kind: 'conflict' } },
    { op: 'charge', input: { amount: '4', idem: 'c1' }, expect: { replayed: true, limits: { day: { consumed: '8' } } } },
    { op: 'get', expect: { held: '2', limits: { day: { consumed: '8' }, month: { consumed: '8' } } } },
  ],

  'record: never denied, passes a hard limit, reports crossed, remaining negative': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), soft('warn', 'month', '20')] } },
    { op: 'record', input: { amount: '8', idem: 'r1' }, expect: { replayed: false, crossed: [], notified: [], limits: { day: { consumed: '8' } } } },
    {
      op: 'record',
      input: { amount: '5', idem: 'r2' },
      expect: {
        replayed: false,
        crossed: ['day'],
        notified: ['day'],
        remaining: '-3',
        limits: { day: { consumed: '13', remaining: '-3' }, warn: { consumed: '13', remaining: '7' } },
      },
    },
    { op: 'record', input: { amount: '5', idem: 'r2' }, expect: { replayed: true, crossed: [], notified: [], limits: { day: { consumed: '13' } } } },
    { op: 'record', input: { amount: '6', idem: 'r2' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    { op: 'charge', input: { amount: '5', idem: 'r2' }, expect: { reason: 'idempotency_conflict', kind: 'conflict' } },
    {
      op: 'record',
      input: { amount: '8', idem: 'r3' },
      expect: { crossed: ['warn'], notified: ['warn'], limits: { day: { consumed: '21' }, warn: { consumed: '21', remaining: '-1' } } },
    },
    {
      op: 'charge',
      input: { amount: '1', idem: 'c1' },
      expect: { reason: 'budget_exceeded', blocked: { limitId: 'day', remaining: '-11', remedy: 'wait_for_reset' } },
    },
    { op: 'authorize', input: { amount: '1', idem: 'k1' }, expect: { reason: 'budget_exceeded', blocked: { limitId: 'day', remedy: 'wait_for_reset' } } },
    // a closed budget still counts records
    { op: 'upsert', input: { limits: [hard('day', 'day', '10'), soft('warn', 'month', '20')], closesAt: T0 - 1 } },
    { op: 'record', input: { amount: '1', idem: 'r4' }, expect: { replayed: false, remaining: '-12', limits: { day: { consumed: '22' } } } },
  ],

  'upsert: keeps consumed for unchanged id+window, resets otherwise; open holds count in held everywhere': [
    { op: 'upsert', input: { limits: STD }, expect: { created: true } },
    { op: 'charge', input: { amount: '3', idem: 'c1' } },
    { op: 'authorize', input: { amount: '2', idem: 'k1' }, expect: { holdId: 'h_1' } },
    // day: amount changed (kept); month: window changed to week (reset); extra: new
    {
      op: 'upsert',
      input: { limits: [hard('day', 'day', '20'), hard('month', 'week', '100'), hard('extra', 'never', '50')] },
      expect: {
        created: false,
        held: '2',
        remaining: '15',
        limitIds: ['day', 'month', 'extra'],
        limits: {
          day: { consumed: '3', held: '2', remaining: '15' },
          month: { window: 'week', consumed: '0', held: '2', remaining: '98', resetsAt: NEXT_WEEK },
          extra: { consumed: '0', held: '2', remaining: '48', resetsAt: null },
        },
      },
    },
    { op: 'get', expect: { held: '2', limits: { day: { consumed: '3' }, month: { consumed: '0' }, extra: { consumed: '0', held: '2' } } } },
    // a hold settled after an upsert counts in limits added after it was authorized
    {
      op: 'settle',
      input: { holdId: 'h_1', amount: '2' },
      expect: { held: '0', limits: { day: { consumed: '5' }, month: { consumed: '2' }, extra: { consumed: '2' } } },
    },
    { op: 'upsert', input: { limits: [hard('day', 'day', '20')] }, expect: { limitIds: ['day'], limits: { day: { consumed: '5' } } } },
    // a limit removed and added again starts from zero
    {
      op: 'upsert',
      input: { limits: [hard('extra', 'never', '50'), hard('day', 'day', '20')] },
      expect: {
        limitIds: ['extra', 'day'],
        limits: { extra: { consumed: '0' }, day: { consumed: '5' } },
      },
    },
    // enforce changed: kept
    {
      op: 'upsert',
      input: { limits: [hard('extra', 'never', '50'), soft('day', 'day', '1')] },
      expect: {
        remaining: '50',
        limits: { day: { enforce: 'soft', consumed: '5', remaining: '-4' } },
      },
    },
    { op: 'get', expect: { remaining: '50', limits: { day: { consumed: '5' }, extra: { consumed: '0' } } } },
  ],

  'upsert: an open hold keeps counting through a reconfiguration, and later expires into the new limits': [
    { op: 'upsert', input: { limits: [hard('day', 'day', '10')] } },
    { op: 'authorize', input: { amount: '6', idem: 'k1', ttlMs: 10_000 }, expect: { holdId: 'h_1' } },
    {
      op: 'upsert',
      input: { limits: [hard('day', 'day', '10'), hard('new', 'month', '7')] },
      expect: { held: '6', remaining: '1', limits: { new: { held: '6', remaining: '1' } } },
    },
    { op: 'authorize', input: { amount: '2', idem: 'k2' }, expect: { reason: 'budget_exceeded', blocked: { limitId: 'new', remedy: 'release_holds' } } },
    { op: 'tick', input: { ms: 10_000 } },
    { op: 'get', expect: { held: '0', limits: { day: { consumed: '6' }, new: { consumed: '6', remaining: '1' } } } },
    // the hold numbers carry on across upserts
    { op: 'upsert', input: { limits: [hard('day', 'day', '10')] } },
    { op: 'authorize', input: { amount: '1', idem: 'k3' }, expect: { holdId: 'h_2' } },
  ],

  'upsert: invalid configurations change nothing': [
    { op: 'upsert', input: { limits: STD } },
    { op: 'charge', input: { amount: '1', idem: 'c1' } },
    {
      op: 'upsert',
      input: { limits: [hard('day', 'day', '5'), hard('day', 'month', '5')] },
      expect: { reason: 'invalid_request', kind: 'invalid', issues: ['$.limits[1].id'] },
    },
    {
      op: 'upsert',
      input: { limits: [hard('day', 'never', '5', T0)] },
      expect: { reason: 'invalid_request', kind: 'invalid', issues: ['$.limits[0].anchor'] },
    },
    {
      op: 'upsert',
      input: { limits: STD, holds: { defaultTtlMs: 10_000, maxTtlMs: 5_000 } },
      expect: { reason: 'invalid_request', kind: 'invalid', issues: ['$.holds.defaultTtlMs'] },
    },
    { op: 'get', expect: { limitIds: ['day', 'month'], limits: { day: { consumed: '1', remaining: '9' } } } },
  ],

  'idempotency records survive a reconnect (a new client)': [
    { op: 'upsert', input: { limits: STD } },
    { op: 'authorize', input: { amount: '3', idem: 'k1' }, expect: { holdId: 'h_1' } },
    { op: 'charge', input: { amount: '1', idem: 'c1' } },
    { op: 'record', input: { amount: '1', idem: 'r1' } },
    { op: 'reconnect' },
    { op: 'authorize', input: { amount: '3', idem: 'k1' }, expect: { holdId: 'h_1', replayed: true, held: '3' } },
    { op: 'authorize', input: { amount: '3', idem: 'k1', ttlMs: 1_000 }, expect: { reason: 'idempotency_conflict' } },
    { op: 'charge', input: { amount: '1', idem: 'c1' }, expect: { replayed: true } },
    { op: 'record', input: { amount: '1', idem: 'r1' }, expect: { replayed: true } },
    { op: 'get', expect: { held: '3', limits: { day: { consumed: '2' } } } },
    // records live as long as their hold and 24 h after it closes (authorize), or 24 h (charge, record)
    { op: 'peek', input: { idem: 'k1' }, expect: { idemKeptFor: 'hold' } },
    { op: 'peek', input: { idem: 'c1' }, expect: { idemKeptFor: RETENTION } },
    { op: 'peek', input: { idem: 'r1' }, expect: { idemKeptFor: RETENTION } },
    { op: 'settle', input: { holdId: 'h_1', amount: '3' } },
    { op: 'peek', input: { idem: 'k1' }, expect: { idemKeptFor: RETENTION } },
  ],

  // README "Limits and windows": `crossed` covers expiries applied on the way, and a
  // notification is queued for every call that changes usage. An upsert applies expiries
  // (upsertBudget-4.lua touches the budget under its old configuration first).
  'an expiry applied by an upsert that passes a limit is reported (onCrossed)': [
    { op: 'upsert', input: { limits: [soft('warn', 'never', '5')] } },
    { op: 'authorize', input: { amount: '6', idem: 'k1', ttlMs: 1_000 }, expect: { holdId: 'h_1' } },
    { op: 'tick', input: { ms: 1_000 } },
    { op: 'upsert', input: { limits: [soft('warn', 'never', '5')] }, expect: { held: '0', limits: { warn: { consumed: '6' } }, notified: ['warn'] } },
  ],
}

// ---------------------------------------------------------------------------------------------
// The runner.
// ---------------------------------------------------------------------------------------------
interface Backend {
  /** A new client, ready for the suite (on the standalone server: in SUITE_DB). */
  connect(): Promise<RedisClient>
  /** The client the background sweep gets for a scenario (see the header). */
  sweepClient(client: RedisClient, projectId: string): RedisClient
}

const standalone = (connect: () => Redis): Backend => ({
  async connect() {
    const client = connect()
    await client.select(SUITE_DB)
    return client
  },
  sweepClient: (client) => client,
})

const cluster = (connect: () => Cluster): Backend => ({
  async connect() {
    const client = connect()
    await client.ping() // resolves once the slot map is loaded
    return client
  },
  sweepClient: (client, projectId) => scopedToProject(client as Cluster, projectId),
})

/** The real Cluster client, except that the masters' SCAN only sees one project's budgets. */
function scopedToProject(client: Cluster, projectId: string): RedisClient {
  const narrow = (arg: unknown) => (typeof arg === 'string' && arg.startsWith('mg:{*}') ? arg.replace('{*}', `{${projectId}/*}`) : arg)
  const wrapNode = (node: Redis) =>
    new Proxy(node, {
      get(target, prop) {
        if (prop === 'scan') return (...args: unknown[]) => (target.scan as (...a: unknown[]) => unknown)(...args.map(narrow))
        const value = Reflect.get(target, prop, target) as unknown
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  return new Proxy(client, {
    get(target, prop) {
      if (prop === 'nodes') return (role?: NodeRole) => target.nodes(role).map(wrapNode)
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

/**
 * Hold ids in the table are ordinals: `h_<k>` is the k-th hold authorized on that budget in the
 * scenario. Real ids are `h_<n>`, n = max(last + 1, now ms × 1000) (src/budgets/README.md,
 * "Holds"); the table's `h_<k>` of a hold not authorized (yet) is sent as written, and no real
 * hold has so small a number.
 */
class HoldOrdinals {
  private readonly byKey = new Map<string, string[]>()
  private list(key: string): string[] {
    const ids = this.byKey.get(key) ?? []
    this.byKey.set(key, ids)
    return ids
  }
  /** A hold an authorize created (not a replay). */
  note(key: string, realId: string): void {
    if (!this.list(key).includes(realId)) this.list(key).push(realId)
  }
  real(key: string, tableId: string): string {
    return this.list(key)[Number(tableId.slice(2)) - 1] ?? tableId
  }
  table(key: string, realId: string): string {
    const at = this.list(key).indexOf(realId)
    return at < 0 ? realId : `h_${at + 1}`
  }
}

async function runScenario(backend: Backend, base: RedisClient, steps: Step[]): Promise<void> {
  const clock = manualClock(T0)
  const projectId = uniquePrefix()
  const tag = budgetTag(projectId, KEY)
  const keys = budgetKeys(tag)
  const events: { projectId: string; key: string; crossed: Crossed[] }[] = []
  const onCrossed = (p: string, k: string, crossed: Crossed[]) => {
    events.push({ projectId: p, key: k, crossed })
  }
  let redis = base
  let service = new BudgetService(redis, clock, { onCrossed })
  const owned: RedisClient[] = []
  const holds = new HoldOrdinals()

  try {
    for (const [index, step] of steps.entries()) {
      const label = `step ${index + 1}: ${step.op} ${'input' in step ? JSON.stringify(step.input) : ''}`
      const before = events.length
      const key = ('input' in step && step.input && 'key' in step.input && step.input.key) || KEY
      let result: Result<Record<string, any>> | undefined
      let sweep: { expired: number; purged: number } | undefined

      switch (step.op) {
        case 'upsert': {
          const { key: _ignored, ...rest } = step.input
          result = await service.upsert(projectId, { key, ...rest })
          break
        }
        case 'authorize':
          result = await service.authorize(projectId, {
            key,
            amount: step.input.amount,
            idempotencyKey: step.input.idem,
            ...(step.input.ttlMs === undefined ? {} : { ttlMs: step.input.ttlMs }),
          })
          break
        case 'settle':
          result = await service.settle(projectId, { key, holdId: holds.real(key, step.input.holdId), amount: step.input.amount })
          break
        case 'release':
          result = await service.release(projectId, { key, holdId: holds.real(key, step.input.holdId) })
          break
        case 'charge':
        case 'record':
          result = await service[step.op](projectId, { key, amount: step.input.amount, idempotencyKey: step.input.idem })
          break
        case 'get':
          result = await service.get(projectId, key)
          break
        case 'tick':
          if ('ms' in step.input) clock.advance(step.input.ms)
          else clock.set(step.input.to)
          continue
        case 'sweep':
          sweep = step.input.via === 'service' ? await service.expire(tag) : await sweepExpiredHolds(backend.sweepClient(redis, projectId), service)
          break
        case 'peek':
          await checkPeek(
            redis,
            keys,
            clock(),
            { ...step.input, ...(step.input.holdId ? { holdId: holds.real(key, step.input.holdId) } : {}) },
            step.expect,
            label,
          )
          continue
        case 'reconnect': {
          const fresh = await backend.connect()
          owned.push(fresh)
          redis = fresh
          service = new BudgetService(redis, clock, { onCrossed })
          continue
        }
      }

      if (result?.ok && typeof result.value.holdId === 'string') {
        const realId = result.value.holdId
        expect(realId, `${label}: holdId format`).toMatch(/^h_[1-9][0-9]{0,15}$/)
        if (step.op === 'authorize' && result.value.replayed === false) holds.note(key, realId)
        result = { ...result, value: { ...result.value, holdId: holds.table(key, realId) } }
      }

      const e = step.expect
      // a row without expectations must still succeed
      if (e === undefined) {
        if (result) expect(result.ok, `${label}: ${JSON.stringify(result)}`).toBe(true)
        continue
      }
      const notified = events
        .slice(before)
        .filter((ev) => ev.projectId === projectId && ev.key === key)
        .flatMap((ev) => ev.crossed.map((c) => c.limitId))
        .sort()
      if (e.notified !== undefined) expect(notified, `${label}: notified`).toEqual([...e.notified].sort())

      if (sweep) {
        if (e.expired !== undefined) expect(sweep.expired, `${label}: expired`).toBe(e.expired)
        if (e.expiredAtLeast !== undefined) expect(sweep.expired, `${label}: expired`).toBeGreaterThanOrEqual(e.expiredAtLeast)
        if (e.purgedAtLeast !== undefined) expect(sweep.purged, `${label}: purged`).toBeGreaterThanOrEqual(e.purgedAtLeast)
        continue
      }
      checkResult(result!, e, label)
    }
  } finally {
    await Promise.all(owned.map((c) => c.quit()))
  }
}

function checkResult(result: Result<Record<string, any>>, e: Expect, label: string): void {
  const wantOk = e.ok ?? e.reason === undefined
  expect(result.ok, `${label}: ok (got ${JSON.stringify(result)})`).toBe(wantOk)
  let balance: any
  if (result.ok) {
    const v = result.value
    balance = v.balance
    if (e.created !== undefined) expect(v.created, `${label}: created`).toBe(e.created)
    if (e.holdId !== undefined) expect(v.holdId, `${label}: holdId`).toBe(e.holdId)
    if (e.replayed !== undefined) expect(v.replayed, `${label}: replayed`).toBe(e.replayed)
    if (e.amount !== undefined) expect(v.amount, `${label}: amount`).toBe(e.amount)
    if (e.expiresAt !== undefined) expect(v.expiresAt, `${label}: expiresAt`).toBe(e.expiresAt)
    if (e.state !== undefined) expect(v.state, `${label}: state`).toBe(e.state)
    if (e.settledBy !== undefined) expect(v.settledBy, `${label}: settledBy`).toBe(e.settledBy ?? undefined)
    if (e.settledAmount !== undefined) expect(v.settledAmount, `${label}: settledAmount`).toBe(e.settledAmount ?? undefined)
    if (e.closesAt !== undefined) expect(v.closesAt, `${label}: closesAt`).toBe(e.closesAt)
    if (e.crossed !== undefined) {
      expect(v.crossed, `${label}: crossed present`).toBeDefined()
      expect((v.crossed as Crossed[]).map((c) => c.limitId).sort(), `${label}: crossed`).toEqual([...e.crossed].sort())
    }
  } else {
    if (e.reason !== undefined) expect(result.reason, `${label}: reason (${result.message})`).toBe(e.reason)
    if (e.kind !== undefined) expect(result.kind, `${label}: kind`).toBe(e.kind)
    if (e.issues !== undefined) {
      const issues = (result.details?.issues ?? []) as { path: string }[]
      expect(
        issues.map((i) => i.path),
        `${label}: issues`,
      ).toEqual(e.issues)
    }
    if (result.reason === 'budget_exceeded') {
      expect(result.details?.kind, `${label}: details.kind`).toBe('budget_exceeded')
      expect(result.details?.blocked, `${label}: details.blocked`).toBeDefined()
      expect(result.details?.balance, `${label}: details.balance`).toBeDefined()
      balance = result.details?.balance
    }
    if (e.blocked !== undefined) expect(result.details?.blocked, `${label}: blocked`).toMatchObject(e.blocked)
  }

  const needsBalance = e.remaining !== undefined || e.held !== undefined || e.limits !== undefined || e.limitIds !== undefined
  if (!needsBalance) return
  expect(balance, `${label}: balance`).toBeDefined()
  if (e.remaining !== undefined) expect(balance.remaining, `${label}: balance.remaining`).toBe(e.remaining)
  if (e.held !== undefined) expect(balance.held, `${label}: balance.held`).toBe(e.held)
  const limits = balance.limits as { id: string; held: string }[]
  // held is the same on every limit: every hold counts against every limit
  for (const l of limits) expect(l.held, `${label}: ${l.id}.held`).toBe(balance.held)
  if (e.limitIds !== undefined)
    expect(
      limits.map((l) => l.id),
      `${label}: limit ids`,
    ).toEqual(e.limitIds)
  for (const [id, want] of Object.entries(e.limits ?? {})) {
    const got = limits.find((l) => l.id === id)
    expect(got, `${label}: limit ${id}`).toBeDefined()
    expect(got, `${label}: limit ${id}`).toMatchObject(want)
  }
}

async function checkPeek(
  redis: RedisClient,
  keys: ReturnType<typeof budgetKeys>,
  nowMs: number,
  input: { holdId?: string; idem?: string },
  e: PeekExpect,
  label: string,
): Promise<void> {
  if (input.holdId !== undefined) {
    const number = input.holdId.slice(2)
    if (e.open !== undefined) expect((await redis.zscore(keys.open, number)) !== null, `${label}: in the open index`).toBe(e.open)
    if (e.closed !== undefined) expect((await redis.zscore(keys.purge, `h${number}`)) !== null, `${label}: in the purge index`).toBe(e.closed)
  }
  if (e.idemKeptFor !== undefined) {
    const field = `i:${input.idem!}`
    expect(await redis.hexists(keys.budget, field), `${label}: record ${field} exists`).toBe(1)
    const purgeAt = await redis.zscore(keys.purge, field)
    if (e.idemKeptFor === 'hold') expect(purgeAt, `${label}: ${field} kept while its hold is open`).toBeNull()
    else expect(Number(purgeAt) - nowMs, `${label}: ${field} kept for`).toBeGreaterThanOrEqual(e.idemKeptFor)
  }
}

// ---------------------------------------------------------------------------------------------
// The same table, on both deployments.
// ---------------------------------------------------------------------------------------------
describe.each([
  ['standalone', standalone(testRedis)],
  ['cluster', cluster(testCluster)],
] as const)('budget hold lifecycle on %s Redis', (name, backend) => {
  let redis: RedisClient
  beforeAll(async () => {
    redis = await backend.connect()
  })
  afterAll(async () => {
    await redis.quit()
  })

  for (const [title, steps] of Object.entries(SCENARIOS)) {
    it(title, async () => {
      await runScenario(backend, redis, steps)
    })
  }

  it.runIf(name === 'cluster')('keeps every key of a budget in one hash slot, on one master', async () => {
    const clusterClient = redis as Cluster
    const clock = manualClock(T0)
    const service = new BudgetService(clusterClient, clock)
    const projectId = uniquePrefix()
    const tag = budgetTag(projectId, KEY)
    expect((await service.upsert(projectId, { key: KEY, limits: STD })).ok).toBe(true)
    const first = await service.authorize(projectId, { key: KEY, amount: '1', idempotencyKey: 'k1' })
    if (!first.ok) throw new Error(first.message)
    expect((await service.authorize(projectId, { key: KEY, amount: '1', idempotencyKey: 'k2' })).ok).toBe(true)
    expect((await service.settle(projectId, { key: KEY, holdId: first.value.holdId, amount: '1' })).ok).toBe(true)
    expect((await service.charge(projectId, { key: KEY, amount: '1', idempotencyKey: 'c1' })).ok).toBe(true)

    // every key of src/budgets/keys.ts for this budget (k.open holds h_2, k.purge holds h_1)
    // (idempotency records are fields of the budget hash)
    const all = Object.values(budgetKeys(tag))
    const slots = await Promise.all(all.map((key) => clusterClient.cluster('KEYSLOT', key)))
    expect(new Set(slots).size, `slots ${slots.join(',')}`).toBe(1)
    // ...which is the slot of the hash tag itself
    expect(slots[0]).toBe(await clusterClient.cluster('KEYSLOT', tag.slice(1, -1)))

    // every one of those keys exists, all on the single master that owns the slot
    const masters = clusterClient.nodes('master')
    expect(masters).toHaveLength(3)
    const local = await Promise.all(masters.map((m) => m.call('CLUSTER', 'GETKEYSINSLOT', slots[0]!, 10_000) as Promise<string[]>))
    const owners = local.flatMap((keys, i) => (all.some((k) => keys.includes(k)) ? [i] : []))
    expect(owners, 'masters holding the budget keys').toHaveLength(1)
    expect(local[owners[0]!]).toEqual(expect.arrayContaining(all))

    // and other budgets do spread over the cluster (the test is not vacuous)
    const otherSlots = new Set(
      await Promise.all(Array.from({ length: 20 }, (_, i) => clusterClient.cluster('KEYSLOT', budgetKeys(budgetTag(projectId, `b${i}`)).budget))),
    )
    expect(otherSlots.size).toBeGreaterThan(1)
  })
})
