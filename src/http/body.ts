import type { HttpResponse } from 'uWebSockets.js'

/**
 * How far past the limit a refused body is still read, as a multiple of the limit. A client is
 * still sending when a 413 comes before the end of its body, and if the connection closes on
 * that answer, Node's fetch (and others) fail with EPIPE or "other side closed" and never see
 * it. So the rest of the body is read and dropped, then the 413 is sent on a connection that
 * stays open. Reading costs bandwidth only (nothing is kept), but without a bound a client
 * could keep a connection busy forever: past this many times the limit, the 413 is sent and
 * the connection closed at once.
 */
export const DRAIN_FACTOR = 8

/** The most bytes of a refused body that are read (and dropped) before its 413. */
export function drainCap(maxBytes: number): number {
  return DRAIN_FACTOR * maxBytes
}

/**
 * Called once for a body past the limit: `close` is false when the body was read to its end
 * (the connection can carry the next request), true when it passed the drain cap (the answer
 * must close the connection: the rest of the body is still coming).
 */
export type OnTooLarge = (close: boolean) => void

/**
 * Reads a request body of at most `maxBytes`. Calls `onBody` with the whole body, or, for a
 * body past the limit, `onTooLarge` once the rest of it has been read and dropped (or it passed
 * the drain cap), so an oversized body is never buffered whole.
 * uWS hands over chunks it reuses once the callback returns, so every kept chunk is copied;
 * a body that arrives in one chunk (almost all of them) is decoded straight from uWS's buffer.
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (text: string) => void, onTooLarge: OnTooLarge): void {
  consume(res, maxBytes, drainCap(maxBytes), onBody, onTooLarge)
}

/**
 * Refuses a body whose Content-Length is already past the limit: it is read and dropped before
 * `onTooLarge(false)`, or, when even the declared length passes the drain cap, not read at all
 * (`onTooLarge(true)` at once).
 */
export function refuseBody(res: HttpResponse, maxBytes: number, declaredLength: number, onTooLarge: OnTooLarge): void {
  const cap = drainCap(maxBytes)
  if (declaredLength > cap) onTooLarge(true)
  // A limit of -1: every byte, the empty last chunk of an empty body too, is past it.
  else consume(res, -1, cap, () => undefined, onTooLarge)
}

function consume(res: HttpResponse, maxBytes: number, cap: number, onBody: (text: string) => void, onTooLarge: OnTooLarge): void {
  let chunks: Buffer[] | undefined
  let size = 0
  let done = false
  res.onData((chunk, isLast) => {
    if (done) return
    size += chunk.byteLength
    if (size > maxBytes) {
      // Past the limit: nothing more is kept, only counted, until the body ends or passes the cap.
      chunks = undefined
      if (isLast || size > cap) {
        done = true
        onTooLarge(!isLast)
      }
      return
    }
    if (isLast) {
      done = true
      if (chunks === undefined) return onBody(Buffer.from(chunk).toString('utf8'))
      chunks.push(Buffer.from(chunk.slice(0)))
      return onBody(Buffer.concat(chunks).toString('utf8'))
    }
    chunks ??= []
    chunks.push(Buffer.from(chunk.slice(0)))
  })
}
