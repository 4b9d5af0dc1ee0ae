// The console (GET /console) driven in a real headless Chromium (Debian's /usr/bin/chromium,
// through playwright-core, as payments.browser.test.ts): a person signs in with a project key and
// looks at a budget (limits, holds, a chart of what it consumed per day), a customer
// (entitlements, usage with its chart, wallet, an invoice with its lines, a run), replays a failed
// webhook delivery and an ingest dead letter, and revokes a key. Against a real gateway, Redis and
// clickhouse-server; the gateway's clock starts at the real time so the browser's "last 30 days"
// and the gateway's agree. A value carrying markup shows as text; the CSP is strict; the key is
// neither in localStorage nor in a cookie; a wrong key is an error, not a blank page. On a failure
// each test saves a screenshot under test-results/console/ and prints its path (CONSOLE_SCREENSHOTS=1:
// of every test).
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Queue } from 'bullmq'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import type { DeadLetterData } from '../../src/events/deadLetters.js'
import { QUEUE_PREFIX } from '../../src/infra/redis/keys.js'
import { drainJournal } from '../../src/journal/drain.js'
import { projectJournalPatterns } from '../../src/journal/keys.js'
import { startTestGateway, type TestGateway } from '../support/gateway.js'
import { REPO_ROOT, waitFor } from '../support/processes.js'
import { startReceiver, type Receiver } from './notifications.receiver.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
/** Each browser step fails well before the test's timeout, with Playwright's own message. */
const STEP_MS = 15_000
const TEST_MS = 90_000
/** Background work (ingest, delivery) on a busy 2-core machine: generous. */
const DEADLINE_MS = 40_000
const SCREENSHOTS = path.join(REPO_ROOT, 'test-results', 'console')
const MARKUP = '<img src=x onerror=alert(1)>'

const suffix = randomBytes(6).toString('hex')
const database = `test_console_${suffix}`
const eventsQueue = `test-console-events-${suffix}`

let gw: TestGateway
let dataDir: string
let browser: Browser
let receiver: Receiver
let project: { projectId: string; apiKey: string; keyId: string }
let other: { projectId: string; apiKey: string; keyId: string }
let dlq: Queue<DeadLetterData>
/** The gateway's time when the data was made: every event and movement counts at it. */
let seededAt: number
/** Dialogs any page opened (an injected alert would be one). */
const dialogs: string[] = []

const now = () => gw.clock()
const monthStart = (ms: number, back = 0) => {
  const d = new Date(ms)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - back, 1)
}

async function ok(pathName: string, body: unknown, key = project.apiKey): Promise<any> {
  const res = await gw.post(pathName, body, key)
  expect(res.status, `${pathName}: ${JSON.stringify(res.body)}`).toBe(200)
  return res.body
}

/** Tokens (summed, 1,000 a month, overage none) and a $10 seat, billed monthly in arrear; acme subscribed since last month. */
function catalog(start: number) {
  return {
    features: [
      {
        slug: 'tokens',
        title: `Tokens ${MARKUP}`,
        unitOfMeasure: 'tokens',
        meterConfig: { eventSlug: 'llm.tokens', aggregationMethod: 'sum', aggregationField: 'tokens', windowSize: 'MINUTE' },
      },
      { slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' },
    ],
    plans: [{ slug: 'pro', title: 'Pro' }],
    planVersions: [
      {
        plan: 'pro',
        version: 1,
        status: 'published',
        title: 'Pro',
        currency: 'USD',
        whenToBill: 'pay_in_arrear',
        billingConfig: { billingInterval: 'month' },
        features: [
          { featureSlug: 'tokens', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 1000, metadata: { overageStrategy: 'none' } },
          { featureSlug: 'seats', featureType: 'flat', config: { price: '10' } },
        ],
      },
    ],
    customers: [{ id: 'acme', name: 'Acme' }, { id: 'globex' }],
    subscriptions: [{ id: 'sub-acme', customerId: 'acme', phases: [{ plan: 'pro', version: 1, startAt: start }] }],
  }
}

beforeAll(async () => {
  // Notification queues of this file's own, one attempt per delivery (each test file runs in its own process).
  process.env.METERING_NOTIFICATIONS_QUEUE = `test-console-notifications-${suffix}`
  process.env.METERING_WEBHOOK_QUEUE = `test-console-webhooks-${suffix}`
  process.env.METERING_WEBHOOK_ATTEMPTS = '1'
  process.env.METERING_WEBHOOK_BACKOFF_MS = '10'
  process.env.METERING_WEBHOOK_TIMEOUT_MS = '5000'
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'metering-console-'))
  gw = await startTestGateway(
    { clickhouse: 'on', clickhouseUrl: inject('clickhouseUrl'), clickhouseDatabase: database, dataDir, events: { queueName: eventsQueue } },
    Date.now(),
  )
  project = await gw.project()
  other = await gw.project()
  receiver = await startReceiver(200)
  dlq = new Queue<DeadLetterData>(`${eventsQueue}-dlq`, { connection: gw.redis.duplicate(), prefix: QUEUE_PREFIX })
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] })
  } catch (err) {
    throw new Error(`cannot start Chromium at ${CHROMIUM} (scripts/install.sh installs Debian's chromium): ${String(err)}`)
  }
  await seed()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await receiver?.close()
  if (dlq) {
    await dlq.obliterate({ force: true }).catch(() => undefined)
    await dlq.close()
    await (dlq.opts.connection as { quit(): Promise<unknown> }).quit().catch(() => undefined)
  }
  await gw?.clickhouse?.exec(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined)
  await gw?.close()
  if (dataDir) await rm(dataDir, { recursive: true, force: true })
})

/** The data the console shows: a catalog, usage, an invoice, a budget with movements and a hold, a failed webhook, dead letters. */
async function seed(): Promise<void> {
  seededAt = now()
  await ok('/v1/config/apply', catalog(monthStart(now(), 1)))
  await ok('/v1/webhooks/upsert', { id: 'hook', url: `${receiver.url}?${MARKUP}`, events: ['limit.crossed'] })
  receiver.statuses = [500]
  await ok('/v1/usage/record-batch', {
    events: [
      { customerId: 'acme', eventSlug: 'llm.tokens', id: 'e1', properties: { tokens: 120 } },
      { customerId: 'acme', eventSlug: 'llm.tokens', id: 'e2', properties: { tokens: 30 } },
    ],
  })
  await ok('/v1/wallet/top-up', { customerId: 'acme', amount: '25', idempotencyKey: 'cash' })
  await ok('/v1/invoices/close', { customerId: 'acme' })
  const budget = { key: 'team-alpha', unit: 'USD', limits: [dailyHard, monthlySoft], holds: { defaultTtlMs: 3_600_000, maxTtlMs: 86_400_000 } }
  await ok('/v1/budgets/upsert', budget)
  await ok('/v1/budgets/authorize', { key: 'team-alpha', amount: '10', idempotencyKey: 'open-hold' })
  const hold = await ok('/v1/budgets/authorize', { key: 'team-alpha', amount: '8', idempotencyKey: 'settled-hold' })
  await ok('/v1/budgets/charge', { key: 'team-alpha', amount: '25', idempotencyKey: 'c1' })
  await ok('/v1/budgets/record', { key: 'team-alpha', amount: '5', idempotencyKey: 'r1' })
  await ok('/v1/budgets/settle', { key: 'team-alpha', holdId: hold.holdId, amount: '6' })
  await deadLetter('dead-mine', project.projectId, `ClickHouse refused the insert: ${MARKUP}`)
  await deadLetter('dead-theirs', other.projectId, 'another project')
  // usage/get reads [now − 30 d, now): move past the events' timestamps (the gateway's now).
  gw.clock.advance(60_000)
  await waitFor('the usage in ClickHouse', async () => (await tokensUsed()) === 150, DEADLINE_MS, { intervalMs: 100 })
  await waitFor('the failed delivery', async () => (await failures()).length === 1, DEADLINE_MS, { intervalMs: 50 })
  const drained = await drainJournal({ redis: gw.redis, store: gw.clickhouse!, match: projectJournalPatterns(project.projectId) })
  expect(drained.failed).toBe(0)
}

const dailyHard = { id: 'daily', window: 'day', enforce: 'hard', amount: '100' }
const monthlySoft = { id: 'monthly-warning', window: 'month', enforce: 'soft', amount: '30' }

async function tokensUsed(): Promise<number | undefined> {
  const body = await ok('/v1/analytics/usage/get', { range: '30d', customer_id: 'acme' })
  return body.usage.find((r: { feature_slug: string }) => r.feature_slug === 'tokens')?.usage
}

async function failures(): Promise<{ deliveryId: string }[]> {
  return (await ok('/v1/webhooks/failures/list', {})).failures
}

/** A batch the ingest worker gave up on, as it leaves one in the dead-letter queue. */
async function deadLetter(id: string, projectId: string, failedReason: string): Promise<void> {
  const at = now()
  await dlq.add(
    'batch',
    {
      v: 1,
      batchId: `batch-${id}-${suffix}`,
      events: [{ eventId: `${id}-event`, projectId, customerId: 'acme', eventSlug: 'llm.tokens', properties: { tokens: 7 }, timestampMs: at, receivedMs: at }],
      deadLetter: { jobId: id, failedReason, attempts: 8, atMs: at },
    },
    { jobId: id },
  )
}

/**
 * A fresh browser context and page, signed in unless told not to; a screenshot of the page is
 * saved (and its path printed) when `use` fails.
 */
async function withConsole(name: string, use: (page: Page, context: BrowserContext) => Promise<void>, signIn = true): Promise<void> {
  const context = await browser.newContext()
  context.setDefaultTimeout(STEP_MS)
  context.setDefaultNavigationTimeout(STEP_MS)
  const page = await context.newPage()
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message())
    dialog.dismiss().catch(() => undefined)
  })
  try {
    await page.goto(`${gw.url}/console`)
    if (signIn) await signInWith(page, project.apiKey)
    await use(page, context)
    // CONSOLE_SCREENSHOTS=1: a screenshot of every test's last state too, to look at the console.
    if (process.env.CONSOLE_SCREENSHOTS) await shoot(page, name)
  } catch (error) {
    console.error(`console.browser.test: screenshot of the failed test "${name}": ${await shoot(page, `${name}-failed`)}`)
    throw error
  } finally {
    await context.close()
  }
}

async function shoot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOTS, { recursive: true })
  const file = path.join(SCREENSHOTS, `${name}-${Date.now()}.png`)
  await page.screenshot({ path: file, fullPage: true }).catch((err: unknown) => console.error(`no screenshot: ${String(err)}`))
  return file
}

async function signInWith(page: Page, key: string): Promise<void> {
  await page.getByLabel('Project API key').fill(key)
  await page.getByRole('button', { name: 'Sign in' }).click()
}

async function openTab(page: Page, name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('button', { name, exact: true }).click()
}

/** The texts of a table's body rows, cell by cell. */
async function rows(page: Page, scope: string): Promise<string[][]> {
  return page.locator(`${scope} tbody tr`).evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')))
}

describe('the console in headless Chromium', () => {
  test('GET /console and its assets: a strict CSP, no inline script, the right content types', async () => {
    const page = await fetch(`${gw.url}/console`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    const csp = page.headers.get('content-security-policy') ?? ''
    const directives = Object.fromEntries(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...values]) => [name, values.join(' ')]),
    )
    expect(directives).toEqual({
      'default-src': "'none'",
      'script-src': "'self'",
      'style-src': "'self'",
      'connect-src': "'self'",
      'img-src': "'self' data:",
      'frame-ancestors': "'none'",
      'base-uri': "'none'",
      'form-action': "'none'",
      'require-trusted-types-for': "'script'",
      'trusted-types': "'none'",
    })
    expect(page.headers.get('x-frame-options')).toBe('DENY')
    expect(page.headers.get('x-content-type-options')).toBe('nosniff')
    const html = await page.text()
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i)
    expect(html).not.toMatch(/\son[a-z]+=|style=/i)
    for (const [asset, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['app.css', 'text/css; charset=utf-8'],
    ]) {
      const res = await fetch(`${gw.url}/console/${asset}`)
      expect(res.status, asset).toBe(200)
      expect(res.headers.get('content-type')).toBe(type)
      expect(res.headers.get('content-security-policy')).toBe(csp)
    }
    // Its code (comments aside) never hands a string to an HTML parser.
    const script = (await (await fetch(`${gw.url}/console/app.js`)).text()).replace(/^\s*\/\/.*$/gm, '')
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/)
  })

  test('a wrong key is an error on the sign-in form, not a blank page', async () => {
    await withConsole(
      'wrong-key',
      async (page) => {
        await signInWith(page, 'mk_not-a-key')
        const alert = page.locator('#sign-in-error')
        await expect.poll(() => alert.textContent()).toContain('401 UNAUTHORIZED')
        expect(await alert.isVisible()).toBe(true)
        expect(await page.getByLabel('Project API key').isVisible()).toBe(true)
        expect(await page.locator('#console').isVisible()).toBe(false)
        expect(await page.evaluate(() => (globalThis as any).sessionStorage.length)).toBe(0)
      },
      false,
    )
  })

  test('signed in: the key is kept in session storage only (no localStorage, no cookie, not in the URL)', async () => {
    await withConsole('key-storage', async (page, context) => {
      await page.getByRole('heading', { name: 'Budgets' }).waitFor()
      expect(await page.locator('#who').textContent()).toBe(`Signed in with key …${project.apiKey.slice(-4)}`)
      const stored = await page.evaluate(() => ({
        local: JSON.stringify({ ...(globalThis as any).localStorage }),
        session: Object.values({ ...(globalThis as any).sessionStorage }),
      }))
      expect(stored.local).toBe('{}')
      expect(stored.session).toEqual([project.apiKey])
      expect(await context.cookies()).toEqual([])
      expect(page.url()).toBe(`${gw.url}/console`)
      // A reload keeps the tab signed in; "Sign out" forgets the key.
      await page.reload()
      await page.getByRole('heading', { name: 'Budgets' }).waitFor()
      await page.getByRole('button', { name: 'Sign out' }).click()
      expect(await page.evaluate(() => (globalThis as any).sessionStorage.length)).toBe(0)
      expect(await page.getByLabel('Project API key').isVisible()).toBe(true)
      // The page refuses to parse strings as HTML (Trusted Types): a slip in the script would throw, not render.
      expect(
        await page.evaluate(() => {
          try {
            ;(globalThis as any).document.body.innerHTML = '<b>x</b>'
            return 'assigned'
          } catch (error) {
            return (error as Error).name
          }
        }),
      ).toBe('TypeError')
    })
  })

  test('a budget: its limits, what open holds keep, and a chart of what it consumed per day', { timeout: TEST_MS }, async () => {
    await withConsole('budget', async (page) => {
      await page.getByLabel('Budget key').fill('team-alpha')
      await page.getByRole('button', { name: 'Show' }).click()
      await page.getByRole('heading', { name: 'team-alpha' }).waitFor()
      const limits = await rows(page, '#budget-view table')
      expect(limits.map((r) => r.slice(0, 7))).toEqual([
        ['daily', 'day', 'hard', '100', '36', '10', '54'],
        ['monthly-warning', 'month', 'soft', '30', '36', '10', '-16'],
      ])
      const facts = await page.locator('#budget-view dl').textContent()
      expect(facts).toContain('Held by open holds and leases10')
      expect(facts).toContain('Remaining (least over hard limits)54')
      const chart = page.locator('#budget-view svg.chart')
      await chart.waitFor()
      expect(await chart.locator('circle.point').count()).toBe(30)
      const titles = await chart.locator('circle.point title').allTextContents()
      expect(titles.filter((t) => t.endsWith(': 36'))).toHaveLength(1)
      expect(titles.filter((t) => t.endsWith(': 0'))).toHaveLength(29)
      expect(await chart.locator('polyline').getAttribute('points')).toMatch(/^(\d+(\.\d)?,\d+(\.\d)? ){29}\d+(\.\d)?,\d+(\.\d)?$/)
      expect(await page.locator('#budget-view').textContent()).toContain('3 movements in the journal over this window.')
      // By the hour instead: 24 points.
      await page.getByLabel('Chart').selectOption('24h')
      await page.getByRole('button', { name: 'Show' }).click()
      await expect.poll(() => page.locator('#budget-view svg.chart circle.point').count()).toBe(24)
      // An unknown budget is the API's error, in place.
      await page.getByLabel('Budget key').fill('no-such-budget')
      await page.getByRole('button', { name: 'Show' }).click()
      await expect.poll(() => page.locator('#budget-view [role=alert]').textContent()).toContain('404 NOT_FOUND')
    })
  })

  test('a customer: entitlements, usage with its chart, wallet, an invoice with its lines, a run', { timeout: TEST_MS }, async () => {
    const started = await ok('/v1/runs/start', { customerId: 'acme', budgetAmountMinor: 500, idempotencyKey: 'console-run', ttlMs: 3_600_000 })
    const [invoice] = (await ok('/v1/invoices/list', { customerId: 'acme' })).invoices
    const { lines } = (await gw.get(`/v1/invoices/get/${invoice.id}`, project.apiKey)).body
    expect(lines.length).toBeGreaterThan(0)
    await withConsole('customer', async (page) => {
      await openTab(page, 'Customers')
      expect(await page.getByRole('list', { name: 'Customers' }).getByRole('button').allTextContents()).toEqual(['acme', 'globex'])
      await page.getByRole('button', { name: 'acme', exact: true }).click()
      await page.getByRole('heading', { name: 'acme', level: 3 }).waitFor()

      const entitlements = page.getByRole('region', { name: 'Entitlements' })
      await entitlements.locator('table').waitFor()
      const ent = await rows(page, '[aria-label="Entitlements"]')
      expect(ent.find((r) => r[0]!.endsWith('(tokens)'))?.slice(0, 5)).toEqual([`Tokens ${MARKUP} (tokens)`, 'usage', '150', '1000', '850'])

      const usage = page.getByRole('region', { name: 'Usage, last 30 days' })
      await usage.locator('svg.chart').waitFor()
      expect((await rows(page, '[aria-label="Usage, last 30 days"]')).find((r) => r[0] === 'tokens')?.slice(0, 3)).toEqual(['tokens', '150', '0'])
      expect(await usage.locator('.legend li').allTextContents()).toEqual(['tokens'])
      const titles = await usage.locator('circle.point title').allTextContents()
      expect(titles).toHaveLength(30)
      expect(titles.filter((t) => t.endsWith(': 150'))).toHaveLength(1)

      const wallet = page.getByRole('region', { name: 'Wallet' })
      await wallet.locator('dl').waitFor()
      expect(await wallet.locator('dl').textContent()).toContain('Held by running runs$5.00')

      const invoices = page.getByRole('region', { name: 'Invoices' })
      await invoices.getByRole('button', { name: invoice.id }).click()
      const shown = invoices.locator('article.invoice')
      await shown.waitFor()
      const shownLines = await rows(page, '[aria-label="Invoices"] article.invoice')
      expect(shownLines.map((r) => r[0])).toEqual(lines.map((l: { description: string }) => l.description))
      expect(await shown.locator('dl').textContent()).toContain(`Status${invoice.status}`)

      const runs = page.getByRole('region', { name: 'Runs' })
      await runs.getByLabel('Run id').fill(started.runId)
      await runs.getByRole('button', { name: 'Show run' }).click()
      await expect.poll(() => runs.locator('dl').textContent()).toContain('Reserved5.00 USD')
      expect(await runs.locator('dl').textContent()).toContain('Statusrunning')
    })
  })

  test('the project-wide invoice list opens an invoice with its lines', { timeout: TEST_MS }, async () => {
    await withConsole('invoices', async (page) => {
      await openTab(page, 'Invoices')
      const view = page.locator('#invoices-view')
      await view.locator('table').waitFor()
      const listed = await rows(page, '#invoices-view > table')
      expect(listed.map((r) => r[1])).toEqual(['acme'])
      await view.locator('[data-invoice]').first().click()
      await view.locator('article.invoice table').waitFor()
      expect(await view.locator('article.invoice caption').textContent()).toBe('Lines')
    })
  })

  test('a failed webhook delivery is listed (its URL as text) and "Replay" delivers it again under the same delivery id', { timeout: TEST_MS }, async () => {
    const [failed] = await failures()
    const before = receiver.received.length
    await withConsole('webhooks', async (page) => {
      await openTab(page, 'Webhook failures')
      const view = page.locator('#webhooks-view')
      await view.locator('table').waitFor()
      const [row] = await rows(page, '#webhooks-view')
      expect(row!.slice(1, 5)).toEqual(['limit.crossed', `${receiver.url}?${MARKUP}`, '1', 'HTTP 500'])
      expect(row![5]).toBe(failed!.deliveryId)
      await view.getByRole('button', { name: 'Replay' }).click()
      await expect.poll(() => view.textContent()).toContain(`Delivery ${failed!.deliveryId} was re-queued.`)
      expect(await view.textContent()).toContain('No failed deliveries.')
    })
    const again = await waitFor('the replayed delivery', () => receiver.received.slice(before).at(0), DEADLINE_MS, { intervalMs: 25 })
    expect(again.headers['x-metering-delivery']).toBe(failed!.deliveryId)
    expect(await failures()).toEqual([])
  })

  test('a dead letter of the project is listed (not another project\'s) and "Replay" sends its events to ClickHouse', { timeout: TEST_MS }, async () => {
    await withConsole('dead-letters', async (page) => {
      await openTab(page, 'Dead letters')
      const view = page.locator('#dead-letters-view')
      await view.locator('table').waitFor()
      const listed = await rows(page, '#dead-letters-view')
      expect(listed).toHaveLength(1)
      expect(listed[0]!.slice(1, 3)).toEqual(['1', 'acme'])
      expect(listed[0]![5]).toBe(`ClickHouse refused the insert: ${MARKUP}`)
      expect(listed[0]![6]).toBe('dead-mine')
      await view.getByRole('button', { name: 'Replay' }).click()
      await expect.poll(() => view.textContent()).toContain('Batch dead-mine was re-queued.')
      expect(await view.textContent()).toContain('No dead letters.')
    })
    await waitFor('the replayed events in ClickHouse', async () => (await tokensUsed()) === 157, DEADLINE_MS, { intervalMs: 100 })
    expect((await dlq.getJobs(['waiting'])).map((j) => j.id)).toEqual(['dead-theirs'])
  })

  test('revoking a key takes two clicks and the key is refused afterwards', { timeout: TEST_MS }, async () => {
    const extra = await ok('/v1/keys/create', { projectId: project.projectId, name: 'to revoke' })
    expect((await gw.post('/v1/customers/list', {}, extra.apiKey)).status).toBe(200)
    await withConsole('revoke', async (page) => {
      await openTab(page, 'Keys')
      await page.getByLabel('Key id').fill(extra.keyId)
      await page.getByRole('button', { name: 'Revoke…' }).click()
      expect(await page.locator('#revoke-view [role=alert]').textContent()).toContain(`Revoke key ${extra.keyId} and every key it created?`)
      await page.getByRole('button', { name: `Revoke ${extra.keyId} for good` }).click()
      await expect.poll(() => page.locator('#revoke-view').textContent()).toContain(`Key ${extra.keyId} is revoked`)
    })
    await waitFor('the revocation', async () => (await gw.post('/v1/customers/list', {}, extra.apiKey)).status === 401, DEADLINE_MS)
  })

  test('markup in values (a feature title, a webhook URL, a failure reason) was shown as text: no element, no dialog', async () => {
    await withConsole('markup', async (page) => {
      await openTab(page, 'Customers')
      await page.getByRole('button', { name: 'acme', exact: true }).click()
      await page.getByRole('region', { name: 'Entitlements' }).locator('table').waitFor()
      expect(await page.getByText(`Tokens ${MARKUP} (tokens)`, { exact: true }).count()).toBe(1)
      expect(await page.locator('img').count()).toBe(0)
      expect(await page.locator('[onerror]').count()).toBe(0)
    })
    expect(dialogs).toEqual([])
  })
})

describe('the routes the console reads, over plain HTTP', () => {
  test('customers/list pages by id and filters by prefix', async () => {
    expect(await ok('/v1/customers/list', { limit: 1 })).toEqual({ customers: [{ id: 'acme' }], nextCursor: 'acme' })
    expect(await ok('/v1/customers/list', { after: 'acme' })).toEqual({ customers: [{ id: 'globex' }], nextCursor: null })
    expect(await ok('/v1/customers/list', { prefix: 'glo' })).toEqual({ customers: [{ id: 'globex' }], nextCursor: null })
    expect(await ok('/v1/customers/list', {}, other.apiKey)).toEqual({ customers: [], nextCursor: null })
  })

  test('series: the window is widened to whole buckets; an empty or too long one is 400', async () => {
    const day = Math.floor(seededAt / 86_400_000) * 86_400_000
    const usage = await ok('/v1/analytics/usage/series', { customer_id: 'acme', from_ms: day + 1, to_ms: day + 2, interval: 'day' })
    expect(usage).toMatchObject({ customer_id: 'acme', interval: 'day', from_ms: day, to_ms: day + 86_400_000 })
    expect(usage.features.map((f: { feature_slug: string; points: unknown[] }) => [f.feature_slug, f.points])).toEqual([
      ['tokens', [{ at: day, usage: expect.stringMatching(/^15[07]$/), refused: '0' }]],
    ])
    const budget = await ok('/v1/budgets/series', { key: 'team-alpha', fromMs: day, toMs: day + 86_400_000, interval: 'hour' })
    expect(budget.points).toHaveLength(24)
    expect(budget.points.reduce((n: number, p: { movements: number }) => n + p.movements, 0)).toBe(3)
    for (const [body, path] of [
      [{ key: 'team-alpha', fromMs: day, toMs: day, interval: 'day' }, '$.toMs'],
      [{ key: 'team-alpha', fromMs: day, toMs: day + 745 * 3_600_000, interval: 'hour' }, '$.toMs'],
    ] as const) {
      const res = await gw.post('/v1/budgets/series', body, project.apiKey)
      expect(res.status).toBe(400)
      expect(res.body.error.details.issues[0].path).toBe(path)
    }
  })

  test("replays of unknown ids, or of another project's dead letter, are notFound and change nothing", async () => {
    expect(await ok('/v1/webhooks/failures/replay', { deliveryIds: ['dlv_nothing'] })).toEqual({ requeued: [], notFound: ['dlv_nothing'] })
    expect(await ok('/v1/usage/dead-letters/replay', { ids: ['dead-theirs', 'nothing'] })).toEqual({ requeued: [], notFound: ['dead-theirs', 'nothing'] })
    expect((await ok('/v1/usage/dead-letters/list', {}, other.apiKey)).deadLetters.map((d: { id: string }) => d.id)).toContain('dead-theirs')
    expect((await dlq.getJobs(['waiting'])).map((j) => j.id)).toContain('dead-theirs')
  })
})
