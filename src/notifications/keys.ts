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
 * String, set NX with a TTL: a limit.reached notification was queued for this customer,
 * feature, entitlement and period (`period` is the period's end, or `forever`).
 */
export const limitReachedKey = (projectId: string, customerId: string, featureSlug: string, entitlementId: string, period: string) =>
  `${tag(projectId)}:reached:${entitlementId}:${period}:${featureSlug.length}:${featureSlug}:${customerId}`
