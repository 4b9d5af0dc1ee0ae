-- The budget record: one hash per budget holding its configuration and every counter, so a
-- call reads the whole budget with one HGETALL. Fields:
--   unit, dttl, mttl, closes ('' = never), n (number of limits), seq (last hold number),
--   hh/hl (money pair held by open holds), nexp (a lower bound of the open holds' expiresAt),
--   <i>.id <i>.w <i>.e <i>.an <i>.ah/<i>.al (limit i: id, window, h|s, anchor, amount pair)
--   <i>.ch/<i>.cl <i>.ps (consumed pair in the period starting at ps).
-- Holds live in a second hash (field = hold number, value = "state|hi|lo|expiresAt|shi|slo")
-- with state o (open), s (settled), r (released) or x (expired, settled at its full amount);
-- open holds are indexed by expiresAt in a sorted set, closed ones by purge time in another.
-- KEYS of every budget script start with: 1 budget hash, 2 holds hash, 3 open index, 4 purge index.

local function loadBudget(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local f = {}
  for i = 1, #flat, 2 do f[flat[i]] = flat[i + 1] end
  local b = {
    unit = f.unit or '', dttl = tonumber(f.dttl), mttl = tonumber(f.mttl), closes = f.closes or '',
    seq = tonumber(f.seq or '0'), hh = tonumber(f.hh or '0'), hl = tonumber(f.hl or '0'),
    nexp = tonumber(f.nexp or ''), limits = {}, dirty = false,
  }
  local n = tonumber(f.n or '0')
  for i = 1, n do
    local p = i .. '.'
    local w = f[p .. 'w']
    local an = f[p .. 'an'] or ''
    b.limits[i] = {
      id = f[p .. 'id'], w = w, e = f[p .. 'e'], an = an,
      anchor = (an == '') and defaultAnchor(w) or tonumber(an),
      ah = tonumber(f[p .. 'ah']), al = tonumber(f[p .. 'al']),
      ch = tonumber(f[p .. 'ch'] or '0'), cl = tonumber(f[p .. 'cl'] or '0'), ps = tonumber(f[p .. 'ps'] or '-1'),
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

local function saveBudget(b, key)
  if not b.dirty then return end
  local args = { 'seq', int(b.seq), 'hh', int(b.hh), 'hl', int(b.hl) }
  for i, l in ipairs(b.limits) do
    local p = i .. '.'
    args[#args + 1] = p .. 'ch'; args[#args + 1] = int(l.ch)
    args[#args + 1] = p .. 'cl'; args[#args + 1] = int(l.cl)
    args[#args + 1] = p .. 'ps'; args[#args + 1] = int(l.ps)
  end
  if b.nexp then
    args[#args + 1] = 'nexp'; args[#args + 1] = int(b.nexp)
  else
    redis.call('HDEL', key, 'nexp')
  end
  redis.call('HSET', key, unpack(args))
end

-- Reply: { status, s1..s8 (the operation's own values), hh, hl, n,
--          then per limit: id, window, enforce, anchor, ah, al, ch, cl, resetsAt (-1 = none), crossed (0|1) }
local function budgetReply(b, status, s)
  local r = { status }
  for i = 1, 8 do r[i + 1] = s[i] or '' end
  r[10], r[11], r[12] = int(b.hh), int(b.hl), #b.limits
  for _, l in ipairs(b.limits) do
    local crossed = 0
    if moneyCmp(l.bh, l.bl, l.ah, l.al) <= 0 and moneyCmp(l.ch, l.cl, l.ah, l.al) > 0 then crossed = 1 end
    r[#r + 1] = l.id; r[#r + 1] = l.w; r[#r + 1] = l.e; r[#r + 1] = l.an
    r[#r + 1] = int(l.ah); r[#r + 1] = int(l.al); r[#r + 1] = int(l.ch); r[#r + 1] = int(l.cl)
    r[#r + 1] = int(l.resets); r[#r + 1] = crossed
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
