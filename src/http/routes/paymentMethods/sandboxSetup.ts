import { SANDBOX_SETUP_PATH, type PageResult } from '../../../payments/sandbox.js'
import { messagePage } from '../../../payments/page.js'
import type { RawResult, RawRoute } from '../../route.js'

/**
 * The sandbox setup page (raw routes: HTML, not JSON). The single-use token in the path is the
 * only credential: whoever holds the link may add one card for the customer it was made for.
 */
const HTML_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
}

function answer(page: PageResult): RawResult {
  if (page.kind === 'redirect')
    return { status: 303, headers: { location: page.location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' }, body: '' }
  return { status: page.status, headers: HTML_HEADERS, body: page.html }
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(;|$)/i

export const sandboxSetupRoutes: RawRoute[] = [
  {
    method: 'GET',
    path: SANDBOX_SETUP_PATH,
    handler: async ({ params, services }) => answer(await services.payments.sandbox.showPage(params.token ?? '')),
  },
  {
    method: 'POST',
    path: SANDBOX_SETUP_PATH,
    handler: async ({ params, body, contentType, services }) => {
      if (!FORM_TYPE.test(contentType)) {
        return { status: 415, headers: HTML_HEADERS, body: messagePage('Unsupported form', 'Submit the card form from the setup page.') }
      }
      return answer(await services.payments.sandbox.submit(params.token ?? '', new URLSearchParams(body)))
    },
  },
]
