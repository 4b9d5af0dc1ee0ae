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

-- The hot path: the common authorize, read and decided from the stored bytes with no table per
-- limit and no queue of writes, when the key is new, no window rolls and no hold is due. A hold
-- changes no limit's counters, so st is written as its first 4 doubles anew and the rest of its
-- bytes as they were. It answers what the general path would, in the same order of precedence;
-- a call it cannot decide (a replay or conflict, a window to roll, holds to expire, no budget)
-- leaves the loop by `break`, having written nothing, for the general path below.
repeat
  local key = KEYS[1]
  local f = redis.call('HMGET', key, 'num', 'st', 'cfg', 'i:' .. idem)
  if not f[1] or f[4] then break end
  local c, st = decodeNum(f[1]), f[2]
  local n = c.n
  local v = { struct.unpack(doubles(4 + 4 * n), st) }
  local hh, hl, nexp = v[2], v[3], v[4]
  if nexp >= 0 and nexp <= now then break end
  local roll = false
  for i = 1, n do
    local pe = v[i * 4 + 4]
    roll = roll or (pe >= 0 and now >= pe)
  end
  if roll then break end
  if c.closes >= 0 and c.closes <= now then return { 'budget_closed', f[3], '', 0, struct.unpack(replyFormat(n), st) } end
  local ttl = (ttlSent >= 0) and ttlSent or c.dttl
  if ttl > c.mttl then return { 'ttl_exceeds_max', f[3], '', 3, '', '', c.mttl, struct.unpack(replyFormat(n), st) } end
  -- fitsHardLimits, then pairRoom, on the counters as stored.
  local th, tl = moneyAdd(hh, hl, ah, al)
  local fits, room = true, hh + ah < HI_ROOM
  for i = 1, n do
    local at, l = i * 4, c[i]
    local ch, cl = v[at + 1], v[at + 2]
    if l.hard then
      local xh, xl = moneyAdd(ch, cl, th, tl)
      fits = fits and moneyCmp(xh, xl, l.ah, l.al) <= 0
    end
    room = room and ch + hh + ah < HI_ROOM
  end
  if not fits then return { 'budget_exceeded', f[3], '', 0, struct.unpack(replyFormat(n), st) } end
  if not room then return { 'amount_overflow', f[3], '', 0, struct.unpack(replyFormat(n), st) } end

  local seq = nextNumber(v[1], now)
  local id = int(seq)
  local expiresAt = now + ttl
  if nexp < 0 or expiresAt < nexp then nexp = expiresAt end
  st = struct.pack('<dddd', seq, th, tl, nexp) .. string.sub(st, 33)
  -- The same fields as the general path writes (packHold's layout, the idempotency record).
  redis.call('HSET', key, 'h' .. id, struct.pack('<dddddd', OPEN, ah, al, expiresAt, 0, 0) .. idem,
    'i:' .. idem, struct.pack('<ddddddd', 1, seq, ah, al, ttlSent, expiresAt, ttl), 'st', st)
  -- A score may pass as a number: Redis formats it exactly (an integer below 2^53).
  redis.call('ZADD', KEYS[2], expiresAt, id)
  return { 'ok', f[3], '', 3, seq, expiresAt, ttl, struct.unpack(replyFormat(n), st) }
until true

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
