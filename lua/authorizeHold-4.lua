--[[
  Authorizes a hold: reserves `amount` against every hard limit of the budget, or denies it.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] amount hi, ARGV[3] amount lo,
  ARGV[4] ttlMs as the caller sent it ('' = the budget's default), ARGV[5] retentionMs,
  ARGV[6] idempotency key
  Returns { 'budget_not_found' } or a budget reply (includes/budget.lua) whose status is
  ok | replayed | idempotency_conflict | budget_closed | ttl_exceeds_max | budget_exceeded |
  amount_overflow (the hold would take what is held, or a limit's consumed + held, past an exact
  money pair: pairRoom in includes/budget.lua), with s = { holdId, expiresAt, ttlMs } for ok and
  replayed (holdId: the n of h_<n>, from nextNumber in includes/budget.lua: it only grows, from at
  least nowMs × 1000), s = { '', '', maxTtlMs } for ttl_exceeds_max. A replay answers even when
  the budget has closed since. src/budgets/errors.ts translates the refusing statuses.
  Only ok writes an idempotency record (field i:<key>, forgotten with its hold's record).
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local ah, al = tonumber(ARGV[2]), tonumber(ARGV[3])
local ttlSent, retention, idem = tonumber(ARGV[4]) or -1, tonumber(ARGV[5]), ARGV[6]

local b = touchBudget(KEYS, now, retention, 'i:' .. idem)
if b == nil then return { 'budget_not_found' } end

local function answer(status, s)
  saveBudget(b, KEYS[1])
  return budgetReply(b, status, s or {})
end

local prior = b.extra
if prior then
  if #prior ~= 56 then return answer('idempotency_conflict') end
  local op, id, phi, plo, pttl, pexp, pttlMs = struct.unpack('<ddddddd', prior)
  if op ~= 1 or phi ~= ah or plo ~= al or pttl ~= ttlSent then return answer('idempotency_conflict') end
  return answer('replayed', { id, pexp, pttlMs })
end

if b.closes >= 0 and b.closes <= now then return answer('budget_closed') end

local ttl = (ttlSent >= 0) and ttlSent or b.dttl
if ttl > b.mttl then return answer('ttl_exceeds_max', { '', '', b.mttl }) end
if not fitsHardLimits(b, ah, al) then return answer('budget_exceeded') end
if not pairRoom(b, ah) then return answer('amount_overflow') end

b.seq = nextNumber(b.seq, now)
local id = int(b.seq)
local expiresAt = now + ttl
b.hh, b.hl = moneyAdd(b.hh, b.hl, ah, al)
if b.nexp < 0 or expiresAt < b.nexp then b.nexp = expiresAt end
b.dirty = true
-- Appended: holds expired on the way have their records in b.writes already.
local w = b.writes
w[#w + 1] = 'h' .. id
w[#w + 1] = struct.pack('<dddddd', OPEN, ah, al, expiresAt, 0, 0) .. idem -- packHold's layout
w[#w + 1] = 'i:' .. idem
w[#w + 1] = struct.pack('<ddddddd', 1, b.seq, ah, al, ttlSent, expiresAt, ttl)
b.later[#b.later + 1] = { 'ZADD', KEYS[2], int(expiresAt), id }
return answer('ok', { b.seq, expiresAt, ttl })
