--[[
  The background sweep's step for one budget: settles, at their full amount, up to ARGV[3]
  open holds whose deadline has passed, and forgets the records (closed holds, idempotency
  records) whose retention is over.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] retentionMs, ARGV[3] max holds per call
  Returns { 'budget_not_found' } or a budget reply with status ok and
  s = { holds expired, holds purged, next expiry (-1 = none) }.
]]
--@include money
--@include window
--@include budget

local now, retention, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = loadBudget(KEYS[1])
if b == nil then
  -- The budget is gone; its hold indexes go with it.
  redis.call('DEL', KEYS[2], KEYS[3])
  return { 'budget_not_found' }
end
rollWindows(b, now)
local expired = expireDue(b, KEYS, now, retention, max)
saveBudget(b, KEYS[1])
-- The purge index's members are the budget hash's field names.
local purge = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', int(now), 'LIMIT', 0, max)
if #purge > 0 then
  redis.call('HDEL', KEYS[1], unpack(purge))
  redis.call('ZREM', KEYS[3], unpack(purge))
end
return budgetReply(b, 'ok', { expired, #purge, b.nexp })
