--[[
  Settles or releases a hold.
  KEYS[1] budget hash, KEYS[2] holds hash, KEYS[3] open-hold index, KEYS[4] purge index
  ARGV[1] nowMs, ARGV[2] hold number, ARGV[3] 'settle' | 'release',
  ARGV[4] final usage hi, ARGV[5] final usage lo (settle only), ARGV[6] retentionMs
  Returns { 'budget_not_found' } or a budget reply whose status is
  ok | replayed | hold_not_found | hold_already_settled | hold_already_released | hold_expired |
  exceeds_hold_amount, with s = { holdId, amount hi, amount lo, expiresAt, state, settled hi, settled lo }.
  An expired hold was settled at its full amount: settling it again for exactly that amount
  replays, any other amount or a release is hold_expired. A settle of an open hold whose
  deadline passed before the sweep reached it expires it first, by the same rule.
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local id, action = ARGV[2], ARGV[3]
local uh, ul = tonumber(ARGV[4]), tonumber(ARGV[5])
local retention = tonumber(ARGV[6])

local b = touchBudget(KEYS, now, retention)
if b == nil then return { 'budget_not_found' } end

local rec = redis.call('HGET', KEYS[2], id)
local h = rec and parseHold(rec)
local function answer(status)
  saveBudget(b, KEYS[1])
  if h == nil then return budgetReply(b, status, {}) end
  return budgetReply(b, status, { id, int(h.hi), int(h.lo), int(h.exp), h.state, int(h.shi), int(h.slo) })
end
if h == nil then return answer('hold_not_found') end

if h.state == 'o' and h.exp <= now then
  closeHold(b, KEYS, id, h, 'x', h.hi, h.lo, h.exp, now, retention)
  redis.call('ZREM', KEYS[3], id)
end

if h.state == 'o' then
  if action == 'release' then
    closeHold(b, KEYS, id, h, 'r', nil, nil, nil, now, retention)
  else
    if moneyCmp(uh, ul, h.hi, h.lo) > 0 then return answer('exceeds_hold_amount') end
    closeHold(b, KEYS, id, h, 's', uh, ul, nil, now, retention)
  end
  redis.call('ZREM', KEYS[3], id)
  return answer('ok')
end

if h.state == 'r' then
  if action == 'release' then return answer('replayed') end
  return answer('hold_already_released')
end
local sameUsage = action == 'settle' and moneyCmp(uh, ul, h.shi, h.slo) == 0
if sameUsage then return answer('replayed') end
if h.state == 'x' then return answer('hold_expired') end
return answer('hold_already_settled')
