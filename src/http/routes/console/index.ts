import { readFileSync } from 'node:fs'
import type { RawResult, RawRoute } from '../../route.js'

/**
 * The console (GET /console): a static page, its script and its style sheet, read once at
 * startup from src/http/console/ and served as they are (no build step). The page is public: it
 * holds no data and no secret; everything it shows comes from the JSON API with the key the user
 * types in (README "Console"). The CSP lets it load only itself and talk only to this gateway,
 * and requires Trusted Types, so no string can ever be parsed into the page as HTML or script.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ')

const COMMON_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'content-security-policy': CONSOLE_CSP,
}

function asset(file: string, contentType: string): RawResult {
  const body = readFileSync(new URL(`../../console/${file}`, import.meta.url), 'utf8')
  // no-cache: the browser revalidates, so a new release's script is never mixed with an old page.
  return { status: 200, headers: { ...COMMON_HEADERS, 'content-type': contentType, 'cache-control': 'no-cache' }, body }
}

const page = asset('index.html', 'text/html; charset=utf-8')
const script = asset('app.js', 'text/javascript; charset=utf-8')
const styles = asset('app.css', 'text/css; charset=utf-8')

export const consoleRoutes: RawRoute[] = [
  { method: 'GET', path: '/console', handler: () => page },
  { method: 'GET', path: '/console/app.js', handler: () => script },
  { method: 'GET', path: '/console/app.css', handler: () => styles },
]
