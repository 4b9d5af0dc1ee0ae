--[[
  Reads a budget and its balance, first applying what time has done (window resets, expiry).
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] retentionMs
  Returns { 'budget_not_found' } or a budget reply with status ok and
  s = { unit, defaultTtlMs, maxTtlMs, closesAt (-1 = never) }.
]]
--@include money
--@include window
--@include budget

local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local b = touchBudget(KEYS, now, retention, 'unit')
if b == nil then return { 'budget_not_found' } end
saveBudget(b, KEYS[1])
return budgetReply(b, 'ok', { b.extra or '', b.dttl, b.mttl, b.closes })
