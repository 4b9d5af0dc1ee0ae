-- A credit into a customer's wallet, once per idempotency key.
-- KEYS: 1 wallet hash, 2 credits hash, 3 journal list, 4 the project's wallet/run counters hash
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 idempotencyKey, 5 currency, 6 amount hi, 7 amount lo,
--       8 source, 9 priority, 10 expiresAtMs (0: never), 11 request fingerprint
-- Returns the credit id (cr_<n>: walletNextId in includes/wallet.lua), then walletReply with status
-- 'ok' | 'replayed' | 'idempotency_conflict' | 'currency_mismatch'. src/wallet/errors.ts translates
-- the refusing statuses.
--@include money
--@include wallet
local w = walletLoad(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
walletExpire(w)
local recordField = 'g:' .. ARGV[4]
local record = redis.call('HGET', KEYS[1], recordField)
local status, creditId = 'ok', ''
if record then
  local id, fingerprint = string.match(record, '^([^|]*)|(.*)$')
  creditId = id
  status = fingerprint == ARGV[11] and 'replayed' or 'idempotency_conflict'
elseif w.cur ~= '' and w.cur ~= ARGV[5] then
  status = 'currency_mismatch'
else
  local h, l = tonumber(ARGV[6]), tonumber(ARGV[7])
  creditId = walletNextId(KEYS[4], 'credit', 'cr_', w.now)
  w.cur = ARGV[5]
  w.changed = true
  local c = {
    id = creditId, seq = tonumber(string.match(creditId, '(%d+)$')), source = ARGV[8], priority = tonumber(ARGV[9]), createdAt = w.now, expiresAt = tonumber(ARGV[10]),
    ih = h, il = l, ah = h, al = l, hh = 0, hl = 0,
  }
  w.byId[creditId] = c
  w.credits[#w.credits + 1] = c
  table.sort(w.credits, walletCreditBefore)
  w.dirty[creditId] = true
  walletRow(w, 'grant:' .. creditId, 'credit_grant', c.source, creditId, h, l, '', '', ARGV[4])
  redis.call('HSET', KEYS[1], recordField, creditId .. '|' .. ARGV[11])
end
walletSave(w)
local reply = walletReply(w, status)
table.insert(reply, 1, creditId)
return reply
