// One FCALL carrying a turn's script calls (issue 11): when the lean connection (lean.ts) has
// more than one call in a turn's batch, it sends them as one `FCALL metering_multi_<version>`, a
// function of the library (scripts.ts) that runs each sub-call's function in order inside one
// script invocation and answers an array of their replies; the client hands each caller its own.
//
// The call on the wire: KEYS = every sub-call's keys, concatenated; ARGV = the number of sub-calls,
// then per sub-call its function name, its number of keys, its number of args, and its args.
//
// What each caller gets is what its own FCALL would have given: the reply converted to RESP by the
// same rules (a nested reply converts as a top-level one does; a nil reply is sent as `false`,
// which is a nil bulk string either way, so it does not end the array), and an error as an error
// reply of its own: an error reply a script returns (`redis.error_reply`) with the same message;
// an error a script raises (a Lua runtime error, a failed `redis.call`) is caught by `pcall`, so
// it neither undoes nor skips the other sub-calls — as with separate FCALLs, where a script that
// failed after writing keeps its writes — and comes back with Redis' message text ("ERR " before a
// Lua error, " script: <function>, on @user_function:<line>." after it; the line only when Lua put
// it in the message: a function has no `debug` library to find it for a failed `redis.call`, whose
// error reads "<Redis' error> script: <function>." — its code, e.g. WRONGTYPE, first as before).
//
// Only on a standalone server (the lean connection is never used for a Cluster, where one FCALL's
// keys must share a slot). Atomicity gets stronger, never weaker: the batch is one script.
// Durability is the same: one FCALL is one propagated set of effects, written (and fsynced with
// `appendfsync always`) before the reply. Redis runs a script at the time it started: a key that
// would expire between the first and the last sub-call of a batch counts as alive for all of them
// (microseconds; the batch is one atomic step).

/** The Lua of the multi function: `multi_functions` maps each registered name to its local function. */
export const MULTI_LUA = `
local function multi_error(failure, name)
  local text = failure
  if type(failure) == 'table' then text = failure.err end
  text = tostring(text)
  local line = string.match(text, '^user_function:(%d+):')
  if line then return { err = 'ERR ' .. text .. ' script: ' .. name .. ', on @user_function:' .. line .. '.' } end
  return { err = text .. ' script: ' .. name .. '.' }
end

local function multi(KEYS, ARGV)
  local replies = {}
  local at, from = 2, 0
  for i = 1, tonumber(ARGV[1]) do
    local name = ARGV[at]
    local nkeys, nargs = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    at = at + 3
    local keys, args = {}, {}
    for j = 1, nkeys do keys[j] = KEYS[from + j] end
    for j = 1, nargs do args[j] = ARGV[at + j - 1] end
    from = from + nkeys
    at = at + nargs
    local fn = multi_functions[name]
    if fn == nil then
      replies[i] = { err = 'ERR Function not found' }
    else
      local ok, reply = pcall(fn, keys, args)
      if not ok then reply = multi_error(reply, name) elseif reply == nil then reply = false end
      replies[i] = reply
    end
  end
  return replies
end
`

/** The library's multi function for `version`: its name and its Lua (after the script functions `locals`). */
export function multiFunction(version: string, functions: readonly { name: string; local: string }[]): { name: string; lua: string } {
  const table = functions.map(({ name, local }) => `  ['${name}'] = ${local},`).join('\n')
  return { name: `metering_multi_${version}`, lua: `local multi_functions = {\n${table}\n}\n${MULTI_LUA}` }
}

/** A script call waiting in a turn's batch. */
export interface TurnCall {
  fn: string
  keys: readonly string[]
  args: readonly (string | number)[]
  resolve(value: unknown): void
  reject(error: Error): void
}

const CRLF = '\r\n'
function bulk(text: string): string {
  return '$' + Buffer.byteLength(text) + CRLF + text + CRLF
}

/** The RESP text of one FCALL of `fn`. */
export function fcallText(fn: string, keys: readonly string[], args: readonly (string | number)[]): string {
  let text = '*' + (3 + keys.length + args.length) + CRLF + '$5\r\nFCALL\r\n' + bulk(fn) + bulk(String(keys.length))
  for (const key of keys) text += bulk(key)
  for (const arg of args) text += bulk(typeof arg === 'string' ? arg : String(arg))
  return text
}

/** The RESP text of one FCALL of the multi function `multi` carrying `calls`, in order. */
export function multiText(multi: string, calls: readonly TurnCall[]): string {
  let keyCount = 0
  let argCount = 1
  for (const call of calls) {
    keyCount += call.keys.length
    argCount += 3 + call.args.length
  }
  let text = '*' + (3 + keyCount + argCount) + CRLF + '$5\r\nFCALL\r\n' + bulk(multi) + bulk(String(keyCount))
  for (const call of calls) for (const key of call.keys) text += bulk(key)
  text += bulk(String(calls.length))
  for (const call of calls) {
    text += bulk(call.fn) + bulk(String(call.keys.length)) + bulk(String(call.args.length))
    for (const arg of call.args) text += bulk(typeof arg === 'string' ? arg : String(arg))
  }
  return text
}

/**
 * Hands each call its part of the multi function's reply: a sub-call's error reply (decoded by
 * the client as an `isError` value) rejects that call only. A reply of any other shape fails all.
 */
export function answerCalls(calls: readonly TurnCall[], reply: unknown, isError: (value: unknown) => value is Error): void {
  if (!Array.isArray(reply) || reply.length !== calls.length) {
    const error = new Error(`the multi call of ${calls.length} script calls got a reply of another shape`)
    for (const call of calls) call.reject(error)
    return
  }
  for (let i = 0; i < calls.length; i++) {
    const value: unknown = reply[i]
    if (isError(value)) calls[i]!.reject(value)
    else calls[i]!.resolve(value)
  }
}

/** Fails every call of a multi call with the error of the whole (timed out, connection closed, Function not found…). */
export function failCalls(calls: readonly TurnCall[], error: Error): void {
  for (const call of calls) call.reject(error)
}
