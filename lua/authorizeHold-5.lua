--[[
  Authorizes a hold: reserves `amount` against every hard limit of the budget, or denies it.
  KEYS[1] budget hash, KEYS[2] holds hash, KEYS[3] open-hold index, KEYS[4] purge index,
  KEYS[5] the idempotency record of this request
  ARGV[1] nowMs, ARGV[2] amount hi, ARGV[3] amount lo,
  ARGV[4] ttlMs as the caller sent it ('' = the budget's default), ARGV[5] retentionMs
  Returns { 'budget_not_found' } or a budget reply (includes/budget.lua) whose status is
  ok | replayed | idempotency_conflict | budget_closed | ttl_exceeds_max | budget_exceeded,
  with s = { holdId, amount hi, amount lo, expiresAt, ttlMs } for ok and replayed.
  Precedence: a replay answers even when the budget has closed since.
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local ah, al = tonumber(ARGV[2]), tonumber(ARGV[3])
local ttlArg, retention = ARGV[4], tonumber(ARGV[5])

local b = touchBudget(KEYS, now, retention)
if b == nil then return { 'budget_not_found' } end

local function answer(status, s)
  saveBudget(b, KEYS[1])
  return budgetReply(b, status, s or {})
end

local prior = redis.call('GET', KEYS[5])
if prior then
  local op, id, phi, plo, pttl, pexp, pttlMs = string.match(prior, '^(%a)|(%d+)|(%d+)|(%d+)|(%d*)|(%d+)|(%d+)$')
  if op ~= 'a' or tonumber(phi) ~= ah or tonumber(plo) ~= al or pttl ~= ttlArg then
    return answer('idempotency_conflict')
  end
  return answer('replayed', { id, phi, plo, pexp, pttlMs })
end

if b.closes ~= '' and tonumber(b.closes) <= now then return answer('budget_closed') end

local ttl = b.dttl
if ttlArg ~= '' then ttl = tonumber(ttlArg) end
if ttl > b.mttl then return answer('ttl_exceeds_max', { '', '', '', '', int(b.mttl) }) end

for _, l in ipairs(b.limits) do
  if l.e == 'hard' then
    local th, tl = moneyAdd(l.ch, l.cl, b.hh, b.hl)
    th, tl = moneyAdd(th, tl, ah, al)
    if moneyCmp(th, tl, l.ah, l.al) > 0 then return answer('budget_exceeded') end
  end
end

b.seq = b.seq + 1
local id = int(b.seq)
local expiresAt = now + ttl
b.hh, b.hl = moneyAdd(b.hh, b.hl, ah, al)
if b.nexp == nil or expiresAt < b.nexp then b.nexp = expiresAt end
b.dirty = true
redis.call('HSET', KEYS[2], id, holdRecord({ state = 'o', hi = ah, lo = al, exp = expiresAt, shi = 0, slo = 0 }))
redis.call('ZADD', KEYS[3], int(expiresAt), id)
redis.call('SET', KEYS[5], 'a|' .. id .. '|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. ttlArg .. '|' .. int(expiresAt) .. '|' .. int(ttl),
  'PX', int(ttl + retention))
return answer('ok', { id, ARGV[2], ARGV[3], int(expiresAt), int(ttl) })
