import type { HttpResponse } from 'uWebSockets.js'

/**
 * Reads a request body of at most `maxBytes`. Calls `onBody` with the whole body, or
 * `onTooLarge` as soon as it passes the limit, so an oversized body is never buffered whole.
 * uWS hands over chunks it reuses once the callback returns, so every kept chunk is copied;
 * a body that arrives in one chunk (almost all of them) is decoded straight from uWS's buffer.
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (text: string) => void, onTooLarge: () => void): void {
  let chunks: Buffer[] | undefined
  let size = 0
  let done = false
  res.onData((chunk, isLast) => {
    if (done) return
    size += chunk.byteLength
    if (size > maxBytes) {
      done = true
      onTooLarge()
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
