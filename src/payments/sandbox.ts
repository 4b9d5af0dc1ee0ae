import { randomBytes, randomUUID } from 'node:crypto'
import type { Clock } from '../kernel/clock.js'
import { success, type Result } from '../kernel/errors.js'
import { PREFIX } from '../infra/redis/keys.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { checkCard, type CardForm } from './cards.js'
import { messagePage, setupFormPage } from './page.js'
import type { CustomerRef, PaymentMethod, PaymentProvider } from './providers.js'

/** The path of the setup page; `:token` is the single-use setup token. */
export const SANDBOX_SETUP_PATH = '/v1/payment-methods/sandbox/setup/:token'
const TOKEN_FORMAT = /^[A-Za-z0-9_-]{32}$/
/** A used or expired token is remembered this long after its expiry, to answer 410 rather than 404. */
const TOMBSTONE_MS = 24 * 3600_000
const USED = '"used"'

interface Session extends CustomerRef {
  successUrl: string
  cancelUrl: string
  expiresAt: number
}

/** What the setup page answers: an HTML page with a status, or a 303 redirect. */
export type PageResult = { kind: 'html'; status: 200 | 400 | 404 | 410; html: string } | { kind: 'redirect'; location: string }

function tokenKey(token: string): string {
  return `${PREFIX}{ps:${token}}:setup`
}

function methodsKey(projectId: string, customerId: string): string {
  return `${PREFIX}{pay:${projectId}}:pm:${customerId}`
}

interface StoredMethod extends PaymentMethod {
  createdAt: number
  /** Order of addition for the customer (createdAt can tie). */
  seq: number
}

/**
 * The sandbox provider: createSetup stores a single-use token (with an expiry) in Redis and
 * answers the URL of the gateway's own setup page; the page stores the test card (last4, brand,
 * expiry, name — never the number or CVC) under the customer and redirects to successUrl.
 */
export class SandboxProvider implements PaymentProvider {
  readonly code = 'sandbox' as const

  constructor(
    private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly baseUrl: () => string,
    private readonly ttlMs: number,
  ) {}

  async createSetup(customer: CustomerRef, successUrl: string, cancelUrl: string): Promise<Result<{ url: string }>> {
    const token = randomBytes(24).toString('base64url')
    const session: Session = { projectId: customer.projectId, customerId: customer.customerId, successUrl, cancelUrl, expiresAt: this.clock() + this.ttlMs }
    await this.redis.set(tokenKey(token), JSON.stringify(session), 'PX', this.ttlMs + TOMBSTONE_MS)
    return success({ url: `${this.baseUrl()}${SANDBOX_SETUP_PATH.replace(':token', token)}` })
  }

  async listMethods(customer: CustomerRef): Promise<Result<PaymentMethod[]>> {
    const stored = (await this.redis.hvals(methodsKey(customer.projectId, customer.customerId))).map((v) => JSON.parse(v) as StoredMethod)
    stored.sort((a, b) => a.seq - b.seq)
    return success(stored.map(({ id, name, last4, expMonth, expYear, brand }) => ({ id, name, last4, expMonth, expYear, brand })))
  }

  /** GET of the setup page. */
  async showPage(token: string): Promise<PageResult> {
    const session = await this.session(token)
    if ('kind' in session) return session
    return { kind: 'html', status: 200, html: setupFormPage({ action: this.pagePath(token), customerId: session.customerId }) }
  }

  /** POST of the setup form (application/x-www-form-urlencoded). */
  async submit(token: string, form: URLSearchParams): Promise<PageResult> {
    const session = await this.session(token)
    if ('kind' in session) return session
    if (form.get('action') === 'cancel') {
      return (await this.consume(token)) ? { kind: 'redirect', location: session.cancelUrl } : gone()
    }
    const values: CardForm = {
      name: form.get('name') ?? '',
      number: form.get('number') ?? '',
      expMonth: form.get('expMonth') ?? '',
      expYear: form.get('expYear') ?? '',
      cvc: form.get('cvc') ?? '',
    }
    const checked = checkCard(values, this.clock())
    if (!checked.ok) {
      const { name, expMonth, expYear } = values
      return {
        kind: 'html',
        status: 400,
        html: setupFormPage({ action: this.pagePath(token), customerId: session.customerId, values: { name, expMonth, expYear }, errors: checked.errors }),
      }
    }
    if (!(await this.consume(token))) return gone()
    const key = methodsKey(session.projectId, session.customerId)
    const seq = await this.redis.incr(`${key}:seq`)
    const method: StoredMethod = { id: `pm_${randomUUID().replaceAll('-', '')}`, ...checked.card, createdAt: this.clock(), seq }
    await this.redis.hset(key, method.id, JSON.stringify(method))
    return { kind: 'redirect', location: session.successUrl }
  }

  private pagePath(token: string): string {
    return SANDBOX_SETUP_PATH.replace(':token', token)
  }

  /** The live session of a token, or the page for an unknown (404), used or expired (410) one. */
  private async session(token: string): Promise<Session | PageResult> {
    const text = TOKEN_FORMAT.test(token) ? await this.redis.get(tokenKey(token)) : null
    if (text === null) return { kind: 'html', status: 404, html: messagePage('Link not found', 'This payment setup link does not exist. Ask for a new one.') }
    if (text === USED) return gone()
    const session = JSON.parse(text) as Session
    if (session.expiresAt <= this.clock())
      return { kind: 'html', status: 410, html: messagePage('Link expired', 'This payment setup link has expired. Ask for a new one.') }
    return session
  }

  /** Marks the token used; false when another request used it first. */
  private async consume(token: string): Promise<boolean> {
    const previous = (await this.redis.call('SET', tokenKey(token), USED, 'XX', 'KEEPTTL', 'GET')) as string | null
    return previous !== null && previous !== USED
  }
}

function gone(): PageResult {
  return { kind: 'html', status: 410, html: messagePage('Link already used', 'This payment setup link has already been used. Ask for a new one.') }
}
