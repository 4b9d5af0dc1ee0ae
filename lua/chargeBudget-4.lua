--[[
  Charges or records usage against a budget without a hold.
  A charge is immediate consumption and is denied when a hard limit cannot take it (and on a
  closed budget); a record reports usage after the fact and is never denied, the only way
  past a hard limit.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] amount hi, ARGV[3] amount lo, ARGV[4] 'charge' | 'record',
  ARGV[5] retentionMs, ARGV[6] idempotency key
  Returns { 'budget_not_found' } or a budget reply whose status is
  ok | replayed | idempotency_conflict | budget_closed | budget_exceeded | amount_overflow
  (budget_closed and budget_exceeded for a charge only; amount_overflow: the amount would take a
  limit's consumed + held past an exact money pair, pairRoom in includes/budget.lua).
  src/budgets/errors.ts translates the refusing statuses.
  Only ok writes an idempotency record (field i:<key>: 2 charge or 3 record, amount hi, lo),
  forgotten after the retention. ok also appends a budget_journal row (kind charge | record).
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local ah, al = tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, retention, idem = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local op = (mode == 'charge') and 2 or 3

local b = touchBudget(KEYS, now, retention, 'i:' .. idem)
if b == nil then return { 'budget_not_found' } end

local function answer(status)
  saveBudget(b, KEYS[1])
  return budgetReply(b, status, {})
end

local prior = b.extra
if prior then
  if #prior == 24 then
    local pop, phi, plo = struct.unpack('<ddd', prior)
    if pop == op and phi == ah and plo == al then return answer('replayed') end
  end
  return answer('idempotency_conflict')
end

if mode == 'charge' then
  if b.closes >= 0 and b.closes <= now then return answer('budget_closed') end
  if not fitsHardLimits(b, ah, al) then return answer('budget_exceeded') end
end

if not pairRoom(b, ah) then return answer('amount_overflow') end
consume(b, ah, al, nil)
journalMovement(b, KEYS, mode, '', int(now) .. ':' .. idem, ah, al, now, idem)
b.writes[#b.writes + 1] = 'i:' .. idem
b.writes[#b.writes + 1] = struct.pack('<ddd', op, ah, al)
b.later[#b.later + 1] = { 'ZADD', KEYS[3], int(now + retention), 'i:' .. idem }
return answer('ok')
