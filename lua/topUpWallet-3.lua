-- Cash into a customer's wallet, once per idempotency key.
-- KEYS: 1 wallet hash, 2 credits hash, 3 journal list
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 idempotencyKey, 5 currency, 6 amount hi, 7 amount lo,
--       8 request fingerprint
-- Returns walletReply with status 'ok' | 'replayed' | 'idempotency_conflict' | 'currency_mismatch'.
-- src/wallet/errors.ts translates the refusing statuses.
--@include money
--@include wallet
local w = walletLoad(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
walletExpire(w)
local recordField = 't:' .. ARGV[4]
local record = redis.call('HGET', KEYS[1], recordField)
local status = 'ok'
if record then
  status = record == ARGV[8] and 'replayed' or 'idempotency_conflict'
elseif w.cur ~= '' and w.cur ~= ARGV[5] then
  status = 'currency_mismatch'
else
  local h, l = tonumber(ARGV[6]), tonumber(ARGV[7])
  w.cur = ARGV[5]
  w.ah, w.al = moneyAdd(w.ah, w.al, h, l)
  w.changed = true
  walletRow(w, 'topup:' .. ARGV[2] .. ':' .. ARGV[4], 'top_up', 'cash_wallet', '', h, l, '', '', ARGV[4])
  redis.call('HSET', KEYS[1], recordField, ARGV[8])
end
walletSave(w)
return walletReply(w, status)
