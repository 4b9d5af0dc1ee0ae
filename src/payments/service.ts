import { customerKey } from '../catalog/keys.js'
import type { Clock } from '../kernel/clock.js'
import { failure, invalid, type Issue, type Result } from '../kernel/errors.js'
import type { RedisClient } from '../infra/redis/scripts.js'
import { ExternalProvider, type PaymentMethod, type PaymentProvider, type ProviderCode, type ProviderCredentials } from './providers.js'
import { SandboxProvider } from './sandbox.js'

export interface PaymentOptions extends ProviderCredentials {
  /** The gateway's public base URL (no trailing slash), read when a setup link is made. */
  baseUrl: () => string
  /** How long a sandbox setup link stays valid. */
  setupTtlMs: number
}

export interface CreateSetupRequest {
  paymentProvider: ProviderCode
  customerId: string
  successUrl: string
  cancelUrl: string
}

export interface ListRequest {
  customerId: string
  provider?: ProviderCode
  skipCache?: boolean
}

/** Payment methods (spec 4.6, 4.9) behind one provider interface (src/payments/providers.ts). */
export class PaymentService {
  readonly sandbox: SandboxProvider
  private readonly providers: Record<ProviderCode, PaymentProvider>

  constructor(
    private readonly redis: RedisClient,
    clock: Clock,
    options: PaymentOptions,
  ) {
    this.sandbox = new SandboxProvider(redis, clock, options.baseUrl, options.setupTtlMs)
    this.providers = {
      sandbox: this.sandbox,
      stripe: new ExternalProvider('stripe', options.stripeSecretKey),
      square: new ExternalProvider('square', options.squareAccessToken),
    }
  }

  /** POST /v1/payment-methods/create. */
  async createSetup(projectId: string, request: CreateSetupRequest): Promise<Result<{ success: true; url: string }>> {
    const issues: Issue[] = []
    const urls: string[] = []
    for (const field of ['successUrl', 'cancelUrl'] as const) {
      const checked = checkUrl(request[field])
      if ('problem' in checked) issues.push({ path: `$.${field}`, message: checked.problem })
      else urls.push(checked.href)
    }
    if (issues.length > 0) return invalid(issues)
    const provider = this.providers[request.paymentProvider]
    if (!(await this.customerExists(projectId, request.customerId))) return customerNotFound(request.customerId)
    const created = await provider.createSetup({ projectId, customerId: request.customerId }, urls[0]!, urls[1]!)
    return created.ok ? { ok: true, value: { success: true, url: created.value.url } } : created
  }

  /** POST /v1/payment-methods/list: one provider's methods, or (no provider) the sandbox's. */
  async list(projectId: string, request: ListRequest): Promise<Result<PaymentMethod[]>> {
    if (!(await this.customerExists(projectId, request.customerId))) return customerNotFound(request.customerId)
    const provider = this.providers[request.provider ?? 'sandbox']
    return provider.listMethods({ projectId, customerId: request.customerId }, { skipCache: request.skipCache ?? false })
  }

  private async customerExists(projectId: string, customerId: string): Promise<boolean> {
    return (await this.redis.hexists(customerKey(projectId, customerId), 'doc')) === 1
  }
}

function customerNotFound(customerId: string) {
  return failure('not_found', 'customer_not_found', `No customer ${customerId} in this project.`)
}

/** A redirect URL, normalized (so no raw control characters reach a Location header), or why it is refused. */
function checkUrl(text: string): { href: string } | { problem: string } {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return { problem: 'must be an absolute URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { problem: 'must be an http or https URL' }
  if (url.username || url.password) return { problem: 'must not carry credentials' }
  return { href: url.href }
}
