import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** The header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export const SIGNATURE_HEADER = 'x-metering-signature'
export const EVENT_HEADER = 'x-metering-event'
export const DELIVERY_HEADER = 'x-metering-delivery'

/** A new endpoint secret: `whsec_` and 32 random bytes in base64url. */
export function generateSecret(): string {
  return 'whsec_' + randomBytes(32).toString('base64url')
}

/** The hex HMAC-SHA256 of `<t>.<body>` under the secret (its UTF-8 bytes, as given). */
export function signPayload(secret: string, t: number, body: string): string {
  return createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')
}

/** The value of x-metering-signature for a body sent at `t` (unix seconds). */
export function signatureHeader(secret: string, t: number, body: string): string {
  return `t=${t},v1=${signPayload(secret, t, body)}`
}

/**
 * The receiver's check (the recipe of README.md): the header parses, some `v1` matches the
 * HMAC of `<t>.<raw body>` (compared in constant time), and `t` is within `toleranceS` of `nowS`.
 */
export function verifySignature(secret: string, header: string | undefined, body: string, nowS: number, toleranceS = 300): boolean {
  if (!header) return false
  let t: number | undefined
  const candidates: string[] = []
  for (const part of header.split(',')) {
    const eq = part.indexOf('=')
    if (eq < 0) continue
    const name = part.slice(0, eq).trim()
    const value = part.slice(eq + 1).trim()
    if (name === 't' && /^\d{1,12}$/.test(value)) t = Number(value)
    else if (name === 'v1' && /^[0-9a-f]{64}$/.test(value)) candidates.push(value)
  }
  if (t === undefined || candidates.length === 0 || Math.abs(nowS - t) > toleranceS) return false
  const expected = Buffer.from(signPayload(secret, t, body), 'hex')
  return candidates.some((c) => timingSafeEqual(Buffer.from(c, 'hex'), expected))
}
