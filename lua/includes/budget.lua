-- The budget record: one hash per budget, read with one HMGET of two packed fields, because
-- turning many hash fields into Lua values costs more than the rest of a call (measured:
-- HGETALL of 36 fields ~12 µs, HMGET of two fields plus string.match ~4 µs).
--   cfg = "dttl|mttl|closes;" then per limit "id|window|enforce|anchor|amount hi|amount lo;"
--   st  = "seq|held hi|held lo|nexp;" then per limit, in cfg's order, "consumed hi|consumed lo|period start;"
--   unit  (read only by get and upsert)
-- closes and anchor are '' when unset; nexp is a lower bound of the open holds' expiresAt, ''
-- when none is open. Limit ids, windows and numbers never contain '|' or ';'.
-- Holds live in a second hash (field = hold number, value = "state|hi|lo|expiresAt|shi|slo")
-- with state o (open), s (settled), r (released) or x (expired, settled at its full amount);
-- open holds are indexed by expiresAt in a sorted set, closed ones by purge time in another.
-- KEYS of every budget script start with: 1 budget hash, 2 holds hash, 3 open index, 4 purge index.

local function loadBudget(key)
  local f = redis.call('HMGET', key, 'cfg', 'st')
  local cfg, st = f[1], f[2]
  if not cfg then return nil end
  local dttl, mttl, closes, limitsCfg = string.match(cfg, '^(%d+)|(%d+)|(%d*);(.*)$')
  local seq, hh, hl, nexp, counters = string.match(st, '^(%d+)|(%d+)|(%d+)|(%d*);(.*)$')
  local b = {
    cfg = cfg, st = st, dttl = tonumber(dttl), mttl = tonumber(mttl), closes = closes,
    seq = tonumber(seq), hh = tonumber(hh), hl = tonumber(hl), nexp = tonumber(nexp),
    limits = {}, dirty = false,
  }
  local nextCounter = string.gmatch(counters, '(%d+)|(%d+)|(%-?%d*);')
  for id, w, e, an, ah, al in string.gmatch(limitsCfg, '([^|;]+)|(%a+)|(%a+)|(%d*)|(%d+)|(%d+);') do
    local ch, cl, ps = nextCounter()
    b.limits[#b.limits + 1] = {
      id = id, w = w, e = e, an = an, anchor = (an == '') and defaultAnchor(w) or tonumber(an),
      ah = tonumber(ah), al = tonumber(al),
      ch = tonumber(ch) or 0, cl = tonumber(cl) or 0, ps = tonumber(ps) or -1,
    }
  end
  return b
end

-- Moves every limit into the period containing now (resetting consumed when a new period
-- began) and remembers consumed at that point, so `crossed` covers all of this call's changes.
local function rollWindows(b, now)
  for _, l in ipairs(b.limits) do
    local start, finish = windowPeriod(l.w, l.anchor, now)
    if l.ps ~= start then
      l.ps, l.ch, l.cl = start, 0, 0
      b.dirty = true
    end
    l.resets, l.bh, l.bl = finish, l.ch, l.cl
  end
end

-- Usage is counted in the period current at `t` only: for a hold that expired in an earlier
-- period the usage belongs to a window that has already reset.
local function consume(b, h, l, t)
  for _, lim in ipairs(b.limits) do
    if t == nil or windowPeriod(lim.w, lim.anchor, t) == lim.ps then
      lim.ch, lim.cl = moneyAdd(lim.ch, lim.cl, h, l)
    end
  end
  b.dirty = true
end

local function parseHold(rec)
  local state, hi, lo, exp, shi, slo = string.match(rec, '^(%a)|(%d+)|(%d+)|(%d+)|(%d*)|(%d*)$')
  return { state = state, hi = tonumber(hi), lo = tonumber(lo), exp = tonumber(exp),
    shi = tonumber(shi) or 0, slo = tonumber(slo) or 0 }
end

local function holdRecord(h)
  return h.state .. '|' .. int(h.hi) .. '|' .. int(h.lo) .. '|' .. int(h.exp) .. '|' .. int(h.shi) .. '|' .. int(h.slo)
end

-- Settles, at their full amount, open holds whose deadline has passed (at most `max` per
-- call; the rest on the next touch or sweep). nexp spares the index lookup on most calls.
-- Closes an open hold: frees its held amount and records its final state. `usedAt` is when
-- the usage happened (now for a settle, the deadline for an expiry); nil usage = release.
local function closeHold(b, keys, id, h, state, uh, ul, usedAt, now, retentionMs)
  b.hh, b.hl = moneySub(b.hh, b.hl, h.hi, h.lo)
  if uh ~= nil then consume(b, uh, ul, usedAt) end
  h.state, h.shi, h.slo = state, uh or 0, ul or 0
  redis.call('HSET', keys[2], id, holdRecord(h))
  redis.call('ZADD', keys[4], int(now + retentionMs), id)
  b.dirty = true
end

local function expireDue(b, keys, now, retentionMs, max)
  if b.nexp == nil or b.nexp > now then return 0 end
  local due = redis.call('ZRANGEBYSCORE', keys[3], '-inf', int(now), 'LIMIT', 0, max)
  for _, id in ipairs(due) do
    local rec = redis.call('HGET', keys[2], id)
    if rec then
      local h = parseHold(rec)
      if h.state == 'o' then closeHold(b, keys, id, h, 'x', h.hi, h.lo, h.exp, now, retentionMs) end
    end
  end
  if #due > 0 then redis.call('ZREM', keys[3], unpack(due)) end
  local first = redis.call('ZRANGE', keys[3], 0, 0, 'WITHSCORES')
  b.nexp = tonumber(first[2])
  b.dirty = true
  return #due
end

local function packState(b)
  local parts = { int(b.seq), '|', int(b.hh), '|', int(b.hl), '|', b.nexp and int(b.nexp) or '', ';' }
  for _, l in ipairs(b.limits) do
    parts[#parts + 1] = int(l.ch) .. '|' .. int(l.cl) .. '|' .. int(l.ps) .. ';'
  end
  return table.concat(parts)
end

local function saveBudget(b, key)
  if b.dirty then
    b.st = packState(b)
    b.dirty = false
    redis.call('HSET', key, 'st', b.st)
  end
end

-- Reply: { status, s1..s8 (the operation's own values), cfg, st,
--          then per limit: resetsAt (-1 = none), crossed (0|1) }
-- cfg and st go back packed, as stored (callers save first): a few strings convert to a reply
-- far cheaper than one value per field. Numbers go back as exact integer replies (< 2^53).
local function budgetReply(b, status, s)
  local r = { status }
  for i = 1, 8 do r[i + 1] = s[i] or '' end
  r[10], r[11] = b.cfg, b.st
  for _, l in ipairs(b.limits) do
    local crossed = 0
    if moneyCmp(l.bh, l.bl, l.ah, l.al) <= 0 and moneyCmp(l.ch, l.cl, l.ah, l.al) > 0 then crossed = 1 end
    r[#r + 1] = l.resets; r[#r + 1] = crossed
  end
  return r
end

-- Loads the budget, applies what time has done to it (window resets, expired holds) and
-- returns it ready for the operation; nil when it does not exist.
local function touchBudget(keys, now, retentionMs)
  local b = loadBudget(keys[1])
  if b == nil then return nil end
  rollWindows(b, now)
  expireDue(b, keys, now, retentionMs, 256)
  return b
end
