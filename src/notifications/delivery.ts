import { createHash } from 'node:crypto'
import type { Notification, NotificationType } from './queue.js'
import { DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, signatureHeader } from './signature.js'

/** A delivery job: one notification to one endpoint. */
export interface DeliveryJobData {
  deliveryId: string
  endpointId: string
  notification: Notification & { id: string }
}

/** The id of the delivery of a notification to an endpoint: the same for every attempt (receivers dedup by it). */
export function deliveryIdOf(notificationId: string, endpointId: string): string {
  return 'dlv_' + createHash('sha256').update(`${notificationId}\0${endpointId}`).digest('hex').slice(0, 32)
}

/** The JSON body POSTed to receivers: `{id, type, projectId, createdAt, data}`, the same bytes on every attempt. */
export function payloadOf(notification: Notification & { id: string }): string {
  const { id, type, projectId, at, ...data } = notification
  return JSON.stringify({ id, type, projectId, createdAt: at, data })
}

export interface AttemptResult {
  ok: boolean
  status: number | null
  error?: string
}

/**
 * One attempt: POSTs the body with the signature (its `t` the given unix seconds), the event
 * type and the delivery id; 2xx is delivered, anything else (another status, a network error,
 * no answer within `timeoutMs`) is a failed attempt. Redirects are not followed.
 */
export async function attemptDelivery(input: {
  url: string
  secret: string
  type: NotificationType
  deliveryId: string
  body: string
  nowS: number
  timeoutMs: number
}): Promise<AttemptResult> {
  try {
    const res = await fetch(input.url, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(input.timeoutMs),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'metering-gateway-webhooks/1',
        [SIGNATURE_HEADER]: signatureHeader(input.secret, input.nowS, input.body),
        [EVENT_HEADER]: input.type,
        [DELIVERY_HEADER]: input.deliveryId,
      },
      body: input.body,
    })
    await res.arrayBuffer().catch(() => undefined)
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status }
    return { ok: false, status: res.status, error: `HTTP ${res.status}` }
  } catch (err) {
    const name = err instanceof Error ? err.name : ''
    const message =
      name === 'TimeoutError'
        ? `no answer within ${input.timeoutMs} ms`
        : err instanceof Error
          ? err.cause instanceof Error
            ? err.cause.message
            : err.message
          : String(err)
    return { ok: false, status: null, error: message }
  }
}
