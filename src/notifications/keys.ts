// Redis keys of notifications and webhooks. Every key of a project shares the hash tag
// `{wh:<projectId>}`, so a MULTI over them stays in one Cluster slot.

const tag = (projectId: string) => `{wh:${projectId}}`

/** Hash: endpoint id → the endpoint's JSON (WebhookEndpoint, secret included). */
export const endpointsKey = (projectId: string) => `${tag(projectId)}:endpoints`

/** Hash: delivery id → the failed delivery's JSON (FailedDelivery). */
export const failedKey = (projectId: string) => `${tag(projectId)}:failed`

/** Sorted set: delivery id scored by when it failed, the order of the failed list (trimmed to the newest). */
export const failedIndexKey = (projectId: string) => `${tag(projectId)}:failed:index`

/**
 * String, set NX with a TTL: a budget.exceeded notification was queued for this budget, limit,
 * limit amount (a raised limit is another) and period (`period` is the period's end, or `never`).
 */
export const budgetExceededKey = (projectId: string, budgetKey: string, limitId: string, amountUnits: string, period: string) =>
  `${tag(projectId)}:exceeded:${budgetKey.length}:${budgetKey}:${limitId.length}:${limitId}:${amountUnits}:${period}`
