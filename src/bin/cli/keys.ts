// project create / list, key create / list / revoke: straight against Redis, with KeyService
// (src/keys/service.ts) where it has the operation. Listing reads the stored records (SCAN): keys
// are stored as SHA-256 digests, so no listing can show a key; only `key create` and
// `project create` print one, the one they just made.

import { scanMasters } from '../../infra/redis/scan.js'
import type { RedisClient } from '../../infra/redis/scripts.js'
import { apiKeyKey, projectKey } from '../../keys/keys.js'
import { SCOPES } from '../../keys/service.js'
import { intOption, stringOption, UsageError, type Command } from './command.js'

/** Hashes read per round trip while listing. */
const READ_BATCH = 500

async function readHashes(redis: RedisClient, keys: readonly string[]): Promise<Record<string, string>[]> {
  const all: Record<string, string>[] = []
  for (let i = 0; i < keys.length; i += READ_BATCH) all.push(...(await Promise.all(keys.slice(i, i + READ_BATCH).map((k) => redis.hgetall(k)))))
  return all
}

export interface ProjectEntry {
  projectId: string
  name: string
  createdAt: number
}

/** Every project, oldest first. */
export async function listProjects(redis: RedisClient): Promise<ProjectEntry[]> {
  const prefix = projectKey('')
  const keys = (await scanMasters(redis, [projectKey('*')])).sort()
  const records = await readHashes(redis, keys)
  return keys
    .map((key, i) => ({ projectId: key.slice(prefix.length), name: records[i]?.name ?? '', createdAt: Number(records[i]?.createdAt ?? 0) }))
    .sort((a, b) => a.createdAt - b.createdAt || a.projectId.localeCompare(b.projectId))
}

export interface KeyEntry {
  keyId: string
  name: string
  scopes: string[]
  expiresAt: number | null
  revoked: boolean
  createdBy: string | null
  createdAt: number
}

/** The project's keys, oldest first, revoked ones included: never the key, nor its digest. */
export async function listKeys(redis: RedisClient, projectId: string): Promise<KeyEntry[]> {
  const records = await readHashes(redis, await scanMasters(redis, [apiKeyKey('*')]))
  return records
    .filter((r) => r.projectId === projectId)
    .map((r) => ({
      keyId: r.keyId ?? '',
      name: r.name ?? '',
      scopes: (r.scopes ?? '*').split(','),
      expiresAt: r.expiresAt ? Number(r.expiresAt) : null,
      revoked: r.revoked === '1',
      createdBy: r.createdBy || null,
      createdAt: Number(r.createdAt ?? 0),
    }))
    .sort((a, b) => a.createdAt - b.createdAt || a.keyId.localeCompare(b.keyId))
}

const project = { type: 'string', value: 'ID', help: 'the project', required: true } as const

export const keyCommands: readonly Command[] = [
  {
    noun: 'project',
    verb: 'create',
    summary: 'create a project and its first API key (printed this once)',
    options: { name: { type: 'string', value: 'NAME', help: 'a name to know it by' } },
    async run(ctx, input) {
      const { keys } = (await ctx.container()).services
      ctx.print(await keys.createProject(stringOption(input, 'name') ?? ''))
      return 0
    },
  },
  {
    noun: 'project',
    verb: 'list',
    summary: 'every project: projectId, name, createdAt',
    async run(ctx) {
      ctx.print(await listProjects(await ctx.redis()))
      return 0
    },
  },
  {
    noun: 'key',
    verb: 'create',
    summary: 'create an API key for a project (printed this once: stored as a digest)',
    options: {
      project,
      scopes: { type: 'string', value: 'a,b', help: `what it may do, comma-separated (default *): ${SCOPES.join(', ')}` },
      'expires-at': { type: 'string', value: 'MS', help: 'when it stops working, epoch milliseconds (default: never)' },
      name: { type: 'string', value: 'NAME', help: 'a name to know it by' },
    },
    async run(ctx, input) {
      const scopes = stringOption(input, 'scopes')?.split(',')
      const unknown = scopes?.filter((s) => s !== '*' && !(SCOPES as readonly string[]).includes(s))
      if (unknown?.length) throw new UsageError(`Unknown scope: ${unknown.join(', ')} (known: *, ${SCOPES.join(', ')})`)
      const { keys } = (await ctx.container()).services
      const result = await keys.createKey(stringOption(input, 'project')!, {
        name: stringOption(input, 'name'),
        scopes,
        expiresAt: intOption(input, 'expires-at', 0, Number.MAX_SAFE_INTEGER) ?? null,
      })
      if (!result.ok) return ctx.fail(result.message)
      ctx.print(result.value)
      return 0
    },
  },
  {
    noun: 'key',
    verb: 'list',
    summary: "a project's keys: ids, names, scopes, expiry, revoked (never a key itself)",
    options: { project },
    async run(ctx, input) {
      const redis = await ctx.redis()
      const projectId = stringOption(input, 'project')!
      if ((await redis.exists(projectKey(projectId))) === 0) return ctx.fail(`Project ${projectId} does not exist.`)
      ctx.print(await listKeys(redis, projectId))
      return 0
    },
  },
  {
    noun: 'key',
    verb: 'revoke',
    summary: 'revoke a key and every key it created',
    args: [{ name: 'KEY_ID', help: 'the keyId (key_…), as `key create` and `key list` show it' }],
    async run(ctx, input) {
      const { keys } = (await ctx.container()).services
      const result = await keys.revokeKey(input.args[0]!)
      if (!result.ok) return ctx.fail(result.message)
      ctx.print(result.value)
      return 0
    },
  },
]
