// `npm run cli -- <command>`: the operators' commands (projects, keys, config documents, invoices,
// dead letters, read-only SQL on the usage history). The command table and its handlers are in
// ./cli/ (main.ts lists them); `npm run cli -- --help` prints them all.
import { runCli } from './cli/main.js'

runCli(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  isTty: process.stdout.isTTY === true,
}).then(
  (code) => {
    // Whatever a library left open (a timer, a socket), the command is over once its output is out.
    process.stdout.write('', () => process.stderr.write('', () => process.exit(code)))
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  },
)
