// How `npm run cli` finds the gateway running on its data directory, and asks it. chDB allows one
// process per data directory, so while a gateway runs on the embedded defaults, only it may open
// the usage history: the CLI's `sql` and `invoices close` then go through its root-only routes
// (src/http/routes/admin/). The gateway writes its URL to <dataDir>/gateway.url once it listens
// and removes it when it stops (src/bin/gateway.ts), as it writes <dataDir>/redis/url for the
// embedded Redis (src/infra/redis/local.ts).

import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CliFailure } from './errors.js'

export const GATEWAY_URL_FILE = 'gateway.url'
/** How long the CLI waits for the gateway of the file to answer /livez before it counts it as gone. */
const PROBE_MS = 1_000

/**
 * Writes <dataDir>/gateway.url and answers what removes it again (only while it still names this
 * gateway). Never throws: a gateway that cannot write the file still serves, and says so.
 */
export async function publishGatewayUrl(dataDir: string, url: string, logger: { warn(obj: object, msg: string): void }): Promise<() => Promise<void>> {
  const file = join(dataDir, GATEWAY_URL_FILE)
  try {
    await mkdir(dataDir, { recursive: true })
    await writeFile(file, `${url}\n`)
  } catch (err) {
    logger.warn({ err, file }, 'could not write the gateway URL file: `npm run cli` will not find this gateway')
    return async () => {}
  }
  return async () => {
    const current = await readFile(file, 'utf8').catch(() => undefined)
    if (current?.trim() === url) await rm(file, { force: true }).catch(() => undefined)
  }
}

/** The URL of the gateway running on the data directory, if its file names one that answers /livez. */
export async function runningGateway(dataDir: string): Promise<string | undefined> {
  const url = (await readFile(join(dataDir, GATEWAY_URL_FILE), 'utf8').catch(() => '')).trim()
  if (!url) return undefined
  try {
    const res = await fetch(`${url}/livez`, { signal: AbortSignal.timeout(PROBE_MS) })
    await res.arrayBuffer()
    return res.ok ? url : undefined
  } catch {
    return undefined
  }
}

/** The routes of a running gateway, called with the root key. */
export class GatewayClient {
  constructor(
    readonly url: string,
    private readonly rootKey: string | undefined,
  ) {}

  /** POSTs a JSON body; the answer's body on 2xx, else a CliFailure with the error envelope's code and message. */
  async post<T>(path: string, body: unknown, timeoutMs = 30_000): Promise<T> {
    if (!this.rootKey) {
      throw new CliFailure(
        `A gateway runs on this data directory (${this.url}) and holds its embedded ClickHouse (chDB allows one process per ` +
          'data directory), so the CLI asks it: set METERING_ROOT_KEY to its root key.',
      )
    }
    let res: Response
    try {
      res = await fetch(this.url + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.rootKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      throw new CliFailure(`The gateway at ${this.url} did not answer ${path}: ${err instanceof Error ? err.message : String(err)}`)
    }
    const text = await res.text()
    let answer: unknown
    try {
      answer = text ? JSON.parse(text) : undefined
    } catch {
      answer = undefined
    }
    if (res.ok) return answer as T
    // As a failure of the command itself reads (`not_read_only: …`), then who answered it.
    const error = (answer as { error?: { code?: string; message?: string; details?: { reason?: string } } } | undefined)?.error
    throw new CliFailure(`${error?.details?.reason ?? error?.code ?? res.status}: ${error?.message ?? text} (${res.status} from ${this.url}${path})`)
  }
}
