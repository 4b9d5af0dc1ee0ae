// The embedded backend: chDB in a child process (./chdbWorker.ts owns the
// Session; see there why not a worker thread). This side only sends messages
// and awaits their answers, so a heavy query never blocks the gateway's event
// loop. If the child dies, every pending call is rejected and the next call
// forks a new one.
//
// chDB allows one process per data directory: in the embedded mode, only the
// gateway's process (and the workers it runs in-process) may open the store.

import { fork, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { ChdbRequest, ChdbResponse, ChdbWorkerData } from './chdbWorker.js'
import { encodeTsv, sqlIdent, sqlTable } from './sql.js'
import { withJsonFormat, parseJsonEachRow, type ClickHouseStore, type InsertOptions, type QueryOptions, type TsvRows } from './store.js'

type Pending = { resolve: (text: string | undefined) => void; reject: (err: Error) => void }
type Call = { op: 'exec'; sql: string } | { op: 'query'; sql: string } | Omit<Extract<ChdbRequest, { op: 'insert' }>, 'id'>

export class ChdbError extends Error {
  override name = 'ChdbError'
}

export async function openEmbeddedStore(options: { path: string; database: string }): Promise<EmbeddedStore> {
  await mkdir(options.path, { recursive: true })
  const store = new EmbeddedStore(options.path, sqlIdent(options.database))
  await store.ready()
  return store
}

/**
 * Forks the child: the compiled chdbWorker.js next to this file when there is
 * one, else the TS source through tsx's loader (resolved from here, so it
 * works whatever the cwd).
 */
function spawnWorker(data: ChdbWorkerData): ChildProcess {
  const js = new URL('./chdbWorker.js', import.meta.url)
  const compiled = existsSync(fileURLToPath(js))
  const entry = compiled ? js : new URL('./chdbWorker.ts', import.meta.url)
  const execArgv = compiled ? [] : ['--import', new URL('../../../node_modules/tsx/dist/loader.mjs', import.meta.url).href]
  return fork(fileURLToPath(entry), [], {
    execArgv,
    env: { ...process.env, METERING_CHDB_WORKER: JSON.stringify(data) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  })
}

export class EmbeddedStore implements ClickHouseStore {
  readonly kind = 'embedded' as const
  private child: ChildProcess | undefined
  private starting: Promise<ChildProcess> | undefined
  private readonly pending = new Map<number, Pending>()
  private nextId = 1
  private closed = false
  /** Children forked so far (1 after open; more after crashes). */
  starts = 0
  /** chDB's ClickHouse version, e.g. "26.7.2.1". */
  version = ''

  constructor(
    readonly path: string,
    readonly database: string,
  ) {}

  async ready(): Promise<void> {
    await this.getChild()
  }

  exec(sql: string): Promise<void> {
    return this.call({ op: 'exec', sql }).then(() => undefined)
  }

  async query<T>(sql: string, options: QueryOptions = {}): Promise<T[]> {
    // The session is shared, so these settings go in the query's SETTINGS clause (they end with
    // it), max_execution_time first: once readonly = 1 applies, no setting may change.
    const settings = [
      ...(options.maxExecutionSeconds !== undefined ? [`max_execution_time = ${Math.max(0, Math.floor(options.maxExecutionSeconds))}`] : []),
      ...(options.readonly ? ['readonly = 1'] : []),
    ]
    const text = settings.length > 0 ? `${sql.trim().replace(/;+$/, '')}\nSETTINGS ${settings.join(', ')}` : sql
    return parseJsonEachRow<T>((await this.call({ op: 'query', sql: withJsonFormat(text) })) ?? '')
  }

  async insert(table: string, rows: ReadonlyArray<Record<string, unknown>>, options?: InsertOptions): Promise<void> {
    if (rows.length === 0) return
    const { columns, body } = encodeTsv(rows)
    await this.insertTsv(table, columns, { body, rows: rows.length }, options)
  }

  async insertTsv(table: string, columns: readonly string[], { body, rows }: TsvRows, options?: InsertOptions): Promise<void> {
    if (rows === 0) return
    const settings: Record<string, string | number> = {}
    if (options?.dedupToken !== undefined) {
      settings.insert_deduplicate = 1
      settings.insert_deduplication_token = options.dedupToken
    }
    await this.call({ op: 'insert', table: sqlTable(table), columns: columns.map(sqlIdent), body, settings })
  }

  /** Lets queued calls finish, closes the Session, waits for the child to exit. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    const child = this.child ?? (await this.starting?.catch(() => undefined))
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    const id = this.nextId++
    this.pending.set(id, { resolve: () => undefined, reject: () => undefined })
    child.send({ id, op: 'close' } satisfies ChdbRequest)
    // It exits on its own once the Session is closed; SIGKILL only if it hangs.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    await exited
    clearTimeout(timer)
  }

  /** For tests: kills the child as a crash would (pending calls reject; the next call forks a new one). */
  async crashWorkerForTest(): Promise<void> {
    const child = this.child
    if (child === undefined) return
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.kill('SIGKILL')
    await exited
  }

  private async call(msg: Call): Promise<string | undefined> {
    if (this.closed) throw new ChdbError('ClickHouse store is closed')
    const child = await this.getChild()
    const id = this.nextId++
    return new Promise<string | undefined>((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      child.send({ id, ...msg } as ChdbRequest, (err) => {
        if (err === null || !this.pending.has(id)) return
        this.pending.delete(id)
        reject(new ChdbError(`cannot reach the chDB process: ${err.message}`, { cause: err }))
      })
    })
  }

  private getChild(): Promise<ChildProcess> {
    if (this.child !== undefined) return Promise.resolve(this.child)
    this.starting ??= this.startChild().finally(() => {
      this.starting = undefined
    })
    return this.starting
  }

  private startChild(): Promise<ChildProcess> {
    const child = spawnWorker({ path: this.path, database: this.database })
    this.starts++
    return new Promise<ChildProcess>((resolve, reject) => {
      let up = false
      child.on('message', (msg: ChdbResponse) => {
        if (msg.id === 0 && 'ready' in msg) {
          if (msg.ready) {
            up = true
            this.version = msg.version
            this.child = child
            resolve(child)
          } else {
            reject(new ChdbError(`chDB did not start at ${this.path}: ${msg.message}`))
          }
          return
        }
        const p = this.pending.get(msg.id)
        if (p === undefined) return
        this.pending.delete(msg.id)
        if ('ok' in msg && msg.ok) p.resolve(msg.text)
        else p.reject(new ChdbError('message' in msg ? msg.message : 'chDB call failed'))
      })
      let failed = false
      const fail = (err: Error): void => {
        if (failed) return
        failed = true
        if (this.child === child) this.child = undefined
        if (!up) reject(new ChdbError(`chDB process failed to start: ${err.message}`, { cause: err }))
        for (const [id, p] of this.pending) {
          this.pending.delete(id)
          p.reject(new ChdbError(`chDB process ended before answering: ${err.message}`, { cause: err }))
        }
      }
      child.on('error', fail)
      child.on('exit', (code, signal) => fail(new Error(signal ? `killed by ${signal}` : `exited with code ${code}`)))
    })
  }
}
