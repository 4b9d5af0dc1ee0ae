import { failure, type Result } from '../kernel/errors.js'

/** The provider codes of spec 4.6: the gateway's own sandbox and two external providers. */
export const PROVIDER_CODES = ['sandbox', 'stripe', 'square'] as const
export type ProviderCode = (typeof PROVIDER_CODES)[number]

/** A stored card as spec 2.7 shows it: never the full number. */
export interface PaymentMethod {
  id: string
  name: string
  last4: string
  expMonth: number
  expYear: number
  brand: string
}

/** Whose payment methods: a customer of a project. */
export interface CustomerRef {
  projectId: string
  customerId: string
}

/**
 * One payment provider. `createSetup` answers the URL of a page where the customer adds a
 * payment method, after which the page sends them to successUrl (or cancelUrl if they cancel);
 * `listMethods` answers the methods the provider holds for the customer.
 */
export interface PaymentProvider {
  readonly code: ProviderCode
  createSetup(customer: CustomerRef, successUrl: string, cancelUrl: string): Promise<Result<{ url: string }>>
  listMethods(customer: CustomerRef, options?: { skipCache?: boolean }): Promise<Result<PaymentMethod[]>>
}

/** Credentials of the external providers (from the environment; see README). */
export interface ProviderCredentials {
  stripeSecretKey?: string | undefined
  squareAccessToken?: string | undefined
}

const NAMES: Record<Exclude<ProviderCode, 'sandbox'>, { name: string; env: string }> = {
  stripe: { name: 'Stripe', env: 'STRIPE_SECRET_KEY' },
  square: { name: 'Square', env: 'SQUARE_ACCESS_TOKEN' },
}

/**
 * An external provider. Without credentials it answers 412 provider_not_configured; with them
 * still 412 (provider_not_implemented): this version makes no network calls to providers.
 */
export class ExternalProvider implements PaymentProvider {
  constructor(
    readonly code: Exclude<ProviderCode, 'sandbox'>,
    private readonly credential: string | undefined,
  ) {}

  private refuse(): Result<never> {
    const { name, env } = NAMES[this.code]
    return this.credential
      ? failure(
          'precondition_failed',
          'provider_not_implemented',
          `${name} credentials are configured, but the ${name} integration is not implemented in this version; use the sandbox provider.`,
        )
      : failure('precondition_failed', 'provider_not_configured', `The ${this.code} provider is not configured: set ${env} to enable it.`)
  }

  async createSetup(): Promise<Result<{ url: string }>> {
    return this.refuse()
  }

  async listMethods(): Promise<Result<PaymentMethod[]>> {
    return this.refuse()
  }
}
