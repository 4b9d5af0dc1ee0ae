import type { Balance, Crossed, Hold, HoldOutcome } from '../../../budgets/types.js'

/**
 * The answers of the hot budget routes written as text directly: the same bytes as
 * JSON.stringify of the same value (test/unit/budgets.json.test.ts checks it on random values),
 * in about two thirds of the time, since nothing walks the object generically. Field order is
 * the order the values are built in (src/budgets/service.ts, src/budgets/denial.ts).
 *
 * Strings whose bytes cannot need escaping are quoted as they are: amounts (formatUnits writes
 * only digits, '.' and '-'), hold ids (`h_` and digits), and the window, enforce and state names
 * (their literal types). Limit ids, chosen by users, go through `str`.
 */

/** A JSON number as JSON.stringify writes it (null when it is not finite). */
function num(n: number): string {
  return Number.isFinite(n) ? '' + n : 'null'
}

/** A string that needs no escaping when it is plain ASCII without `"` or `\`; JSON.stringify otherwise. */
const PLAIN = /^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/
function str(s: string): string {
  return PLAIN.test(s) ? '"' + s + '"' : JSON.stringify(s)
}

/** A string known to need no escaping (see above), quoted. */
function q(s: string): string {
  return '"' + s + '"'
}

export function balanceJson(b: Balance): string {
  let limits = ''
  for (const l of b.limits) {
    limits +=
      (limits === '' ? '{"id":' : ',{"id":') +
      str(l.id) +
      ',"window":' +
      q(l.window) +
      ',"enforce":' +
      q(l.enforce) +
      ',"amount":' +
      q(l.amount) +
      ',"consumed":' +
      q(l.consumed) +
      ',"held":' +
      q(l.held) +
      ',"remaining":' +
      q(l.remaining) +
      ',"resetsAt":' +
      (l.resetsAt === null ? 'null' : num(l.resetsAt)) +
      '}'
  }
  return '{"remaining":' + (b.remaining === null ? 'null' : q(b.remaining)) + ',"held":' + q(b.held) + ',"limits":[' + limits + '],"asOf":' + num(b.asOf) + '}'
}

function crossedJson(crossed: Crossed[]): string {
  let text = ''
  for (const c of crossed) {
    text +=
      (text === '' ? '{"limitId":' : ',{"limitId":') +
      str(c.limitId) +
      ',"enforce":' +
      q(c.enforce) +
      ',"window":' +
      q(c.window) +
      ',"amount":' +
      q(c.amount) +
      ',"consumed":' +
      q(c.consumed) +
      '}'
  }
  return '[' + text + ']'
}

/** POST /v1/budgets/authorize's answer. */
export function holdJson(h: Hold): string {
  return (
    '{"allowed":' +
    h.allowed +
    ',"holdId":' +
    q(h.holdId) +
    ',"amount":' +
    q(h.amount) +
    ',"expiresAt":' +
    num(h.expiresAt) +
    ',"replayed":' +
    h.replayed +
    ',"balance":' +
    balanceJson(h.balance) +
    '}'
  )
}

/** POST /v1/budgets/settle's and /release's answer: settledBy and settledAmount come last when set, as closeHold adds them. */
export function holdOutcomeJson(o: HoldOutcome): string {
  let text =
    '{"holdId":' +
    q(o.holdId) +
    ',"state":' +
    q(o.state) +
    ',"amount":' +
    q(o.amount) +
    ',"expiresAt":' +
    num(o.expiresAt) +
    ',"replayed":' +
    o.replayed +
    ',"balance":' +
    balanceJson(o.balance) +
    ',"crossed":' +
    crossedJson(o.crossed)
  if (o.settledBy !== undefined) text += ',"settledBy":' + q(o.settledBy)
  if (o.settledAmount !== undefined) text += ',"settledAmount":' + q(o.settledAmount)
  return text + '}'
}
