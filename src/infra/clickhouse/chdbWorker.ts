// The child process that owns the chDB Session. chDB runs ClickHouse inside
// the process that loads it, and its calls are synchronous and heavy (a big
// query or insert holds the calling thread for as long as it runs), so the
// gateway never loads it: src/infra/clickhouse/embedded.ts forks this module and
// talks to it over the IPC channel. Requests run one at a time, in order.
//
// A child process and not a worker thread: chdb 3.4's addon crashes the whole
// process (SIGSEGV) whenever a worker thread that loaded it exits, even after
// Session.close(), so a worker thread would crash the gateway at every
// shutdown and every restart. A child also contains any crash of the engine:
// the gateway rejects what was pending and forks a new one.

import { Session } from 'chdb'

export interface ChdbWorkerData {
  path: string
  database: string
}

export type ChdbRequest =
  | { id: number; op: 'exec'; sql: string }
  | { id: number; op: 'query'; sql: string }
  | { id: number; op: 'insert'; table: string; columns: string[]; body: string; settings: Record<string, string | number> }
  | { id: number; op: 'close' }

export type ChdbResponse =
  | { id: number; ok: true; text?: string }
  | { id: number; ok: false; message: string }
  | { id: 0; ready: true; version: string }
  | { id: 0; ready: false; message: string }

const send = (msg: ChdbResponse): void => {
  process.send?.(msg)
}

if (process.send === undefined) throw new Error('chdbWorker.ts runs only as a forked child (see embedded.ts)')
const { path, database } = JSON.parse(process.env.METERING_CHDB_WORKER ?? '{}') as ChdbWorkerData

let session: Session | undefined
try {
  session = new Session(path)
  // The session keeps USE and SET for its lifetime. 64-bit integers quoted in
  // JSON as 18.16 does by default, so both backends answer the same shapes.
  // `database` was checked by sqlIdent() in embedded.ts.
  session.query(`CREATE DATABASE IF NOT EXISTS ${database}`, 'TSV')
  session.query(`USE ${database}`, 'TSV')
  session.query('SET output_format_json_quote_64bit_integers = 1', 'TSV')
  const version = session.query('SELECT version()', 'TSV').trim()
  send({ id: 0, ready: true, version })
} catch (err) {
  send({ id: 0, ready: false, message: errorMessage(err) })
  shutdown(1)
}

let chain: Promise<void> = Promise.resolve()
process.on('message', (req: ChdbRequest) => {
  chain = chain.then(() => handle(req))
})
// The parent is gone (it exited, crashed or was killed): close the engine
// cleanly and leave, so no orphan keeps the data directory open.
process.on('disconnect', () => {
  chain = chain.then(() => shutdown(0))
})

async function handle(req: ChdbRequest): Promise<void> {
  const s = session
  if (s === undefined) return send({ id: req.id, ok: false, message: 'chDB session is closed' })
  let res: ChdbResponse
  try {
    switch (req.op) {
      case 'exec':
        s.query(req.sql, 'TSV')
        res = { id: req.id, ok: true }
        break
      case 'query':
        res = { id: req.id, ok: true, text: s.query(req.sql, 'JSONEachRow') }
        break
      case 'insert':
        // The payload goes to the engine's own TSV parser as one INSERT.
        await s.insert({ table: req.table, values: req.body, format: 'TSV', columns: req.columns, settings: req.settings })
        res = { id: req.id, ok: true }
        break
      case 'close':
        send({ id: req.id, ok: true })
        return shutdown(0)
    }
  } catch (err) {
    res = { id: req.id, ok: false, message: errorMessage(err) }
  }
  send(res)
}

function shutdown(code: number): void {
  const s = session
  session = undefined
  try {
    s?.close()
  } finally {
    if (process.connected) process.disconnect()
    process.exitCode = code
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
