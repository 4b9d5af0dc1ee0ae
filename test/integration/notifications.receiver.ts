// Not a test file: the real HTTP receiver the notifications tests deliver to (127.0.0.1:0).
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Received {
  headers: http.IncomingHttpHeaders
  body: string
  at: number
}

export interface Receiver {
  url: string
  received: Received[]
  /** The status of each next answer, in order; when empty, `fallback`. */
  statuses: number[]
  fallback: number
  close(): Promise<void>
}

export async function startReceiver(fallback = 200): Promise<Receiver> {
  const received: Received[] = []
  const state = { statuses: [] as number[], fallback }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() })
      res.statusCode = state.statuses.shift() ?? state.fallback
      res.end('ok')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    get statuses() {
      return state.statuses
    },
    set statuses(v: number[]) {
      state.statuses = v
    },
    get fallback() {
      return state.fallback
    },
    set fallback(v: number) {
      state.fallback = v
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** A URL nothing listens on: a port taken from the OS and freed again. */
export async function deadUrl(): Promise<string> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}/gone`
}

/** The shared poller (test/support/processes.ts), for the notification suites' imports. */
export { waitFor } from '../support/processes.js'
