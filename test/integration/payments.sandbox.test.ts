// Payment methods (spec 4.6, 4.9) over HTTP against a real gateway and Redis: the sandbox setup
// page driven with plain fetch (GET the HTML form, POST it form-encoded, follow no redirects).
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { brandOf, checkCard, luhnValid, TEST_CARD_NUMBERS } from '../../src/payments/cards.js'
import { escapeHtml } from '../../src/payments/page.js'
import { ROOT_KEY, startTestGateway, type TestGateway } from '../support/gateway.js'

const SUCCESS = 'https://shop.example/billing/done?from=setup'
const CANCEL = 'https://shop.example/billing/cancelled'
const TTL_MS = 10 * 60_000

let gw: TestGateway
let project: { projectId: string; apiKey: string; keyId: string }

beforeAll(async () => {
  gw = await startTestGateway({ paymentSetupTtlMs: TTL_MS })
  project = await gw.project()
  const applied = await gw.post(
    '/v1/config/apply',
    { customers: [{ id: 'alice' }, { id: 'bob' }, { id: 'carol' }, { id: 'dave' }, { id: 'erin' }, { id: 'frank' }, { id: 'grace' }] },
    project.apiKey,
  )
  expect(applied.status, JSON.stringify(applied.body)).toBe(200)
})
afterAll(async () => {
  await gw?.close()
})

async function createSetup(customerId: string, key = project.apiKey, extra: Record<string, unknown> = {}) {
  return gw.post('/v1/payment-methods/create', { paymentProvider: 'sandbox', customerId, successUrl: SUCCESS, cancelUrl: CANCEL, ...extra }, key)
}

/** A setup link for the customer, as a path on the gateway. */
async function setupPath(customerId: string): Promise<string> {
  const res = await createSetup(customerId)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(res.body.success).toBe(true)
  const url = new URL(res.body.url)
  expect(url.origin).toBe(gw.url)
  expect(url.pathname).toMatch(/^\/v1\/payment-methods\/sandbox\/setup\/[A-Za-z0-9_-]{32}$/)
  return url.pathname
}

async function getPage(path: string) {
  const res = await fetch(gw.url + path, { redirect: 'manual' })
  return { status: res.status, headers: res.headers, html: await res.text() }
}

async function submit(path: string, fields: Record<string, string>, contentType = 'application/x-www-form-urlencoded') {
  const res = await fetch(gw.url + path, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': contentType },
    body: new URLSearchParams(fields).toString(),
  })
  return { status: res.status, headers: res.headers, html: await res.text() }
}

const CARD = { name: 'Alice Example', number: '4242 4242 4242 4242', expMonth: '8', expYear: '2030', cvc: '123', action: 'add' }

async function list(customerId: string, key = project.apiKey, extra: Record<string, unknown> = {}) {
  return gw.post('/v1/payment-methods/list', { customerId, ...extra }, key)
}

describe('sandbox setup, end to end over HTTP', () => {
  test('create → page with the form → POST a test card → 303 successUrl → the card is listed', async () => {
    const path = await setupPath('alice')
    const page = await getPage(path)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(page.headers.get('cache-control')).toBe('no-store')
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'")
    expect(page.headers.get('x-request-id')).toBeTruthy()
    expect(page.html).toContain(`<form method="post" action="${path}"`)
    for (const name of ['name', 'number', 'expMonth', 'expYear', 'cvc']) expect(page.html).toContain(`name="${name}"`)
    expect(page.html).toContain('value="cancel"')

    const done = await submit(path, CARD)
    expect(done.status).toBe(303)
    expect(done.headers.get('location')).toBe(SUCCESS)

    const listed = await list('alice')
    expect(listed.status).toBe(200)
    expect(listed.body).toEqual([
      { id: expect.stringMatching(/^pm_[0-9a-f]{32}$/), name: 'Alice Example', last4: '4242', brand: 'visa', expMonth: 8, expYear: 2030 },
    ])
    expect(await list('alice', project.apiKey, { provider: 'sandbox', skipCache: true })).toMatchObject({ status: 200, body: listed.body })
  })

  test('the full number and CVC are stored nowhere in Redis', async () => {
    const path = await setupPath('grace')
    expect((await submit(path, { ...CARD, number: '5555555555554444', cvc: '987' })).status).toBe(303)
    const keys = (await gw.redis.keys(`mg:{pay:${project.projectId}}:*`)).filter((k) => !k.endsWith(':seq'))
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) {
      const hash = await gw.redis.hgetall(key)
      expect(JSON.stringify(hash)).not.toContain('5555555555554444')
      for (const value of Object.values(hash)) {
        const stored = JSON.parse(value)
        expect(Object.keys(stored).sort()).toEqual(['brand', 'createdAt', 'expMonth', 'expYear', 'id', 'last4', 'name', 'seq'])
        expect(Object.values(stored)).not.toContain('987')
      }
    }
    const listed = await list('grace')
    expect(listed.body).toMatchObject([{ last4: '4444', brand: 'mastercard' }])
  })

  test('a second card is listed after the first; an amex needs a 4-digit CVC', async () => {
    expect((await submit(await setupPath('bob'), CARD)).status).toBe(303)
    const amexPath = await setupPath('bob')
    const short = await submit(amexPath, { ...CARD, number: '378282246310005', cvc: '123' })
    expect(short.status).toBe(400)
    expect(short.html).toContain('4-digit security code')
    expect((await submit(amexPath, { ...CARD, number: '3782 822463 10005', cvc: '1234', expMonth: '12', expYear: '31' })).status).toBe(303)
    const listed = await list('bob')
    expect(listed.body.map((m: { last4: string; brand: string; expYear: number }) => [m.last4, m.brand, m.expYear])).toEqual([
      ['4242', 'visa', 2030],
      ['0005', 'amex', 2031],
    ])
  })

  test('Cancel → 303 cancelUrl, nothing stored, and the link is used up', async () => {
    const path = await setupPath('carol')
    const cancelled = await submit(path, { action: 'cancel' })
    expect(cancelled.status).toBe(303)
    expect(cancelled.headers.get('location')).toBe(CANCEL)
    expect((await list('carol')).body).toEqual([])
    expect((await getPage(path)).status).toBe(410)
    expect((await submit(path, CARD)).status).toBe(410)
    expect((await list('carol')).body).toEqual([])
  })

  test('a link is single use: after a card is added the page and the form answer 410', async () => {
    const path = await setupPath('dave')
    expect((await submit(path, CARD)).status).toBe(303)
    const again = await getPage(path)
    expect(again.status).toBe(410)
    expect(again.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(again.html).toContain('already been used')
    expect((await submit(path, CARD)).status).toBe(410)
    expect((await list('dave')).body).toHaveLength(1)
  })

  test('two submissions at once: exactly one card is stored', async () => {
    const path = await setupPath('erin')
    const answers = await Promise.all(Array.from({ length: 8 }, () => submit(path, CARD)))
    expect(answers.map((a) => a.status).sort()).toEqual([303, 410, 410, 410, 410, 410, 410, 410])
    expect((await list('erin')).body).toHaveLength(1)
  })

  test('an expired link answers 410 (clock moved past the TTL) and stores nothing', async () => {
    const path = await setupPath('frank')
    gw.clock.advance(TTL_MS - 1)
    expect((await getPage(path)).status).toBe(200)
    gw.clock.advance(1)
    const expired = await getPage(path)
    expect(expired.status).toBe(410)
    expect(expired.html).toContain('expired')
    expect((await submit(path, CARD)).status).toBe(410)
    expect((await submit(path, { action: 'cancel' })).status).toBe(410)
    expect((await list('frank')).body).toEqual([])
  })

  test('an unknown or malformed token → 404 page', async () => {
    for (const token of ['A'.repeat(32), 'short', '%3Cscript%3E']) {
      const page = await getPage(`/v1/payment-methods/sandbox/setup/${token}`)
      expect(page.status).toBe(404)
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(page.html).not.toContain('<script>')
    }
    expect((await submit(`/v1/payment-methods/sandbox/setup/${'B'.repeat(32)}`, CARD)).status).toBe(404)
  })

  test('a non-test or invalid card number re-renders the form with an error; nothing is stored; the link still works', async () => {
    const path = await setupPath('alice')
    const before = (await list('alice')).body.length
    for (const number of ['4000 0000 0000 0001', '1234', '4242 4242 4242 4241', '']) {
      const page = await submit(path, { ...CARD, number })
      expect(page.status).toBe(400)
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(page.html).toContain(`<form method="post" action="${path}"`)
      expect(page.html).toMatch(/only test card numbers|valid card number/)
      expect(page.html).toContain('value="Alice Example"') // refilled
      expect(page.html).not.toContain(number.replaceAll(' ', '') || 'never-empty') // the number is not echoed
    }
    const badExpiry = await submit(path, { ...CARD, expMonth: '13', expYear: '2024' })
    expect(badExpiry.status).toBe(400)
    expect(badExpiry.html).toContain('expiry month')
    expect(badExpiry.html).toContain('expiry year')
    expect((await list('alice')).body).toHaveLength(before)
    expect((await submit(path, CARD)).status).toBe(303)
    expect((await list('alice')).body).toHaveLength(before + 1)
  })

  test('a hostile name is escaped when the form is shown again', async () => {
    const path = await setupPath('alice')
    const hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    const page = await submit(path, { ...CARD, name: hostile, number: '1111' })
    expect(page.status).toBe(400)
    expect(page.html).not.toContain('<script>alert(1)')
    expect(page.html).not.toContain('<img src=x')
    expect(page.html).toContain(`value="${escapeHtml(hostile)}"`)
    expect(escapeHtml(hostile)).not.toMatch(/[<>"]/)
    // Stored as typed (JSON is safe), never rendered into a page unescaped.
    expect((await submit(path, { ...CARD, name: hostile })).status).toBe(303)
    const listed = await list('alice')
    expect(listed.body.at(-1).name).toBe(hostile)
  })

  test('the form must be form-encoded (415 otherwise); the page takes only GET and POST (405)', async () => {
    const path = await setupPath('alice')
    expect((await submit(path, CARD, 'application/json')).status).toBe(415)
    const res = await fetch(gw.url + path, { method: 'PUT' })
    expect(res.status).toBe(405)
    expect(res.headers.get('allow')).toBe('GET, POST')
    expect((await getPage(path)).status).toBe(200) // the refused requests did not use it up
  })
})

describe('create and list: validation, providers, isolation', () => {
  test('successUrl and cancelUrl must be absolute http(s) URLs → 400 naming the field', async () => {
    for (const [field, value] of [
      ['successUrl', 'javascript:alert(1)'],
      ['cancelUrl', '/relative'],
      ['successUrl', 'ftp://x.example/'],
      ['cancelUrl', 'https://user:pw@x.example/'],
    ]) {
      const res = await createSetup('alice', project.apiKey, { [field!]: value })
      expect(res.status).toBe(400)
      expect(res.body.error.code).toBe('BAD_REQUEST')
      expect(res.body.error.details.issues).toEqual([{ path: `$.${field}`, message: expect.any(String) }])
    }
  })

  test('an unknown provider or a missing field → 400', async () => {
    expect((await createSetup('alice', project.apiKey, { paymentProvider: 'paypal' })).status).toBe(400)
    expect((await gw.post('/v1/payment-methods/create', { paymentProvider: 'sandbox', customerId: 'alice', successUrl: SUCCESS }, project.apiKey)).status).toBe(
      400,
    )
    expect((await list('alice', project.apiKey, { provider: 'paypal' })).status).toBe(400)
  })

  test('an unknown customer → 404 on create and list', async () => {
    const created = await createSetup('nobody')
    expect(created.status).toBe(404)
    expect(created.body.error.code).toBe('NOT_FOUND')
    expect(created.body.error.details.reason).toBe('customer_not_found')
    expect((await list('nobody')).status).toBe(404)
  })

  test('stripe and square → 412 PRECONDITION_FAILED provider_not_configured', async () => {
    for (const provider of ['stripe', 'square']) {
      const created = await createSetup('alice', project.apiKey, { paymentProvider: provider })
      expect(created.status).toBe(412)
      expect(created.body.error.code).toBe('PRECONDITION_FAILED')
      expect(created.body.error.details.reason).toBe('provider_not_configured')
      expect(created.body.error.message).toContain(provider === 'stripe' ? 'STRIPE_SECRET_KEY' : 'SQUARE_ACCESS_TOKEN')
      const listed = await list('alice', project.apiKey, { provider })
      expect(listed.status).toBe(412)
      expect(listed.body.error.details.reason).toBe('provider_not_configured')
    }
  })

  test('with credentials set, stripe and square still answer 412 (not implemented in this version)', async () => {
    const configured = await startTestGateway({ stripeSecretKey: 'sk_test_dummy', squareAccessToken: 'sq_dummy' })
    try {
      const p = await configured.project()
      await configured.post('/v1/config/apply', { customers: [{ id: 'zed' }] }, p.apiKey)
      for (const provider of ['stripe', 'square']) {
        const res = await configured.post(
          '/v1/payment-methods/create',
          { paymentProvider: provider, customerId: 'zed', successUrl: SUCCESS, cancelUrl: CANCEL },
          p.apiKey,
        )
        expect(res.status).toBe(412)
        expect(res.body.error.details.reason).toBe('provider_not_implemented')
        expect(res.body.error.message).toContain('not implemented in this version')
      }
    } finally {
      await configured.close()
    }
  })

  test("another project's key cannot list or create for this project's customers (404)", async () => {
    const other = await gw.project()
    const listed = await list('alice', other.apiKey)
    expect(listed.status).toBe(404)
    expect(JSON.stringify(listed.body)).not.toContain('4242')
    expect((await createSetup('alice', other.apiKey)).status).toBe(404)
    // Even with a customer of the same id, it sees only its own (empty) list.
    await gw.post('/v1/config/apply', { customers: [{ id: 'alice' }] }, other.apiKey)
    expect(await list('alice', other.apiKey)).toMatchObject({ status: 200, body: [] })
  })

  test('scopes: payments:read lists but cannot create; payments:write creates', async () => {
    const keyOf = async (scopes: string[]) => (await gw.post('/v1/keys/create', { projectId: project.projectId, scopes }, ROOT_KEY)).body.apiKey as string
    const reader = await keyOf(['payments:read'])
    expect((await list('alice', reader)).status).toBe(200)
    expect((await createSetup('alice', reader)).status).toBe(403)
    const writer = await keyOf(['payments:write'])
    expect((await createSetup('alice', writer)).status).toBe(200)
    expect((await list('alice', writer)).status).toBe(403)
  })
})

describe('test cards', () => {
  test('every accepted number passes Luhn and has a known brand', () => {
    for (const number of TEST_CARD_NUMBERS) {
      expect(luhnValid(number), number).toBe(true)
      expect(brandOf(number), number).not.toBe('unknown')
    }
    expect([
      brandOf('4242424242424242'),
      brandOf('5555555555554444'),
      brandOf('2223003122003222'),
      brandOf('378282246310005'),
      brandOf('6011111111111117'),
      brandOf('3566002020360505'),
    ]).toEqual(['visa', 'mastercard', 'mastercard', 'amex', 'discover', 'jcb'])
  })

  test('expiry is checked against the clock: this month is fine, last month is expired', () => {
    const now = Date.UTC(2025, 4, 20)
    expect(checkCard({ name: 'A', number: '4242424242424242', expMonth: '5', expYear: '2025', cvc: '123' }, now).ok).toBe(true)
    const expired = checkCard({ name: 'A', number: '4242424242424242', expMonth: '4', expYear: '2025', cvc: '123' }, now)
    expect(expired).toEqual({ ok: false, errors: { expMonth: 'The card has expired.' } })
  })
})
