-- Pays an invoice from a customer's wallet: live credits in order, then cash, up to the amount.
-- Once per invoice: a rerun answers the first allocations and moves nothing.
-- KEYS: 1 wallet hash, 2 credits hash, 3 journal list
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 invoiceId, 5 currency, 6 amount hi, 7 amount lo
-- Returns { replayed 0|1, remaining hi, remaining lo, then per allocation: creditId ('' for
-- cash), source, hi, lo }. A wallet in another currency (or none) allocates nothing.
--@include money
--@include wallet
local recordField = 'inv:' .. ARGV[4]
local record = redis.call('HGET', KEYS[1], recordField)
if record then
  local reply = cjson.decode(record)
  reply[1] = 1
  return reply
end
local w = walletLoad(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
walletExpire(w)
local h, l = tonumber(ARGV[6]), tonumber(ARGV[7])
local allocs = {}
if w.cur == ARGV[5] then allocs, h, l = walletTake(w, h, l, true) end
local reply = { 0, walletText(0, h), walletText(0, l) }
for i, a in ipairs(allocs) do
  local kind = a[1] == '' and 'cash_use' or 'credit_use'
  walletRow(w, 'invoice:' .. ARGV[2] .. ':' .. ARGV[4] .. ':' .. i, kind, a[2], a[1], a[3], a[4], '', ARGV[4], ARGV[4])
  for _, v in ipairs({ a[1], a[2], walletText(0, a[3]), walletText(0, a[4]) }) do reply[#reply + 1] = v end
end
redis.call('HSET', KEYS[1], recordField, cjson.encode(reply))
walletSave(w)
return reply
