// The ceiling: the least a uWebSockets.js JSON endpoint can do per request.
//
// It still does what any real POST handler must, so the comparison with the
// gateway is about the metering work and not about skipping the basics:
//  - attach onAborted (uWS requires it before answering asynchronously),
//  - read the body through onData (it can arrive in several chunks),
//  - JSON.parse it and JSON.stringify a reply about the size and shape of an
//    authorize response (~300 bytes),
//  - answer inside res.cork so status, headers and body go out in one write.
// Env: PORT. Prints READY once listening.

import uWS from 'uWebSockets.js'

const port = Number(process.env.PORT ?? 0)
let seq = 0

// Same shape as the gateway's authorize answer, so the response bytes match.
const limit = (used: string) => ({ used, held: '0.25', remaining: '99999999987.25' })

function reply(req: { key?: string; amount?: string }): string {
  return JSON.stringify({
    allowed: true,
    holdId: `h_${(++seq).toString(36).padStart(12, '0')}`,
    amount: req.amount ?? '0',
    expiresAt: Date.now() + 60_000,
    replayed: false,
    balance: { hour: limit('12.5'), day: limit('12.5'), month: limit('12.5') },
  })
}

uWS
  .App()
  .post('/*', (res) => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    let body: Buffer | undefined
    res.onData((chunk, isLast) => {
      // The ArrayBuffer is only valid during this callback: copy it.
      const part = Buffer.from(new Uint8Array(chunk))
      body = body ? Buffer.concat([body, part]) : part
      if (!isLast) return
      let out: string
      let status = '200 OK'
      try {
        out = reply(JSON.parse(body.toString('utf8')) as { key?: string; amount?: string })
      } catch {
        status = '400 Bad Request'
        out = '{"error":"bad json"}'
      }
      if (aborted) return
      res.cork(() => {
        res.writeStatus(status).writeHeader('content-type', 'application/json').end(out)
      })
    })
  })
  .get('/healthz', (res) => {
    res.end('ok')
  })
  .listen('127.0.0.1', port, (token) => {
    if (!token) {
      console.error(`hello: cannot listen on ${port}`)
      process.exit(1)
    }
    console.log('READY')
  })
