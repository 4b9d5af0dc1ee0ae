// The sandbox payment-method setup page (spec 4.6, 4.9) driven in a real headless Chromium
// (Debian's /usr/bin/chromium, installed by scripts/install.sh, through playwright-core): a person
// opens the link from POST /v1/payment-methods/create, types a test card into the page's own form
// fields, presses its buttons, and the browser follows the gateway's redirects to a tiny "shop"
// HTTP server of this test (successUrl / cancelUrl). The same flows over plain fetch, with their
// edge cases, are in payments.sandbox.test.ts.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startTestGateway, type TestGateway } from '../support/gateway.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
/** Each browser step fails well before the 30 s test timeout, with Playwright's own message. */
const STEP_MS = 10_000

let gw: TestGateway
let project: { projectId: string; apiKey: string; keyId: string }
let browser: Browser
let shop: Server
let shopUrl: string
/** Every request the shop received (the browser arriving at successUrl / cancelUrl). */
const shopHits: { method: string; url: string; headers: IncomingHttpHeaders }[] = []

beforeAll(async () => {
  gw = await startTestGateway()
  project = await gw.project()
  const customers = ['ann', 'ben', 'cid', 'dot', 'eve', 'fay'].map((id) => ({ id }))
  const applied = await gw.post('/v1/config/apply', { customers }, project.apiKey)
  expect(applied.status, JSON.stringify(applied.body)).toBe(200)

  shop = createServer((req, res) => {
    shopHits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers })
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Shop</title><h1>Back at the shop</h1>')
  })
  await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve))
  shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`

  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      // Root in a container: no user namespaces for Chromium's sandbox; /dev/shm may be tiny.
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    })
  } catch (err) {
    throw new Error(`cannot start Chromium at ${CHROMIUM} (scripts/install.sh installs Debian's chromium): ${String(err)}`)
  }
})

afterAll(async () => {
  await browser?.close()
  await new Promise((resolve) => (shop ? shop.close(resolve) : resolve(undefined)))
  await gw?.close()
})

const successUrl = (customerId: string) => `${shopUrl}/billing/done?customer=${customerId}`
const cancelUrl = (customerId: string) => `${shopUrl}/billing/cancelled?customer=${customerId}`

/** The setup link for a customer, as the API answers it. */
async function setupLink(customerId: string): Promise<string> {
  const res = await gw.post(
    '/v1/payment-methods/create',
    {
      paymentProvider: 'sandbox',
      customerId,
      successUrl: successUrl(customerId),
      cancelUrl: cancelUrl(customerId),
    },
    project.apiKey,
  )
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  expect(res.body.url.startsWith(`${gw.url}/v1/payment-methods/sandbox/setup/`)).toBe(true)
  return res.body.url
}

async function listed(customerId: string) {
  const res = await gw.post('/v1/payment-methods/list', { customerId }, project.apiKey)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body as { id: string; name: string; last4: string; brand: string; expMonth: number; expYear: number }[]
}

const hitsFor = (customerId: string) => shopHits.filter((h) => h.url.endsWith(`?customer=${customerId}`)).map((h) => `${h.method} ${h.url}`)

/** A fresh browser context (no shared cookies or cache) and page; closed after `use`. */
async function withPage<T>(use: (page: Page, context: BrowserContext) => Promise<T>, options: { javaScriptEnabled?: boolean } = {}): Promise<T> {
  const context = await browser.newContext({ javaScriptEnabled: options.javaScriptEnabled ?? true })
  context.setDefaultTimeout(STEP_MS)
  context.setDefaultNavigationTimeout(STEP_MS)
  try {
    return await use(await context.newPage(), context)
  } finally {
    await context.close()
  }
}

/** Opens the link as a person would and checks it is the card form. */
async function open(page: Page, link: string): Promise<void> {
  const res = await page.goto(link)
  expect(res?.status()).toBe(200)
  expect(await page.title()).toBe('Add a test card')
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Add a test card')
}

interface TypedCard {
  name?: string
  number?: string
  expMonth?: string
  expYear?: string
  cvc?: string
}

/** Types into the fields found by their visible labels (clearing what a refused submission refilled). */
async function typeCard(page: Page, card: TypedCard): Promise<void> {
  const fields: [string, string | undefined][] = [
    ['Name on card', card.name],
    ['Card number', card.number],
    ['Expiry month', card.expMonth],
    ['Expiry year', card.expYear],
    ['CVC', card.cvc],
  ]
  for (const [label, text] of fields) {
    if (text === undefined) continue
    const input = page.getByLabel(label, { exact: true })
    await input.clear()
    await input.pressSequentially(text)
  }
}

const addCard = (page: Page) => page.getByRole('button', { name: 'Add card' }).click()

/** The refusal banner and the error shown with one field (by its label), as the page renders them. */
async function fieldError(page: Page, label: string): Promise<string | null> {
  const input = page.getByLabel(label, { exact: true })
  if ((await input.getAttribute('aria-invalid')) !== 'true') return null
  const describedBy = await input.getAttribute('aria-describedby')
  expect(describedBy, `${label}: the error is tied to its field`).toBeTruthy()
  return page.locator(`[id="${describedBy}"]`).textContent()
}

describe('sandbox setup page in headless Chromium', () => {
  test('a person types a test card, presses "Add card", lands on successUrl; the card is listed; the link is then used up', async () => {
    const link = await setupLink('ann')
    await withPage(async (page) => {
      await open(page, link)
      await typeCard(page, { name: 'Ann Example', number: '5555 5555 5555 4444', expMonth: '08', expYear: '2031', cvc: '123' })
      await addCard(page)
      await page.waitForURL(successUrl('ann'))
      expect(await page.getByRole('heading').textContent()).toBe('Back at the shop')
      expect(hitsFor('ann')).toEqual([`GET /billing/done?customer=ann`])
      // The link is the only credential: it must not leak to the shop as a Referer.
      expect(shopHits.find((h) => h.url.endsWith('?customer=ann'))?.headers.referer).toBeUndefined()

      expect(await listed('ann')).toEqual([
        { id: expect.stringMatching(/^pm_[0-9a-f]{32}$/), name: 'Ann Example', last4: '4444', brand: 'mastercard', expMonth: 8, expYear: 2031 },
      ])

      // Back to the form (not cached: no-store) → the link is used.
      const back = await page.goBack()
      expect(back?.status()).toBe(410)
      expect(await page.getByRole('heading').textContent()).toBe('Link already used')
      expect(await page.getByRole('button', { name: 'Add card' }).count()).toBe(0)
    })
    // And opened afresh, in another browser context.
    await withPage(async (page) => {
      const again = await page.goto(link)
      expect(again?.status()).toBe(410)
      expect(await page.getByText('already been used').count()).toBe(1)
    })
    expect(await listed('ann')).toHaveLength(1)
  })

  test('the form works with JavaScript disabled (a plain HTML form post and 303)', async () => {
    const link = await setupLink('ben')
    await withPage(
      async (page) => {
        await open(page, link)
        await typeCard(page, { name: 'Ben Example', number: '3782 822463 10005', expMonth: '12', expYear: '29', cvc: '1234' })
        await addCard(page)
        await page.waitForURL(successUrl('ben'))
      },
      { javaScriptEnabled: false },
    )
    expect(await listed('ben')).toMatchObject([{ name: 'Ben Example', last4: '0005', brand: 'amex', expMonth: 12, expYear: 2029 }])
    expect(hitsFor('ben')).toEqual([`GET /billing/done?customer=ben`])
  })

  test('"Cancel" on the untouched form lands on cancelUrl, adds nothing and uses the link up', async () => {
    const link = await setupLink('cid')
    await withPage(async (page) => {
      await open(page, link)
      await page.getByRole('button', { name: 'Cancel' }).click()
      await page.waitForURL(cancelUrl('cid'))
      expect(await page.getByRole('heading').textContent()).toBe('Back at the shop')
      expect(hitsFor('cid')).toEqual([`GET /billing/cancelled?customer=cid`])
      expect(await listed('cid')).toEqual([])

      const again = await page.goto(link)
      expect(again?.status()).toBe(410)
    })
    expect(await listed('cid')).toEqual([])
  })

  test('a refused card (not a sandbox test card, bad checksum, expired) shows errors on the page and adds nothing; then a good one goes through', async () => {
    const link = await setupLink('dot')
    await withPage(async (page) => {
      await open(page, link)
      const posts: string[] = []
      page.on('response', (res) => {
        if (res.request().method() === 'POST') posts.push(`${res.status()}`)
      })

      // 4000 0000 0000 0002 passes Luhn but is no sandbox test card (it is the big providers' "declined" card).
      await typeCard(page, { name: 'Dot Example', number: '4000 0000 0000 0002', expMonth: '3', expYear: '2030', cvc: '123' })
      await addCard(page)
      await page.getByRole('alert').waitFor()
      expect(page.url()).toBe(link)
      expect(await page.getByRole('alert').textContent()).toContain('The card was not added')
      expect(await fieldError(page, 'Card number')).toContain('only test card numbers')
      expect(await fieldError(page, 'Name on card')).toBeNull()
      // What was typed is kept, except the card number and CVC.
      expect(await page.getByLabel('Name on card', { exact: true }).inputValue()).toBe('Dot Example')
      expect(await page.getByLabel('Expiry month', { exact: true }).inputValue()).toBe('3')
      expect(await page.getByLabel('Card number', { exact: true }).inputValue()).toBe('')
      expect(await page.getByLabel('CVC', { exact: true }).inputValue()).toBe('')

      // A mistyped number (checksum) and an expired date (the gateway's clock is January 2025).
      await typeCard(page, { number: '4242 4242 4242 4241', expMonth: '12', expYear: '2024', cvc: '123' })
      await addCard(page)
      await page.getByRole('alert').waitFor()
      expect(await fieldError(page, 'Card number')).toBe('Enter a valid card number.')
      expect(await fieldError(page, 'Expiry year')).toContain('Enter the expiry year')

      expect(posts).toEqual(['400', '400'])
      expect(await listed('dot')).toEqual([])
      expect(hitsFor('dot')).toEqual([])

      // The link was not used up by the refusals.
      await typeCard(page, { number: '4242424242424242', expMonth: '1', expYear: '2025', cvc: '321' })
      await addCard(page)
      await page.waitForURL(successUrl('dot'))
    })
    expect(await listed('dot')).toMatchObject([{ name: 'Dot Example', last4: '4242', brand: 'visa', expMonth: 1, expYear: 2025 }])
  })

  test('the browser does not send the form while a required field is empty', async () => {
    const link = await setupLink('eve')
    await withPage(async (page) => {
      await open(page, link)
      let posted = false
      page.on('request', (req) => {
        if (req.method() === 'POST') posted = true
      })
      await typeCard(page, { name: 'Eve Example', number: '4242 4242 4242 4242', expMonth: '5', expYear: '2030' })
      await addCard(page)
      const cvc = page.getByLabel('CVC', { exact: true })
      // Only the empty CVC is invalid, and the browser moved the focus to it.
      expect(await page.locator('input:invalid').count()).toBe(1)
      expect(await cvc.and(page.locator(':invalid:focus')).count()).toBe(1)
      expect(posted).toBe(false)
      expect(page.url()).toBe(link)

      await typeCard(page, { cvc: '999' })
      await addCard(page)
      await page.waitForURL(successUrl('eve'))
      expect(posted).toBe(true)
    })
    expect(await listed('eve')).toMatchObject([{ last4: '4242', expMonth: 5, expYear: 2030 }])
  })

  test('the link cannot be used twice: a second tab that had the form open gets "already used" and adds nothing', async () => {
    const link = await setupLink('fay')
    await withPage(async (first, context) => {
      const second = await context.newPage()
      await open(first, link)
      await open(second, link)

      // A person switches tabs (a background tab is throttled: its steps would take seconds).
      await first.bringToFront()
      await typeCard(first, { name: 'Fay Example', number: '6011 1111 1111 1117', expMonth: '6', expYear: '2032', cvc: '123' })
      await addCard(first)
      await first.waitForURL(successUrl('fay'))

      await second.bringToFront()
      await typeCard(second, { name: 'Fay Again', number: '3566 0020 2036 0505', expMonth: '7', expYear: '2033', cvc: '456' })
      const [answer] = await Promise.all([second.waitForResponse((res) => res.request().method() === 'POST'), addCard(second)])
      expect(answer.status()).toBe(410)
      await second.getByRole('heading', { name: 'Link already used' }).waitFor()
      expect(second.url()).toBe(link)
    })
    expect(await listed('fay')).toMatchObject([{ name: 'Fay Example', last4: '1117', brand: 'discover', expMonth: 6, expYear: 2032 }])
    expect(hitsFor('fay')).toEqual([`GET /billing/done?customer=fay`])
  })
})
