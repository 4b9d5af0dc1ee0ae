// `npm run cli`: every command has a --help that exits 0 and names its options; an unknown
// command or option is usage on stderr and exit 2, never a stack trace; and the operator
// commands do what they say against real stores: keys listed without their secrets, dead
// letters (ingest batches, webhook deliveries) listed and replayed exactly once, invoices closed,
// listed and shown, and `sql` read-only on the ClickHouse server.
// Most commands run in this process through runCli (the same code path as the binary, with an
// environment of the test's own); a few run as the real process, for its exit codes and streams.
// Dead letters use the service's default queue names, so that suite has a redis-server of its own.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Queue } from 'bullmq'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { COMMANDS, runCli } from '../../src/bin/cli/main.js'
import { clickHouseEventSink } from '../../src/events/clickhouse.js'
import { listDeadLetters } from '../../src/events/deadLetters.js'
import { DEAD_LETTER_QUEUE, INGEST_QUEUE, QUEUE_PREFIX } from '../../src/events/queue.js'
import { EventService } from '../../src/events/service.js'
import type { EventSink, IngestJobData, UsageEventRow } from '../../src/events/types.js'
import { eventCountOfJob } from '../../src/events/jobs.js'
import { connectRedis } from '../../src/infra/redis/connection.js'
import { startRedisServer, type RedisServerHandle } from '../../src/infra/redis/embedded.js'
import { loadLibrary, type RedisClient } from '../../src/infra/redis/scripts.js'
import { systemClock } from '../../src/kernel/clock.js'
import { DEFAULT_NOTIFICATION_OPTIONS } from '../../src/notifications/options.js'
import { Notifications } from '../../src/notifications/queue.js'
import { WebhookService } from '../../src/notifications/webhooks.js'
import { startIngestWorker } from '../../src/workers/ingest.js'
import { startNotificationWorker } from '../../src/workers/notifications.js'
import { REPO_ROOT, waitFor } from '../support/processes.js'
import { openTestStore, type TestStore } from '../support/store.js'
import { uniquePrefix } from '../support/redis.js'
import { deadUrl, startReceiver } from './notifications.receiver.js'

const logger = pino({ level: 'silent' })
const until = <T>(what: string, check: () => Promise<T | undefined | false>) => waitFor(what, check, 30_000, { intervalMs: 25 })

let dataDir: string
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cli-commands-'))
})
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true })
})

interface Run {
  code: number
  out: string
  err: string
}

/** runCli in this process; METERING_DATA_DIR is a temp dir, so nothing reaches ./data. */
async function cli(env: Record<string, string>, ...argv: string[]): Promise<Run> {
  let out = ''
  let err = ''
  const code = await runCli(argv, {
    env: { LOG_LEVEL: 'silent', METERING_DATA_DIR: dataDir, ...env },
    out: (t) => {
      out += `${t}\n`
    },
    err: (t) => {
      err += `${t}\n`
    },
    isTty: false,
  })
  return { code, out, err }
}

/** A run that must succeed; its stdout as JSON. */
async function ok<T = any>(env: Record<string, string>, ...argv: string[]): Promise<T> {
  const run = await cli(env, ...argv)
  expect(run.code, `${argv.join(' ')}: ${run.err}`).toBe(0)
  return JSON.parse(run.out) as T
}

/** The real process (node --import tsx src/bin/cli.ts), stdout and stderr apart. */
function spawnCli(env: Record<string, string>, ...argv: string[]): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('METERING_') && k !== 'REDIS_URL' && !k.startsWith('CLICKHOUSE_')))
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'src/bin/cli.ts'), ...argv], {
    cwd: REPO_ROOT,
    env: { ...base, LOG_LEVEL: 'warn', METERING_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8')
  })
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString('utf8')
  })
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, out, err })))
}

const nameOf = (c: (typeof COMMANDS)[number]) => (c.verb ? [c.noun, c.verb] : [c.noun])

describe('usage', () => {
  test.each([['--help'], ['-h'], ['help']])('`%s` lists every command on stdout, exit 0', async (flag) => {
    const run = await cli({}, flag)
    expect(run.code).toBe(0)
    expect(run.err).toBe('')
    for (const c of COMMANDS) expect(run.out).toContain(`  ${nameOf(c).join(' ')}`)
  })

  test.each(COMMANDS.map((c) => [nameOf(c).join(' '), c] as const))(
    '`%s --help` (and -h, and `help %s`) names its arguments and options, exit 0',
    async (_name, c) => {
      for (const argv of [
        [...nameOf(c), '--help'],
        [...nameOf(c), '-h'],
        ['help', ...nameOf(c)],
      ]) {
        const run = await cli({}, ...argv)
        expect(run.code, argv.join(' ')).toBe(0)
        expect(run.err).toBe('')
        expect(run.out).toContain(`Usage: npm run cli -- ${nameOf(c).join(' ')}`)
        for (const option of Object.keys(c.options ?? {})) expect(run.out, `--${option}`).toContain(`--${option}`)
        for (const arg of c.args ?? []) expect(run.out).toContain(arg.name)
      }
    },
  )

  test.each([...new Set(COMMANDS.filter((c) => c.verb).map((c) => c.noun))])('`%s --help` lists the verbs, exit 0', async (noun) => {
    const run = await cli({}, noun, '--help')
    expect(run.code).toBe(0)
    for (const c of COMMANDS.filter((x) => x.noun === noun)) expect(run.out).toContain(`${noun} ${c.verb}`)
  })

  test.each([
    [['nope'], 'Unknown command: nope'],
    [['key', 'nope'], 'Unknown command: key nope'],
    [['key'], 'key: which one?'],
    [[], 'No command given.'],
    [['key', 'create', '--nope', 'x', '--project', 'p'], "Unknown option '--nope'"],
    [['key', 'create'], 'Missing --project'],
    [['key', 'revoke'], 'Missing KEY_ID'],
    [['sql', 'SELECT 1', 'SELECT 2'], 'Unexpected argument: SELECT 2'],
    [['sql', 'SELECT 1', '--format', 'xml'], '--format is json or table'],
    [['invoices', 'list', '--project', 'p', '--limit', '1000'], '--limit takes an integer from 1 to 100'],
    [['invoices', 'list', '--project', 'p', '--status', 'lost'], 'Invalid filter status'],
    [['key', 'create', '--project', 'p', '--scopes', 'budgets:read,root'], 'Unknown scope: root'],
    [['deadletters', 'replay'], 'Name the dead letters to replay, or give --all'],
  ])('%j → usage on stderr, nothing on stdout, exit 2', async (argv, message) => {
    const run = await cli({ REDIS_URL: 'redis://127.0.0.1:1' }, ...argv)
    expect(run.code, run.err).toBe(2)
    expect(run.out).toBe('')
    expect(run.err).toContain(message)
    expect(run.err).toContain('Usage: npm run cli --')
  })

  test('the real process: --help exits 0 on stdout; unknown commands and options exit 2 on stderr, without a stack trace', async () => {
    const [help, keyList, unknown, badOption] = await Promise.all([
      spawnCli({}, '--help'),
      spawnCli({}, 'key', 'list', '--help'),
      spawnCli({}, 'frobnicate'),
      spawnCli({}, 'deadletters', 'list', '--verbose'),
    ])
    expect(help).toMatchObject({ code: 0, err: '' })
    expect(help.out).toContain('deadletters replay')
    expect(keyList).toMatchObject({ code: 0, err: '' })
    expect(keyList.out).toContain('--project ID')
    for (const run of [unknown, badOption]) {
      expect(run.code, run.err).toBe(2)
      expect(run.out).toBe('')
      expect(run.err).toContain('Usage: npm run cli --')
      expect(run.err).not.toMatch(/^\s+at /m)
    }
    expect(unknown.err).toContain('Unknown command: frobnicate')
    expect(badOption.err).toContain("Unknown option '--verbose'")
  })
})

describe('projects and keys', () => {
  const env = () => ({ REDIS_URL: inject('redisUrl') })

  test('key list after create: every key of the project with its scopes, never a key itself; revoked ones marked', async () => {
    const project = await ok(env(), 'project', 'create', '--name', 'cli-keys')
    expect(project).toMatchObject({ projectId: expect.stringMatching(/^proj_/), apiKey: expect.stringMatching(/^mk_/) })
    const created = await ok(env(), 'key', 'create', '--project', project.projectId, '--scopes', 'budgets:read,invoices:read', '--name', 'reader')
    expect(created).toMatchObject({ projectId: project.projectId, scopes: ['budgets:read', 'invoices:read'], expiresAt: null })

    const run = await cli(env(), 'key', 'list', '--project', project.projectId)
    expect(run.code, run.err).toBe(0)
    expect(run.out).not.toContain(project.apiKey)
    expect(run.out).not.toContain(created.apiKey)
    expect(run.out).not.toContain('mk_')
    expect(JSON.parse(run.out)).toEqual([
      { keyId: project.keyId, name: 'default', scopes: ['*'], expiresAt: null, revoked: false, createdBy: null, createdAt: expect.any(Number) },
      {
        keyId: created.keyId,
        name: 'reader',
        scopes: ['budgets:read', 'invoices:read'],
        expiresAt: null,
        revoked: false,
        createdBy: null,
        createdAt: expect.any(Number),
      },
    ])

    expect(await ok(env(), 'key', 'revoke', created.keyId)).toEqual({ keyId: created.keyId, revoked: true })
    const after = await ok<{ keyId: string; revoked: boolean }[]>(env(), 'key', 'list', '--project', project.projectId)
    expect(after.map((k) => [k.keyId, k.revoked])).toEqual([
      [project.keyId, false],
      [created.keyId, true],
    ])
    const projects = await ok<{ projectId: string; name: string }[]>(env(), 'project', 'list')
    expect(projects).toContainEqual(expect.objectContaining({ projectId: project.projectId, name: 'cli-keys' }))
  })

  test('key list and key create of a project that does not exist fail (exit 1), naming it', async () => {
    for (const argv of [
      ['key', 'list', '--project', 'proj_nope'],
      ['key', 'create', '--project', 'proj_nope'],
    ]) {
      const run = await cli(env(), ...argv)
      expect(run.code).toBe(1)
      expect(run.err).toContain('proj_nope')
    }
  })
})

/** The ClickHouse sink with a switch: while `failing`, every insert throws (a store that keeps refusing). */
class SwitchedSink implements EventSink {
  failing = true
  constructor(private readonly sink: EventSink) {}
  async insertEvents(rows: UsageEventRow[], dedupToken: string, options?: { firstAttempt?: boolean }): Promise<void> {
    if (this.failing) throw new Error('the store refuses the batch')
    await this.sink.insertEvents(rows, dedupToken, options)
  }
}

describe('dead letters (a redis-server of its own: the default queue names)', () => {
  let server: RedisServerHandle
  let redis: RedisClient
  let blocking: RedisClient
  let history: TestStore
  const env = () => ({ REDIS_URL: server.url })

  beforeAll(async () => {
    server = await startRedisServer({ dataDir: path.join(dataDir, 'redis-dlq'), appendOnly: false })
    redis = connectRedis(server.url, 'test-cli-dlq')
    await loadLibrary(redis)
    blocking = connectRedis(server.url, 'test-cli-dlq-worker', { blocking: true })
    history = await openTestStore('server', `test_cli_${uniquePrefix()}`, { migrate: true })
  })
  afterAll(async () => {
    await blocking?.quit()
    await redis?.quit()
    await server?.stop()
    await history?.close()
  })

  test('an ingest batch that failed every attempt is listed, replayed once onto the ingest queue, and then stored once', async () => {
    const projectId = `p-${uniquePrefix()}`
    const events = new EventService(redis, redis.duplicate(), systemClock, logger, { retry: { attempts: 2, backoffMs: 0 } })
    const sink = new SwitchedSink(clickHouseEventSink(history.store))
    let worker = startIngestWorker({ connection: blocking, sink, logger, concurrency: 1 })
    try {
      const answer = await events.recordBatch(projectId, [
        { customerId: 'acme', eventSlug: 'calls', id: 'e-1' },
        { customerId: 'acme', eventSlug: 'calls', id: 'e-2' },
      ])
      expect(
        answer.results.every((r) => r.accepted),
        JSON.stringify(answer),
      ).toBe(true)
      await until('the batch is dead-lettered', async () => (await listDeadLetters({ connection: redis })).length === 1)
    } finally {
      await worker.close()
    }

    const listed = await ok<{ ingest: { id: string; batchId: string; events: number; failedReason: string; attempts: number }[] }>(env(), 'deadletters', 'list')
    expect(listed.ingest).toEqual([expect.objectContaining({ events: 2, failedReason: 'the store refuses the batch', attempts: 2 })])
    const [dead] = listed.ingest

    expect(await ok(env(), 'deadletters', 'replay', dead!.id)).toEqual({ ingest: [dead!.id] })
    // Replayed again: nothing left to replay, so nothing is queued twice; the id is reported (exit 1).
    const again = await cli(env(), 'deadletters', 'replay', dead!.id)
    expect(again.code).toBe(1)
    expect(JSON.parse(again.out)).toEqual({ ingest: [], notFound: [dead!.id] })
    expect((await ok(env(), 'deadletters', 'list')).ingest).toEqual([])
    const ingest = new Queue<IngestJobData>(INGEST_QUEUE, { connection: redis.duplicate(), prefix: QUEUE_PREFIX })
    try {
      const waiting = await ingest.getJobs(['waiting', 'delayed', 'prioritized'])
      expect(waiting.map((j) => ({ batchId: j.data.batchId, events: eventCountOfJob(j.data), replay: j.data.replay }))).toEqual([
        { batchId: dead!.batchId, events: 2, replay: true },
      ])
    } finally {
      await ingest.close()
      await (ingest.opts.connection as RedisClient).quit()
    }

    sink.failing = false
    worker = startIngestWorker({ connection: blocking, sink, logger, concurrency: 1 })
    try {
      const stored = async () =>
        (await history.store.query<{ id: string }>(`SELECT event_id AS id FROM usage_events FINAL WHERE project_id = '${projectId}' ORDER BY id`)).map(
          (r) => r.id,
        )
      await until('the replayed events are stored', async () => (await stored()).length === 2)
      expect(await stored()).toEqual(['e-1', 'e-2'])
    } finally {
      await worker.close()
      await events.close()
    }
    expect(await listDeadLetters({ connection: redis, deadLetterQueue: DEAD_LETTER_QUEUE })).toEqual([])
  })

  test('a webhook delivery that failed every attempt is listed with --project, replayed once under its delivery id, then delivered', async () => {
    const projectId = `p-${uniquePrefix()}`
    const webhooks = new WebhookService(redis, systemClock)
    const endpoint = await webhooks.upsert(projectId, { url: await deadUrl(), events: ['limit.crossed'] })
    expect(endpoint.ok).toBe(true)
    const endpointId = endpoint.ok ? endpoint.value.id : ''
    const options = { ...DEFAULT_NOTIFICATION_OPTIONS, attempts: 1, backoffMs: 0, timeoutMs: 2_000 }
    const notifications = new Notifications(redis.duplicate(), logger)
    let worker = startNotificationWorker({ connection: blocking, webhooks, clock: systemClock, logger, options })
    try {
      notifications.limitCrossed({
        projectId,
        budgetKey: 'agent',
        crossed: [{ limitId: 'daily', enforce: 'soft', window: 'day', amount: '10', consumed: '12' }],
        at: Date.now(),
      })
      await until('the delivery fails every attempt', async () => {
        const failures = await webhooks.failures(projectId, 10)
        return failures.ok && failures.value.failures.length === 1
      })
    } finally {
      await worker.close()
      await notifications.close()
    }

    const listed = await ok<{ ingest: unknown[]; webhooks: { deliveryId: string; endpointId: string; type: string }[] }>(
      env(),
      'deadletters',
      'list',
      '--project',
      projectId,
    )
    expect(listed.webhooks).toEqual([expect.objectContaining({ endpointId, type: 'limit.crossed', deliveryId: expect.stringMatching(/^dlv_/) })])
    const { deliveryId } = listed.webhooks[0]!
    // Without --project, a delivery id cannot be found: usage.
    expect((await cli(env(), 'deadletters', 'replay', deliveryId)).code).toBe(2)

    const receiver = await startReceiver(200)
    try {
      expect((await webhooks.upsert(projectId, { id: endpointId, url: receiver.url, events: ['limit.crossed'] })).ok).toBe(true)
      expect(await ok(env(), 'deadletters', 'replay', deliveryId, '--project', projectId)).toEqual({ ingest: [], webhooks: [deliveryId] })
      const again = await cli(env(), 'deadletters', 'replay', deliveryId, '--project', projectId)
      expect(again.code).toBe(1)
      expect(JSON.parse(again.out)).toEqual({ ingest: [], webhooks: [], notFound: [deliveryId] })
      expect((await ok(env(), 'deadletters', 'list', '--project', projectId)).webhooks).toEqual([])

      worker = startNotificationWorker({ connection: blocking, webhooks, clock: systemClock, logger, options })
      try {
        await until('the replayed delivery arrives', async () => receiver.received.length >= 1)
        await until('the delivery queue is drained', async () => {
          const queue = new Queue(options.deliveryQueueName, { connection: redis.duplicate(), prefix: QUEUE_PREFIX })
          try {
            const counts = await queue.getJobCounts('waiting', 'active', 'delayed')
            return Object.values(counts).every((n) => n === 0)
          } finally {
            await queue.close()
            await (queue.opts.connection as RedisClient).quit()
          }
        })
      } finally {
        await worker.close()
      }
      expect(receiver.received.map((r) => r.headers['x-metering-delivery'])).toEqual([deliveryId])
      expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({ type: 'limit.crossed', projectId })
    } finally {
      await receiver.close()
    }
  })
})

describe('invoices and sql on the ClickHouse server', () => {
  const database = `test_cli_${randomBytes(6).toString('hex')}`
  let history: TestStore
  const env = () => ({ REDIS_URL: inject('redisUrl'), CLICKHOUSE_URL: inject('clickhouseUrl'), CLICKHOUSE_DATABASE: database })

  beforeAll(async () => {
    history = await openTestStore('server', database, { migrate: true })
    await history.store.exec(`CREATE TABLE ${database}.numbers_cli (n UInt32, label String) ENGINE = MergeTree ORDER BY n`)
    await history.store.insert(`${database}.numbers_cli`, [
      { n: 1, label: 'one' },
      { n: 2, label: 'two' },
      { n: 3, label: 'three; or "3"' },
    ])
  })
  afterAll(async () => {
    await history?.close()
  })

  test('invoices close (idempotent), list and show: the ended monthly cycles of a subscription', async () => {
    const now = new Date()
    const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 2, 1)
    const cycles = [0, 1].map((i) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 2 + i, 1))
    const document = path.join(dataDir, 'invoices-catalog.json')
    await writeFile(
      document,
      JSON.stringify({
        features: [{ slug: 'seats', title: 'Seats', unitOfMeasure: 'seats' }],
        plans: [{ slug: 'basic', title: 'Basic' }],
        planVersions: [
          {
            plan: 'basic',
            version: 1,
            status: 'published',
            title: 'Basic',
            currency: 'USD',
            whenToBill: 'pay_in_arrear',
            billingConfig: { billingInterval: 'month' },
            features: [{ featureSlug: 'seats', featureType: 'flat', config: { price: '10' } }],
          },
        ],
        customers: [{ id: 'acme' }],
        subscriptions: [{ id: 'sub-acme', customerId: 'acme', phases: [{ plan: 'basic', version: 1, startAt: start }] }],
      }),
    )
    const { projectId } = await ok(env(), 'project', 'create', '--name', 'cli-invoices')
    await ok(env(), 'apply', document, '--project', projectId)

    const closed = await ok<{ created: string[]; existing: number; errors: unknown[] }>(env(), 'invoices', 'close', '--project', projectId)
    expect(closed.errors).toEqual([])
    expect(closed.created).toHaveLength(2)
    // Again: every ended cycle has its invoice (the subscription's cursor is past them), so nothing is created.
    expect(await ok(env(), 'invoices', 'close', '--project', projectId)).toMatchObject({ created: [], finalized: [], errors: [] })

    const listed = await ok<{ invoices: { id: string; statement_start_at: number; customer_id: string }[]; nextCursor: string | null }>(
      env(),
      'invoices',
      'list',
      '--project',
      projectId,
      '--customer',
      'acme',
    )
    expect(listed.nextCursor).toBeNull()
    expect(listed.invoices.map((i) => i.statement_start_at)).toEqual([...cycles].reverse())
    expect(listed.invoices.map((i) => i.id).sort()).toEqual([...closed.created].sort())
    const page = await ok<{ invoices: unknown[]; nextCursor: string | null }>(env(), 'invoices', 'list', '--project', projectId, '--limit', '1')
    expect(page.invoices).toHaveLength(1)
    expect(page.nextCursor).toEqual(expect.any(String))

    const shown = await ok<{ invoice: { id: string; currency: string; customer_id: string }; lines: { kind: string }[] }>(
      env(),
      'invoices',
      'show',
      listed.invoices[0]!.id,
      '--project',
      projectId,
    )
    expect(shown.invoice).toMatchObject({ id: listed.invoices[0]!.id, currency: 'USD', customer_id: 'acme' })
    expect(shown.lines.length).toBeGreaterThan(0)
    const missing = await cli(env(), 'invoices', 'show', 'inv_000000000000000000000000', '--project', projectId)
    expect(missing.code).toBe(1)
    expect(missing.err).toContain('inv_000000000000000000000000')
  })

  test('sql prints the rows as JSON lines or a table (the real process)', async () => {
    const query = 'SELECT n, label FROM numbers_cli ORDER BY n'
    const [json, tableRun] = await Promise.all([spawnCli(env(), 'sql', query, '--format', 'json'), spawnCli(env(), 'sql', `${query};`, '--format', 'table')])
    expect(json.code, json.err).toBe(0)
    expect(
      json.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { n: 1, label: 'one' },
      { n: 2, label: 'two' },
      { n: 3, label: 'three; or "3"' },
    ])
    expect(tableRun.code, tableRun.err).toBe(0)
    expect(tableRun.out.split('\n').slice(0, 5)).toEqual(['n | label', '--+--------------', '1 | one', '2 | two', '3 | three; or "3"'])
    const truncated = await cli(env(), 'sql', query, '--max-rows', '2', '--format', 'json')
    expect(truncated.code).toBe(0)
    expect(truncated.out.trim().split('\n')).toHaveLength(2)
    expect(truncated.err).toContain('truncated')
  })

  test.each([
    ["INSERT INTO numbers_cli VALUES (9, 'nine')", 'starts with INSERT'],
    ['DROP TABLE numbers_cli', 'starts with DROP'],
    ['SELECT 1; DROP TABLE numbers_cli', 'One statement at a time'],
    ["SELECT n FROM numbers_cli INTO OUTFILE '/tmp/cli-out.tsv'", 'INTO OUTFILE'],
    ['SELECT n FROM numbers_cli SETTINGS readonly = 0', 'SETTINGS'],
    ['SELECT n FROM numbers_cli FORMAT TSV', 'FORMAT'],
    // Passes the check; the server itself refuses it (readonly = 1 forbids table functions).
    ["SELECT * FROM file('x.tsv', TSV, 'a String')", 'readonly'],
  ])('a write (%s) is refused: exit 1, and nothing changed', async (query, why) => {
    const run = await cli(env(), 'sql', query)
    expect(run.code, run.out).toBe(1)
    expect(run.out).toBe('')
    expect(run.err).toContain('not_read_only')
    expect(run.err).toContain(why)
    expect(await history.store.query(`SELECT count() AS rows FROM ${database}.numbers_cli`)).toEqual([{ rows: '3' }])
  })

  test('a query ClickHouse rejects is exit 1 with its message', async () => {
    const run = await cli(env(), 'sql', 'SELECT nope FROM numbers_cli')
    expect(run.code).toBe(1)
    expect(run.err).toContain('query_failed')
    expect(run.err).toMatch(/nope/)
  })
})
