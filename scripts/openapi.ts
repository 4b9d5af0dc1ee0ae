// Writes the OpenAPI document (built from the registered routes, the same TypeBox schemas
// that validate requests) to openapi.json at the repo root: `npm run openapi`, and the typed
// client's types generated from it (sdk/src/generated.ts), so the two never drift apart.
// test/unit/openapi.integrity.test.ts and test/integration/sdk.build.test.ts fail when a
// committed copy differs.
import { writeFileSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { buildOpenApi } from '../src/http/openapi.js'
import { routes } from '../src/http/routes/index.js'

export const OPENAPI_PATH = fileURLToPath(new URL('../openapi.json', import.meta.url))

/** The document as committed: two-space indent and a trailing newline. */
export function renderOpenApi(): string {
  return JSON.stringify(buildOpenApi(routes), null, 2) + '\n'
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(OPENAPI_PATH, renderOpenApi())
  console.log(`wrote ${OPENAPI_PATH}`)
  // After the document: the generator reads openapi.json.
  const sdk = await import('../sdk/scripts/generate.js')
  writeFileSync(sdk.GENERATED_FILE, sdk.generate())
  console.log(`wrote ${sdk.GENERATED_FILE}`)
}
