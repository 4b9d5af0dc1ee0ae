import { Type, type Static } from '@sinclair/typebox'

export const RUN_STATUSES = ['running', 'completed', 'expired', 'canceled', 'budget_exceeded', 'failed'] as const
export type RunStatus = (typeof RUN_STATUSES)[number]
export const END_STATUSES = ['completed', 'canceled', 'failed'] as const
export type EndStatus = (typeof END_STATUSES)[number]

export const CONSUME_REASONS = ['accepted', 'duplicate', 'insufficient_budget', 'expired', 'not_running', 'entitlement_denied'] as const
export type ConsumeReason = (typeof CONSUME_REASONS)[number]

/** Default run deadline and its maximum. */
export const DEFAULT_RUN_TTL_MS = 15 * 60_000
export const MAX_RUN_TTL_MS = 7 * 24 * 3_600_000
/**
 * How long a lease on a budget outlives its run's deadline: the run's expiry (lazily, or by the
 * sweep every few seconds) settles the lease first, so the budget does not release the lease's
 * capacity before the run's last usage is reported. A lease whose run never started (the start
 * failed after the lease was taken) is released then.
 */
export const LEASE_GRACE_MS = 60_000

/** Spec 2.4, amounts in minor currency units; `startedAt`, `expiresAt` are our additions. */
export const RunSchema = Type.Object(
  {
    runId: Type.String(),
    status: Type.Union(RUN_STATUSES.map((s) => Type.Literal(s))),
    customerId: Type.String(),
    currency: Type.String(),
    workloadId: Type.Union([Type.String(), Type.Null()], { description: 'null when not given.' }),
    traceId: Type.Union([Type.String(), Type.Null()], { description: 'null when not given.' }),
    parentRunId: Type.Union([Type.String(), Type.Null()], { description: 'null for a root run (it reserves from the wallet or a budget).' }),
    workloadType: Type.String({ description: 'Default `agent`.' }),
    budgetAmountMinor: Type.Integer({ description: 'Reserved, in minor currency units (cents for USD).' }),
    consumedAmountMinor: Type.Integer({ description: 'Consumed by the run and by its ended children.' }),
    remainingAmountMinor: Type.Integer({ description: 'budget − consumed − what running children hold.' }),
    endedAt: Type.Optional(
      Type.Integer({
        description: 'Epoch ms when the run ended; absent while it runs (the spec types it as an integer, so it is never null nor a 0 placeholder).',
      }),
    ),
    startedAt: Type.Integer({ description: 'Epoch ms (our addition).' }),
    expiresAt: Type.Integer({ description: 'The deadline, epoch ms: a run still running then is expired (our addition).' }),
    budgetKey: Type.Optional(
      Type.String({
        description: 'The budget the run tree leases from (a root started with budgetKey, and its descendants); absent for a run on the wallet (our addition).',
      }),
    ),
    leaseId: Type.Optional(Type.String({ description: "The lease on that budget (`l_<n>`): its unreported part counts in the budget's held (our addition)." })),
    asOf: Type.Integer({
      description:
        "Epoch ms: the moment these figures were read or changed, on the service's clock (the time the script that answered ran with). Our addition.",
    }),
  },
  { $id: 'Run', description: 'A run: a budget reserved for a workload, consumed by its metered events.' },
)
export type Run = Static<typeof RunSchema>

export const ConsumeResponseSchema = Type.Object(
  {
    accepted: Type.Boolean(),
    reason: Type.Union(CONSUME_REASONS.map((s) => Type.Literal(s))),
    run: RunSchema,
    costAmountMinor: Type.Integer({
      description: 'What the event cost (accepted, duplicate) or would have cost (insufficient_budget); 0 otherwise. Our addition.',
    }),
  },
  { $id: 'RunConsumption', description: 'What an event did to a run: accepted or why not, its cost, and the run after it.' },
)
export type ConsumeResponse = Static<typeof ConsumeResponseSchema>

/** The static fields of a run, kept as JSON beside its counters. */
export interface RunMeta {
  customerId: string
  workloadType: string
  workloadId: string
  traceId: string
  parentRunId: string
  startedAt: number
}
