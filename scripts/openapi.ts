// Writes the OpenAPI document (built from the registered routes, the same TypeBox schemas
// that validate requests) to openapi.json at the repo root: `npm run openapi`.
// test/unit/openapi.integrity.test.ts fails when the committed copy differs from it.
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
}
