--[[
  Charges or records usage against a budget without a hold.
  A charge is immediate consumption and is denied when a hard limit cannot take it (and on a
  closed budget); a record reports usage after the fact and is never denied, the only way
  past a hard limit.
  KEYS[1] budget hash, KEYS[2] holds hash, KEYS[3] open-hold index, KEYS[4] purge index,
  KEYS[5] the idempotency record of this request
  ARGV[1] nowMs, ARGV[2] amount hi, ARGV[3] amount lo, ARGV[4] 'charge' | 'record', ARGV[5] retentionMs
  Returns { 'budget_not_found' } or a budget reply whose status is
  ok | replayed | idempotency_conflict | budget_closed | budget_exceeded, with s = { amount hi, amount lo }.
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local ah, al = tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, retention = ARGV[4], tonumber(ARGV[5])
local op = (mode == 'charge') and 'c' or 'r'

local b = touchBudget(KEYS, now, retention)
if b == nil then return { 'budget_not_found' } end

local function answer(status)
  saveBudget(b, KEYS[1])
  return budgetReply(b, status, { ARGV[2], ARGV[3] })
end

local prior = redis.call('GET', KEYS[5])
if prior then
  if prior == op .. '|' .. ARGV[2] .. '|' .. ARGV[3] then return answer('replayed') end
  return answer('idempotency_conflict')
end

if mode == 'charge' then
  if b.closes ~= '' and tonumber(b.closes) <= now then return answer('budget_closed') end
  for _, l in ipairs(b.limits) do
    if l.e == 'hard' then
      local th, tl = moneyAdd(l.ch, l.cl, b.hh, b.hl)
      th, tl = moneyAdd(th, tl, ah, al)
      if moneyCmp(th, tl, l.ah, l.al) > 0 then return answer('budget_exceeded') end
    end
  end
end

consume(b, ah, al, nil)
redis.call('SET', KEYS[5], op .. '|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', int(retention))
return answer('ok')
