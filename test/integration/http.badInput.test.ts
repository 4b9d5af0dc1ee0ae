// Bad input never reaches the stack: a real gateway over real Redis, with the default body limit
// (1 MiB). A body past the limit is read to its end and dropped before its 413, so that clients
// still sending it (Node's fetch, a raw socket) see the answer and the connection stays usable;
// past the drain cap the 413 closes the connection. A body nested past MAX_JSON_DEPTH is a 400
// naming the first value too deep, never a 500 from a recursive function; in a batch only the
// deep event is refused.
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { drainCap } from '../../src/http/body.js'
import { depthIssue, MAX_JSON_DEPTH, toJsonPath } from '../../src/kernel/validation.js'
import { COMMON_CATALOG, expectError, expectIssue, headerOf, nested, tooDeepPath, type AnyResponse } from '../support/commonRoutes.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

const DOCS = 'https://docs.bad-input.test'
const MiB = 1024 * 1024
const LIMIT = MiB
const CAP = drainCap(LIMIT)

let gw: TestGateway
let apiKey: string

beforeAll(async () => {
  gw = await startTestGateway({ docsUrl: DOCS, maxBodyBytes: LIMIT, events: { queueName: 'bad-input-events' } })
  ;({ apiKey } = await gw.project())
})
afterAll(async () => {
  await gw?.close()
})

const event = (extra: Record<string, unknown> = {}) => ({ customerId: 'acme', eventSlug: 'llm.completion', ...extra })

/** `levels` nested objects as JSON text (`{"a":{"a":…{}}}`), built without recursion. */
function deepText(levels: number): string {
  return '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1)
}

/** The JSON text of `body` with `"properties": <propertiesText>` in it. */
function withProperties(body: object, propertiesText: string): string {
  return JSON.stringify({ ...body, properties: 0 }).replace(/"properties":0/, `"properties":${propertiesText}`)
}

// ---- fetch ------------------------------------------------------------------------------------

/** A POST through Node's fetch (undici): the answer, its body parsed. */
async function fetchPost(
  path: string,
  body: string | ReadableStream<Uint8Array>,
  headers: Record<string, string> = {},
  init: RequestInit = {},
): Promise<AnyResponse> {
  const res = await fetch(gw.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
    body,
    ...init,
  })
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    /* not JSON: keep the text */
  }
  return { status: res.status, body: parsed, headers: res.headers }
}

/**
 * A body streamed in `chunkBytes` chunks (fetch sends it chunked) and ended after `totalBytes`;
 * with `endless`, it stops there without ending, so only the server can finish the exchange.
 */
function stream(chunkBytes: number, totalBytes: number, endless = false): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(chunkBytes).fill(0x78)
  let sent = 0
  return new ReadableStream({
    pull(controller) {
      if (sent < totalBytes) {
        sent += chunkBytes
        return controller.enqueue(chunk)
      }
      if (!endless) return controller.close()
      // Never resolves: the stream is pulled no more, and stays open.
      return new Promise<void>(() => undefined)
    },
  })
}

/** Fails when `promise` has not settled within `ms`: the assertion that nothing hangs. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/**
 * The 413 came after the whole body was read, on a connection kept open. Closing on it instead
 * (Connection: close) is what made clients still sending the body fail with EPIPE.
 */
function expectKeptOpen(res: AnyResponse): void {
  expect(headerOf(res.headers, 'connection')).not.toBe('close')
}

describe('413 through fetch: the answer reaches the client', () => {
  test('a 5 MiB body → 413 envelope, every time', async () => {
    const body = 'x'.repeat(5 * MiB)
    for (let i = 0; i < 5; i++) {
      const res = await fetchPost('/v1/usage/record', body, { 'x-request-id': `big-${i}` })
      expectError(res, 413, 'PAYLOAD_TOO_LARGE', DOCS)
      expect(res.body.error.requestId).toBe(`big-${i}`)
      expectKeptOpen(res)
    }
  })

  test('a body of the limit + 1 byte → 413 envelope, every time', async () => {
    const body = 'x'.repeat(LIMIT + 1)
    for (let i = 0; i < 5; i++) {
      const res = await fetchPost('/v1/usage/record', body)
      expectError(res, 413, 'PAYLOAD_TOO_LARGE', DOCS)
      expectKeptOpen(res)
    }
  })

  test('a body of exactly the limit is read (400 for what it says, not 413)', async () => {
    const start = JSON.stringify(event({ pad: '' }))
    const text = start.slice(0, -2) + 'x'.repeat(LIMIT - Buffer.byteLength(start)) + '"}'
    expect(Buffer.byteLength(text)).toBe(LIMIT)
    expectIssue(await fetchPost('/v1/usage/record', text), '$.pad', DOCS)
  })

  test('a chunked body that grows past the limit → 413 envelope', async () => {
    const res = await fetchPost('/v1/usage/record', stream(64 * 1024, 3 * MiB), {}, { duplex: 'half' } as RequestInit)
    expectError(res, 413, 'PAYLOAD_TOO_LARGE', DOCS)
    expectKeptOpen(res)
  })

  test('an oversized body without a key → 413 (the size goes first)', async () => {
    const res = await fetch(gw.url + '/v1/usage/record', { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(2 * MiB) })
    expect(res.status).toBe(413)
    expect(((await res.json()) as any).error.code).toBe('PAYLOAD_TOO_LARGE')
  })

  test('past the drain cap → 413 or the connection closed, never a hang', async () => {
    const outcomes = await within(
      20_000,
      'requests past the drain cap',
      Promise.all([
        fetchPost('/v1/usage/record', 'x'.repeat(CAP + MiB)).catch((error: Error) => error),
        fetchPost('/v1/usage/record', stream(64 * 1024, CAP + 4 * MiB, true), {}, { duplex: 'half' } as RequestInit).catch((error: Error) => error),
      ]),
    )
    for (const outcome of outcomes) if (!(outcome instanceof Error)) expectError(outcome, 413, 'PAYLOAD_TOO_LARGE', DOCS)
  })

  test('the gateway serves normally after all that', async () => {
    const res = await fetchPost('/v1/usage/record', JSON.stringify(event({ id: 'after-413' })))
    expect(res.status, JSON.stringify(res.body)).toBe(200)
  })
})

// ---- raw socket -------------------------------------------------------------------------------

interface RawAnswer extends AnyResponse {
  headers: Headers
}

/** One HTTP/1.1 connection over node:net: requests written as bytes, answers parsed as they come. */
class Connection {
  private buffered = Buffer.alloc(0)
  private wake: (() => void) | undefined
  closed = false
  readonly whenClosed: Promise<void>

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (data: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, data])
      this.wake?.()
    })
    // A reset while writing past the drain cap is an expected outcome, not a test error.
    socket.on('error', () => undefined)
    this.whenClosed = new Promise((resolve) =>
      socket.on('close', () => {
        this.closed = true
        this.wake?.()
        resolve()
      }),
    )
  }

  static async open(url: string): Promise<Connection> {
    const { hostname, port } = new URL(url)
    const socket = net.connect(Number(port), hostname)
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    return new Connection(socket)
  }

  /** Writes and waits until the socket took it (false when the connection is gone). */
  write(data: string | Buffer): Promise<boolean> {
    if (this.closed || this.socket.destroyed) return Promise.resolve(false)
    return new Promise((resolve) => this.socket.write(data, (error) => resolve(!error)))
  }

  head(path: string, headers: Record<string, string>): string {
    const lines = [`POST ${path} HTTP/1.1`, 'host: localhost', `authorization: Bearer ${apiKey}`, 'content-type: application/json']
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
    return lines.join('\r\n') + '\r\n\r\n'
  }

  /** A POST with a Content-Length. */
  async post(path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<void> {
    await this.write(this.head(path, { 'content-length': String(Buffer.byteLength(body)), ...headers }))
    await this.write(body)
  }

  /** A chunked POST of `totalBytes` in `chunkBytes` chunks, ended. */
  async postChunked(path: string, totalBytes: number, chunkBytes: number): Promise<void> {
    await this.write(this.head(path, { 'transfer-encoding': 'chunked' }))
    const chunk = `${chunkBytes.toString(16)}\r\n${'x'.repeat(chunkBytes)}\r\n`
    for (let sent = 0; sent < totalBytes; sent += chunkBytes) await this.write(chunk)
    await this.write('0\r\n\r\n')
  }

  /** The next complete answer (Content-Length framed, as uWS sends them). */
  async answer(deadlineMs = 10_000): Promise<RawAnswer> {
    const deadline = Date.now() + deadlineMs
    for (;;) {
      const parsed = this.parse()
      if (parsed) return parsed
      if (this.closed) throw new Error(`connection closed before a complete answer (${this.buffered.length} bytes buffered)`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no complete answer within ${deadlineMs} ms`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  }

  private parse(): RawAnswer | undefined {
    const end = this.buffered.indexOf('\r\n\r\n')
    if (end < 0) return undefined
    const [statusLine, ...lines] = this.buffered.subarray(0, end).toString('latin1').split('\r\n')
    const headers = new Headers()
    for (const line of lines) headers.append(line.slice(0, line.indexOf(':')).trim(), line.slice(line.indexOf(':') + 1).trim())
    const length = Number(headers.get('content-length') ?? 0)
    if (this.buffered.length < end + 4 + length) return undefined
    const text = this.buffered.subarray(end + 4, end + 4 + length).toString('utf8')
    this.buffered = this.buffered.subarray(end + 4 + length)
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {
      /* not JSON: keep the text */
    }
    return { status: Number(statusLine!.split(' ')[1]), headers, body }
  }

  close(): void {
    this.socket.destroy()
  }
}

describe('413 over a raw socket: drained, and the keep-alive connection stays usable', () => {
  test.each<[string, (c: Connection) => Promise<void>]>([
    ['a 5 MiB body', (c) => c.post('/v1/usage/record', Buffer.alloc(5 * MiB, 0x78))],
    ['a body of the limit + 1 byte', (c) => c.post('/v1/usage/record', Buffer.alloc(LIMIT + 1, 0x78))],
    ['a chunked body past the limit', (c) => c.postChunked('/v1/usage/record', 2 * MiB, 16 * 1024)],
  ])('%s → 413 envelope, then the next request on the same socket works', async (_name, send) => {
    const connection = await Connection.open(gw.url)
    try {
      await send(connection)
      const refused = await connection.answer()
      expectError(refused, 413, 'PAYLOAD_TOO_LARGE', DOCS)
      expect(refused.headers.get('connection')).not.toBe('close')
      await connection.post('/v1/usage/record', JSON.stringify(event()), { 'x-request-id': 'after-drain' })
      const next = await connection.answer()
      expect([next.status, next.body]).toEqual([200, { accepted: true }])
      expect(next.headers.get('x-request-id')).toBe('after-drain')
      expect(connection.closed).toBe(false)
    } finally {
      connection.close()
    }
  })

  test('a Content-Length past the drain cap → 413 at once, and the connection is closed', async () => {
    const connection = await Connection.open(gw.url)
    try {
      await connection.write(connection.head('/v1/usage/record', { 'content-length': String(CAP + 1) }))
      const refused = await connection.answer()
      expectError(refused, 413, 'PAYLOAD_TOO_LARGE', DOCS)
      expect(refused.headers.get('connection')).toBe('close')
      await within(5000, 'the server closing the connection', connection.whenClosed)
    } finally {
      connection.close()
    }
  })

  test('a chunked body that never ends is cut off past the drain cap: the connection is closed (no hang)', async () => {
    const connection = await Connection.open(gw.url)
    try {
      await connection.write(connection.head('/v1/usage/record', { 'transfer-encoding': 'chunked' }))
      const chunkBytes = 64 * 1024
      const chunk = `${chunkBytes.toString(16)}\r\n${'x'.repeat(chunkBytes)}\r\n`
      let written = 0
      await within(
        20_000,
        'the server closing a body past the drain cap',
        (async () => {
          while (!connection.closed && (await connection.write(chunk))) written += chunkBytes
          await connection.whenClosed
        })(),
      )
      expect(written).toBeGreaterThan(CAP - chunkBytes)
      expect(written).toBeLessThan(CAP + 16 * MiB)
    } finally {
      connection.close()
    }
  })
})

// ---- depth -------------------------------------------------------------------------------------

describe('nesting depth: the walk', () => {
  test(`${MAX_JSON_DEPTH} levels pass, ${MAX_JSON_DEPTH + 1} do not; scalars and flat values pass`, () => {
    expect(depthIssue(nested(MAX_JSON_DEPTH))).toBeUndefined()
    expect(depthIssue(nested(MAX_JSON_DEPTH + 1))).toEqual({ path: tooDeepPath('$', 1), message: expect.any(String) })
    for (const value of [null, 1, 'text', [], {}, [1, 2, { a: 3 }]]) expect(depthIssue(value)).toBeUndefined()
  })

  test('a million levels walk without recursion, stopping at the first value too deep', () => {
    let value: unknown[] = []
    for (let i = 0; i < 1_000_000; i++) value = [value]
    expect(depthIssue(value, '$.x')?.path).toBe('$.x' + '[0]'.repeat(MAX_JSON_DEPTH))
  })

  test('the path names the first value too deep in document order, in the format of schema issues', () => {
    const shallow = nested(3)
    const deep = nested(MAX_JSON_DEPTH)
    const value = { ok: shallow, list: [1, { 'a b': [shallow, { 'x/y~': deep }] }] }
    const issue = depthIssue(value)
    expect(issue?.path).toBe(toJsonPath('/list/1/a b/1/x~1y~0') + '.a'.repeat(MAX_JSON_DEPTH - 5))
    expect(issue?.path.startsWith('$.list[1]["a b"][1]["x/y~"].a')).toBe(true)
  })
})

describe('nesting depth: 400 with the path, never 500', () => {
  test(`POST /v1/usage/record: properties making the body ${MAX_JSON_DEPTH} levels deep → accepted; ${MAX_JSON_DEPTH + 1} → 400 with the path`, async () => {
    // The body is level 1 and properties level 2: nested(n) there makes the body n + 1 deep.
    const ok = await gw.post('/v1/usage/record', event({ properties: nested(MAX_JSON_DEPTH - 1) }), apiKey)
    expect([ok.status, ok.body]).toEqual([200, { accepted: true }])
    const deep = await gw.post('/v1/usage/record', event({ properties: nested(MAX_JSON_DEPTH) }), apiKey)
    expectIssue(deep, tooDeepPath('$.properties', 2), DOCS)
  })

  test('POST /v1/usage/record with properties 5,000 levels deep → 400, not 500', async () => {
    const res = await gw.post('/v1/usage/record', withProperties(event(), deepText(5000)), apiKey)
    expectIssue(res, tooDeepPath('$.properties', 2), DOCS)
    expect(res.body.error.details.issues).toHaveLength(1)
  })

  test('POST /v1/usage/record with arrays nested as deep as 1 MiB allows → 400', async () => {
    const levels = 500_000
    const res = await gw.post('/v1/usage/record', withProperties(event(), `{"x":${'['.repeat(levels)}${']'.repeat(levels)}}`), apiKey)
    expectIssue(res, '$.properties.x' + '[0]'.repeat(MAX_JSON_DEPTH - 2), DOCS)
  })

  test('POST /v1/usage/record-batch: the deep event is refused in its own result, the others are accepted', async () => {
    // Each event is checked as a document of its own: at 64 levels it is accepted even though
    // the batch body around it is 66 deep; at 5,000 only that event is refused.
    const events = [
      JSON.stringify(event({ id: 'batch-ok-1' })),
      withProperties(event({ id: 'batch-deep' }), deepText(5000)),
      JSON.stringify(event({ id: 'batch-64', properties: nested(MAX_JSON_DEPTH - 1) })),
      withProperties(event({ id: 'batch-65' }), deepText(MAX_JSON_DEPTH)),
      JSON.stringify(event({ id: 'batch-ok-2' })),
    ]
    const res = await gw.post('/v1/usage/record-batch', `{"events":[${events.join(',')}]}`, apiKey)
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200)
    const results = res.body.results
    expect(results.map((r: { accepted: boolean }) => r.accepted)).toEqual([true, false, true, false, true])
    for (const index of [1, 3]) {
      expect(results[index].error).toMatchObject({ code: 'BAD_REQUEST', reason: 'invalid_request' })
      expect(results[index].error.issues).toEqual([{ path: tooDeepPath(`$.events[${index}].properties`, 2), message: expect.any(String) }])
    }
  })

  test('POST /v1/runs/consume with deep properties → 400 (and 64 levels are consumed)', async () => {
    const { apiKey: key } = await gw.project()
    const customerId = COMMON_CATALOG.customers[0].id
    const setup = [
      await gw.post('/v1/config/apply', COMMON_CATALOG, key),
      await gw.post('/v1/wallet/top-up', { customerId, amount: '10', idempotencyKey: 'deep-top-up' }, key),
      await gw.post('/v1/runs/start', { customerId, budgetAmountMinor: 500, idempotencyKey: 'deep-run', ttlMs: 3_600_000 }, key),
    ]
    for (const res of setup) expect(res.status, JSON.stringify(res.body)).toBe(200)
    const runId = setup[2]!.body.runId
    const consume = (idempotencyKey: string, properties: string) =>
      gw.post(`/v1/runs/consume/${runId}`, withProperties({ featureSlug: 'common-calls', idempotencyKey }, properties), key)
    expectIssue(await consume('deep-5000', deepText(5000)), tooDeepPath('$.properties', 2), DOCS)
    expectIssue(await consume('deep-65', deepText(MAX_JSON_DEPTH)), tooDeepPath('$.properties', 2), DOCS)
    const ok = await consume('deep-64', deepText(MAX_JSON_DEPTH - 1))
    expect(ok.status, JSON.stringify(ok.body)).toBe(200)
    expect(ok.body.reason).toBe('accepted')
  })

  test('a deep body on a route with a typed body (budgets/authorize) → 400 at the deep value', async () => {
    const text = `{"key":"b","amount":"1","idempotencyKey":"i","zz":${deepText(5000)}}`
    expectIssue(await gw.post('/v1/budgets/authorize', text, apiKey), tooDeepPath('$.zz', 2), DOCS)
  })
})
