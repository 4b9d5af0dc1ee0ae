// apply: a config document (the catalog as code, src/catalog/README.md) applied to a project, as
// POST /v1/config/apply applies it, with the same wiring (a crossing it causes is notified).

import { readFile } from 'node:fs/promises'
import { projectKey } from '../../keys/keys.js'
import { applyConfigDocument } from '../../usecases/applyConfig.js'
import { stringOption, type Command } from './command.js'
import { CliFailure } from './errors.js'

async function readDocument(file: string): Promise<unknown> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new CliFailure(`Cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`)
  }
  try {
    return JSON.parse(text) as unknown
  } catch (err) {
    throw new CliFailure(`${file} is not JSON: ${err instanceof Error ? err.message : String(err)}`)
  }
}

export const applyCommands: readonly Command[] = [
  {
    noun: 'apply',
    summary: 'apply a config document (the catalog as code) to a project, all or nothing',
    details: ['The document of POST /v1/config/apply (examples/ai-api-catalog.json); problems are printed with their JSON paths.'],
    args: [{ name: 'FILE.json', help: 'the config document' }],
    options: {
      project: { type: 'string', value: 'ID', help: 'the project', required: true },
      'dry-run': { type: 'boolean', help: 'report what would change, change nothing' },
    },
    async run(ctx, input) {
      const projectId = stringOption(input, 'project')!
      const document = await readDocument(input.args[0]!)
      const redis = await ctx.redis()
      if ((await redis.exists(projectKey(projectId))) === 0) return ctx.fail(`Project ${projectId} does not exist.`)
      if (input.options['dry-run'] && typeof document === 'object' && document !== null) (document as { dryRun?: boolean }).dryRun = true
      const { catalog, wallet } = (await ctx.container()).services
      const result = await applyConfigDocument({ catalog, wallet }, projectId, document, 'cli')
      if (!result.ok) {
        ctx.print(result.details ?? {})
        return ctx.fail(result.message)
      }
      ctx.print(result.value)
      return 0
    },
  },
]
