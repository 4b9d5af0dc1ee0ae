import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { pino } from 'pino'
import { buildServices } from '../container.js'
import { systemClock } from '../kernel/clock.js'
import { loadConfig } from '../kernel/config.js'
import { projectKey } from '../keys/keys.js'
import { connectRedis } from '../infra/redis/connection.js'
import { runningEmbeddedRedis, startEmbeddedRedis } from '../infra/redis/local.js'
import { applyConfigDocument } from '../usecases/applyConfig.js'

const USAGE = `Usage: npm run cli -- <command>
  project create [--name NAME]                         create a project and its first key
  key create --project ID [--scopes a,b] [--expires-at MS] [--name NAME]
  key revoke KEY_ID
  apply FILE.json --project ID [--dry-run]             apply a config document (src/catalog/README.md)
Redis: REDIS_URL, else the embedded redis-server of METERING_DATA_DIR (./data), started for
the command if the service is not running.`

/** Administration without HTTP: projects, keys and config documents, straight against Redis. */
async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      project: { type: 'string' },
      scopes: { type: 'string' },
      'expires-at': { type: 'string' },
      'dry-run': { type: 'boolean' },
    },
  })
  const [noun, verb, arg] = positionals
  const config = loadConfig()
  const running = config.redisUrl ?? (await runningEmbeddedRedis(config.dataDir))
  const embedded = running ? undefined : await startEmbeddedRedis(config.dataDir, config.redisFsync)
  const redis = connectRedis(running ?? embedded!.url, 'metering-cli')
  // The same wiring as the gateway's (src/container.ts); logs go to stderr, answers to stdout.
  const container = buildServices({ config, redis, clock: systemClock, logger: pino({ level: config.logLevel }, pino.destination(2)) })
  const { keys, catalog, wallet } = container.services
  try {
    if (noun === 'project' && verb === 'create') {
      print(await keys.createProject(values.name ?? ''))
    } else if (noun === 'key' && verb === 'create' && values.project) {
      const result = await keys.createKey(values.project, {
        name: values.name,
        scopes: values.scopes?.split(','),
        expiresAt: values['expires-at'] ? Number(values['expires-at']) : null,
      })
      if (!result.ok) return fail(result.message)
      print(result.value)
    } else if (noun === 'apply' && verb && values.project) {
      if ((await redis.exists(projectKey(values.project))) === 0) return fail(`Project ${values.project} does not exist.`)
      const document: unknown = JSON.parse(readFileSync(verb, 'utf8'))
      if (values['dry-run'] && typeof document === 'object' && document !== null) (document as { dryRun?: boolean }).dryRun = true
      const result = await applyConfigDocument({ catalog, wallet }, values.project, document, 'cli')
      if (!result.ok) {
        print(result.details ?? {})
        return fail(result.message)
      }
      print(result.value)
    } else if (noun === 'key' && verb === 'revoke' && arg) {
      const result = await keys.revokeKey(arg)
      if (!result.ok) return fail(result.message)
      print(result.value)
    } else {
      console.error(USAGE)
      return 2
    }
    return 0
  } finally {
    await container.close()
    await redis.quit()
    await embedded?.stop()
  }
}

function print(value: unknown): void {
  console.log(JSON.stringify(value, null, 2))
}

function fail(message: string): number {
  console.error(message)
  return 1
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err)
    process.exit(1)
  },
)
