--[[
  Settles or releases a hold.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] hold number, ARGV[3] 'settle' | 'release',
  ARGV[4] final usage hi, ARGV[5] final usage lo (settle only), ARGV[6] retentionMs
  Returns { 'budget_not_found' } or a budget reply whose status is
  ok | replayed | hold_not_found | hold_already_settled | hold_already_released | hold_expired |
  exceeds_hold_amount, with s = { amount hi, amount lo, expiresAt, state, settled hi, settled lo }
  (state: 1 open, 2 settled, 3 released, 4 expired).
  An expired hold was settled at its full amount: settling it again for exactly that amount
  replays, any other amount or a release is hold_expired. A hold whose deadline passed before
  the sweep reached it is expired first, by the same rule.
  src/budgets/errors.ts translates the refusing statuses.
]]
--@include money
--@include window
--@include budget

local now = tonumber(ARGV[1])
local id, action = ARGV[2], ARGV[3]
local uh, ul = tonumber(ARGV[4]), tonumber(ARGV[5])
local retention = tonumber(ARGV[6])

local b = touchBudget(KEYS, now, retention, 'h' .. id)
if b == nil then return { 'budget_not_found' } end

-- HMGET gives false for a missing field.
local h = b.closed[id] or (b.extra and unpackHold(b.extra)) or nil
local function answer(status)
  saveBudget(b, KEYS[1])
  if h == nil then return budgetReply(b, status, {}) end
  return budgetReply(b, status, { h.hi, h.lo, h.exp, h.state, h.shi, h.slo })
end
if h == nil then return answer('hold_not_found') end

if h.state == OPEN and h.exp <= now then
  closeHold(b, KEYS, id, h, EXPIRED, h.hi, h.lo, h.exp, now, retention)
  b.later[#b.later + 1] = { 'ZREM', KEYS[2], id }
end

if h.state == OPEN then
  if action == 'release' then
    closeHold(b, KEYS, id, h, RELEASED, nil, nil, nil, now, retention)
  else
    if moneyCmp(uh, ul, h.hi, h.lo) > 0 then return answer('exceeds_hold_amount') end
    closeHold(b, KEYS, id, h, SETTLED, uh, ul, nil, now, retention)
  end
  b.later[#b.later + 1] = { 'ZREM', KEYS[2], id }
  return answer('ok')
end

if h.state == RELEASED then
  if action == 'release' then return answer('replayed') end
  return answer('hold_already_released')
end
if action == 'settle' and moneyCmp(uh, ul, h.shi, h.slo) == 0 then return answer('replayed') end
if h.state == EXPIRED then return answer('hold_expired') end
return answer('hold_already_settled')
