--[[
  Reads a budget and its balance, first applying what time has done (window resets, expiry).
  KEYS[1] budget hash, KEYS[2] holds hash, KEYS[3] open-hold index, KEYS[4] purge index
  ARGV[1] nowMs, ARGV[2] retentionMs
  Returns { 'budget_not_found' } or a budget reply with status ok and
  s = { unit, defaultTtlMs, maxTtlMs, closesAt }.
]]
--@include money
--@include window
--@include budget

local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local b = touchBudget(KEYS, now, retention)
if b == nil then return { 'budget_not_found' } end
saveBudget(b, KEYS[1])
return budgetReply(b, 'ok', { redis.call('HGET', KEYS[1], 'unit') or '', int(b.dttl), int(b.mttl), b.closes })
