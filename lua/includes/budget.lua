--@include money
--@include window
-- The budget record: one hash per budget. Everything Lua reads on the hot path is packed as
-- little-endian doubles with `struct` (exact for integers below 2^53), because turning hash
-- fields and decimal strings into Lua numbers costs more than the rest of a call.
--   num  dttl, mttl, closesAt (-1 none), n, then per limit: window code, hard (1|0),
--        anchor (-1 = calendar), amount hi, amount lo                    (written by upsert)
--   st   seq (the last hold number: nextNumber), held hi, held lo, nexp (-1 none), then per
--        limit: consumed hi, consumed lo, period start, period end (-1 = never ends)
--                                                                        (written by every change)
--   cfg  "id|window|enforce|anchor|amount hi|amount lo;" per limit: for the gateway, never parsed here
--   unit the budget's unit, read only by get
--   h<n> hold n: state (1 open, 2 settled, 3 released, 4 expired), amount hi, lo, expiresAt,
--        settled hi, lo; then the idempotency key that created it, as raw bytes
--   i:<idempotency key>  the request it answered: authorize (1, hold number, amount hi, lo,
--        ttlMs as sent or -1, expiresAt, ttlMs), charge (2, hi, lo) or record (3, hi, lo)
--   l<n> lease n (a run leasing from the budget), packed like a hold (below); lseq the last lease
--        number (nextNumber); il:<customerId>|<key> the lease a run's start took (lease number,
--        then the start's request fingerprint)
-- nexp is a lower bound of the open holds' expiresAt. Open holds are indexed by expiresAt in a
-- sorted set; the purge index holds the hash fields to forget (closed holds and their
-- idempotency records, charge and record idempotency records) by the time they may go.
-- KEYS of every budget script: 1 budget hash, 2 open-hold index, 3 purge index, 4 journal list.
--
-- Every movement (a hold settled, expired or released; a charge; a record) is also queued as a
-- row of the ClickHouse table budget_journal and appended by saveBudget to the budget's journal
-- list KEYS[4] = mg:{p/k}:journal (src/journal/README.md), atomically with the movement itself.
--
-- Scripts write nothing until saveBudget, at their end: they queue hash fields in b.writes and
-- other commands in b.later. Redis does not roll back a script that fails part-way, so this is
-- what keeps a failure (or a bug) from leaving half a change behind.
local OPEN, SETTLED, RELEASED, EXPIRED = 1, 2, 3, 4

-- Numbers passed to commands as integer text (a Lua number could reach Redis in exponent form).
local function int(x)
  return string.format('%d', x)
end

-- The number after `last` in a sequence of ids (holds h_<n>: seq; leases l_<n>: lseq): last + 1,
-- but at least nowMs × 1000, so that ids only grow, even across a lost AOF tail. A redis-server
-- that restarts from an AOF cut back to its last fsync (appendfsync everysec, then a power cut)
-- has the older counter, and the ids handed out after it are gone from Redis but not from the
-- clients; they were below (their millisecond + 1) × 1000 while a sequence takes fewer than 1000
-- ids per millisecond, so a later millisecond starts past them. 16 digits until the year 2286,
-- exact in a double (below 2^53). Old small counters just jump ahead. src/budgets/README.md,
-- "Durability".
local function nextNumber(last, now)
  local seeded = math.floor(now) * 1000
  if last >= seeded then return last + 1 end
  return seeded
end

local function packHold(h)
  return struct.pack('<dddddd', h.state, h.hi, h.lo, h.exp, h.shi, h.slo) .. h.idem
end

local function unpackHold(s)
  local state, hi, lo, exp, shi, slo = struct.unpack('<dddddd', s)
  return { state = state, hi = hi, lo = lo, exp = exp, shi = shi, slo = slo, idem = string.sub(s, 49) }
end

-- A money pair as canonical decimal text ("12.5", "0.00000001", "0"): units of 10^-8.
local function moneyText(hi, lo)
  local digits = moneyDigits(hi, lo)
  if #digits < 9 then digits = string.rep('0', 9 - #digits) .. digits end
  local frac = (string.gsub(string.sub(digits, -8), '0+$', ''))
  if frac == '' then return string.sub(digits, 1, -9) end
  return string.sub(digits, 1, -9) .. '.' .. frac
end

-- A JSON string. Most texts here (ids, budget keys, units) need no escaping: cjson only for the rest.
local function jsonText(s)
  if string.find(s, '[%z\1-\31"\\]') then return cjson.encode(s) end
  return '"' .. s .. '"'
end

-- Queues a budget_journal row for saveBudget. The project and the budget key come from the
-- hash tag of keys[1] (mg:{<project>/<key>}:b; project ids have no '/', budget keys no '}' and
-- no '#'), so no script needs more arguments for it. movement_id is `<key>#<kind>:<ref>`:
-- unique within the project (a budget key cannot contain '#') and the same for the same
-- movement, since ref is the hold id (each hold closes once) or, for charge and record, the
-- idempotency key and the time of the call (a key may be used again once its record is
-- forgotten, and that is another movement; a replay writes no row at all).
local function journalMovement(b, keys, kind, holdId, ref, uh, ul, ts, idem)
  local key = keys[1]
  if b.journal == nil then
    b.jlist = keys[4]
    local project, budgetKey = string.match(key, '^mg:{([^/]*)/(.*)}:b$')
    b.journal = {}
    -- The row's constant head and tail for this call: project, budget key, unit.
    b.jhead = 'budget_journal\t{"project_id":' .. jsonText(project) .. ',"budget_key":' .. jsonText(budgetKey)
      .. ',"movement_id":' .. string.sub(jsonText(budgetKey), 1, -2)
    b.junit = ',"unit":' .. jsonText(redis.call('HGET', key, 'unit') or '')
  end
  b.journal[#b.journal + 1] = b.jhead .. string.sub(jsonText('#' .. kind .. ':' .. ref), 2)
    .. ',"kind":"' .. kind .. '","hold_id":"' .. holdId .. '","amount":"' .. moneyText(uh, ul)
    .. '","ts_ms":' .. int(ts) .. b.junit .. ',"idempotency_key":' .. jsonText(idem) .. '}'
  b.dirty = true
end

-- struct formats of n little-endian doubles, built once per n.
local DOUBLES = {}
local function doubles(n)
  local f = DOUBLES[n]
  if f == nil then
    f = '<' .. string.rep('d', n)
    DOUBLES[n] = f
  end
  return f
end

-- Decoded `num` fields, keyed by the field's bytes. The library's Lua state lives as long as the
-- library is loaded (one per node), so a budget's configuration is decoded once, not per call.
-- Keyed by content, an entry can never be stale: an upsert that changes anything writes other
-- bytes, hence another key. Nothing in an entry is ever modified. At most CONFIGS_MAX entries
-- (the cache starts over when full). Replication is by effects, so the cache changes nothing
-- that reaches a replica or the AOF.
local CONFIGS_MAX = 4096
local configs, configCount = {}, 0
local function decodeNum(s)
  local c = configs[s]
  if c ~= nil then return c end
  local dttl, mttl, closes, n = struct.unpack('<dddd', s)
  local num = { struct.unpack(doubles(5 * n), s, 33) }
  c = { dttl = dttl, mttl = mttl, closes = closes, n = n }
  for i = 1, n do
    local k = (i - 1) * 5
    local w, anchor = num[k + 1], num[k + 3]
    c[i] = { w = w, hard = num[k + 2] == 1, anchor = (anchor < 0) and defaultAnchor(w) or anchor, ah = num[k + 4], al = num[k + 5] }
  end
  if configCount >= CONFIGS_MAX then configs, configCount = {}, 0 end
  configs[s] = c
  configCount = configCount + 1
  return c
end

-- Reads the budget and, in the same HMGET, one more field (a hold, an idempotency record, or
-- the unit). Returns nil when the budget does not exist.
local function loadBudget(key, extraField)
  local f = redis.call('HMGET', key, 'num', 'st', 'cfg', extraField or 'unit')
  if not f[1] then return nil end
  local c = decodeNum(f[1])
  local n = c.n
  local st = { struct.unpack(doubles(4 + 4 * n), f[2]) }
  local limits = {}
  local b = {
    dttl = c.dttl, mttl = c.mttl, closes = c.closes, cfg = f[3], extra = f[4],
    seq = st[1], hh = st[2], hl = st[3], nexp = st[4],
    limits = limits, dirty = false, writes = {}, later = {}, closed = {},
  }
  for i = 1, n do
    local l, s = c[i], i * 4
    limits[i] = {
      w = l.w, hard = l.hard, anchor = l.anchor, ah = l.ah, al = l.al,
      ch = st[s + 1], cl = st[s + 2], ps = st[s + 3], pe = st[s + 4], bh = 0, bl = 0,
    }
  end
  return b
end

-- Moves every limit into the period containing now, resetting consumed when a new period
-- began, and remembers consumed at that point so `crossed` covers all of this call's changes.
-- Periods only move forward: a gateway whose clock lags keeps counting in the newest period.
local function rollWindows(b, now)
  for _, l in ipairs(b.limits) do
    if l.pe >= 0 and now >= l.pe then
      local start, finish = windowPeriod(l.w, l.anchor, now)
      if start > l.ps then
        l.ps, l.pe, l.ch, l.cl = start, finish, 0, 0
        b.dirty = true
      end
    end
    l.bh, l.bl = l.ch, l.cl
  end
end

-- Adds usage to every limit; with `t`, only to limits whose current period contains t (a hold
-- that expired in an earlier period belongs to a window that has already reset).
local function consume(b, h, l, t)
  for _, lim in ipairs(b.limits) do
    if t == nil or (t >= lim.ps and (lim.pe < 0 or t < lim.pe)) then
      lim.ch, lim.cl = moneyAdd(lim.ch, lim.cl, h, l)
    end
  end
  b.dirty, b.consumed = true, true
end

-- Closes an open hold: frees its held amount and records its final state. `usedAt` is when
-- the usage happened (nil: now, for a settle; the deadline for an expiry); nil usage = release.
local function closeHold(b, keys, id, h, state, uh, ul, usedAt, now, retentionMs)
  b.hh, b.hl = moneySub(b.hh, b.hl, h.hi, h.lo)
  if uh ~= nil then consume(b, uh, ul, usedAt) end
  h.state, h.shi, h.slo = state, uh or 0, ul or 0
  b.writes[#b.writes + 1] = 'h' .. id
  b.writes[#b.writes + 1] = packHold(h)
  b.closed[id] = h
  local kind = (state == SETTLED and 'settle') or (state == EXPIRED and 'expiry') or 'release'
  journalMovement(b, keys, kind, 'h_' .. id, 'h_' .. id, uh or 0, ul or 0, usedAt or now, h.idem)
  local purgeAt = int(now + retentionMs)
  if h.idem ~= '' then
    b.later[#b.later + 1] = { 'ZADD', keys[3], purgeAt, 'h' .. id, purgeAt, 'i:' .. h.idem }
  else
    b.later[#b.later + 1] = { 'ZADD', keys[3], purgeAt, 'h' .. id }
  end
  b.dirty = true
end

-- A lease (a run leasing from the budget, README "Leases") is stored like a hold, in field
-- l<n>: state, amount hi, lo, expiresAt, then what the run reported so far (hi, lo) in place of
-- the settled amount, and '<customerId>|<idempotency key>' of the run's start in place of the
-- hold's key (its idempotency record is the field il:<that>). While it is open, the budget's
-- held counts its unreported part, amount − reported.

-- The unreported part of an open lease (0 once it reported its whole amount).
local function leaseUnreported(h)
  if moneyCmp(h.shi, h.slo, h.hi, h.lo) >= 0 then return 0, 0 end
  return moneySub(h.hi, h.lo, h.shi, h.slo)
end

-- Raises a lease's reported total to th, tl (reports only grow, so a repeated or late report
-- changes nothing): the difference is consumed now and, while the lease is open, leaves held
-- (at most its unreported part). A report that reaches a closed lease is still counted, like a
-- record. Journals the movement (kind lease, its id names the new total). Returns the difference.
local function leaseReport(b, keys, n, h, th, tl, now)
  if moneyCmp(th, tl, h.shi, h.slo) <= 0 then return 0, 0 end
  local dh, dl = moneySub(th, tl, h.shi, h.slo)
  if h.state == OPEN then
    local uh, ul = leaseUnreported(h)
    if moneyCmp(dh, dl, uh, ul) < 0 then uh, ul = dh, dl end
    b.hh, b.hl = moneySub(b.hh, b.hl, uh, ul)
  end
  consume(b, dh, dl, nil)
  h.shi, h.slo = th, tl
  b.writes[#b.writes + 1] = 'l' .. n
  b.writes[#b.writes + 1] = packHold(h)
  journalMovement(b, keys, 'lease', 'l_' .. n, 'l_' .. n .. ':' .. moneyText(th, tl), dh, dl, now, string.match(h.idem, '|(.*)$') or '')
  return dh, dl
end

-- Closes an open lease: its unreported part leaves held (nothing more is consumed: a lease
-- counts only what its run reported). state is SETTLED when its run ended (kind lease_end),
-- EXPIRED at its deadline (kind lease_expiry, at the deadline). Its record and idempotency
-- record are forgotten after the retention.
local function leaseClose(b, keys, n, h, state, now, retentionMs)
  local uh, ul = leaseUnreported(h)
  b.hh, b.hl = moneySub(b.hh, b.hl, uh, ul)
  h.state = state
  b.writes[#b.writes + 1] = 'l' .. n
  b.writes[#b.writes + 1] = packHold(h)
  b.closed['l' .. n] = h
  local kind, ts = 'lease_end', now
  if state == EXPIRED then kind, ts = 'lease_expiry', h.exp end
  journalMovement(b, keys, kind, 'l_' .. n, 'l_' .. n, 0, 0, ts, string.match(h.idem, '|(.*)$') or '')
  local purgeAt = int(now + retentionMs)
  b.later[#b.later + 1] = { 'ZADD', keys[3], purgeAt, 'l' .. n, purgeAt, 'il:' .. h.idem }
  b.later[#b.later + 1] = { 'ZREM', keys[2], 'l' .. n }
  b.dirty = true
end

-- Settles, at their full amount, open holds whose deadline has passed, and closes leases past
-- theirs (at most `max` per call; the rest on the next touch or sweep). The open-hold index
-- holds both: hold n as "n", lease n as "ln". nexp spares the index lookup on most calls.
local function expireDue(b, keys, now, retentionMs, max)
  if b.nexp < 0 or b.nexp > now then return 0 end
  local due = redis.call('ZRANGEBYSCORE', keys[2], '-inf', int(now), 'LIMIT', 0, max)
  if #due > 0 then
    local fields = {}
    for i, id in ipairs(due) do fields[i] = (string.byte(id, 1) == 108) and id or ('h' .. id) end
    local recs = redis.call('HMGET', keys[1], unpack(fields))
    for i, id in ipairs(due) do
      if recs[i] then
        local h = unpackHold(recs[i])
        if h.state == OPEN then
          if string.byte(id, 1) == 108 then
            leaseClose(b, keys, string.sub(id, 2), h, EXPIRED, now, retentionMs)
          else
            closeHold(b, keys, id, h, EXPIRED, h.hi, h.lo, h.exp, now, retentionMs)
          end
        end
      end
    end
    b.later[#b.later + 1] = { 'ZREM', keys[2], unpack(due) }
  end
  -- The due holds are the index's first #due members (ZRANGE orders as ZRANGEBYSCORE does),
  -- still there until saveBudget removes them: the next deadline is the one after them.
  local first = redis.call('ZRANGE', keys[2], #due, #due, 'WITHSCORES')
  b.nexp = tonumber(first[2]) or -1
  b.dirty = true
  return #due
end

-- Writes the counters and every hold this call changed in one HSET, then the queued commands.
local function saveBudget(b, key)
  if not b.dirty then return end
  local st = { b.seq, b.hh, b.hl, b.nexp }
  for _, l in ipairs(b.limits) do
    st[#st + 1] = l.ch; st[#st + 1] = l.cl; st[#st + 1] = l.ps; st[#st + 1] = l.pe
  end
  local w = b.writes
  w[#w + 1] = 'st'
  w[#w + 1] = struct.pack(doubles(#st), unpack(st))
  redis.call('HSET', key, unpack(w))
  for _, command in ipairs(b.later) do redis.call(unpack(command)) end
  -- KEYS[4] of every budget script: the journal list, mg:{p/k}:journal (same tag, same slot).
  if b.journal ~= nil then redis.call('RPUSH', b.jlist, unpack(b.journal)) end
  b.dirty, b.writes, b.later, b.journal = false, {}, {}, nil
end

-- Reply: { status, cfg, crossed, k, s1..sk (the operation's own values), held hi, held lo,
--          then per limit: consumed hi, consumed lo, resetsAt (-1 = never) }
-- crossed is '' when no limit was crossed, else one '0' or '1' per limit. Numbers go back as
-- exact integer replies (all are below 2^53). A reply may carry one more value after the last
-- limit's (authorizeFast's: struct.unpack's next position); readers stop at the last limit.
-- Every element costs Redis a conversion, so the layout has no empty fillers and no column of
-- zeros, and its counters follow st's order, so that authorizeFast builds it in one constructor.
local function budgetReply(b, status, s)
  local k = #s
  local r = { status, b.cfg, '', k, unpack(s) }
  k = k + 4
  r[k + 1], r[k + 2] = b.hh, b.hl
  k = k + 2
  local limits = b.limits
  for i = 1, #limits do
    local l = limits[i]
    r[k + 1], r[k + 2], r[k + 3] = l.ch, l.cl, l.pe
    k = k + 3
  end
  -- Only a call that consumed can have crossed a limit.
  if b.consumed then
    local marks = nil
    for i, l in ipairs(limits) do
      if moneyCmp(l.bh, l.bl, l.ah, l.al) <= 0 and moneyCmp(l.ch, l.cl, l.ah, l.al) > 0 then
        marks = marks or {}
        marks[i] = '1'
      end
    end
    if marks then
      for i = 1, #limits do marks[i] = marks[i] or '0' end
      r[3] = table.concat(marks, '', 1, #limits)
    end
  end
  return r
end

-- Whether what is held, and every limit's consumed + held, can take `amount` and stay exact
-- pairs (hi below 2^53, carries included): about 9·10^21 of the budget's unit. Only records
-- (never denied) and holds of a budget without hard limits can get that far; past it the answer
-- is amount_overflow, never a silently rounded sum.
local HI_ROOM = 9007199254740990
local function pairRoom(b, ah)
  if b.hh + ah >= HI_ROOM then return false end
  for _, lim in ipairs(b.limits) do
    if lim.ch + b.hh + ah >= HI_ROOM then return false end
  end
  return true
end

-- Whether every hard limit can take `amount` on top of what is consumed and held.
local function fitsHardLimits(b, ah, al)
  for _, l in ipairs(b.limits) do
    if l.hard then
      local th, tl = moneyAdd(l.ch, l.cl, b.hh, b.hl)
      th, tl = moneyAdd(th, tl, ah, al)
      if moneyCmp(th, tl, l.ah, l.al) > 0 then return false end
    end
  end
  return true
end

-- Loads the budget, applies what time has done to it (window resets, expired holds) and
-- returns it ready for the operation; nil when it does not exist.
local function touchBudget(keys, now, retentionMs, extraField)
  local b = loadBudget(keys[1], extraField)
  if b == nil then return nil end
  rollWindows(b, now)
  expireDue(b, keys, now, retentionMs, 256)
  return b
end

-- struct formats that read, from st's bytes, a reply's counters: held hi, lo, then per limit
-- consumed hi, lo and the period's end (seq, nexp and the period starts skipped), built once per n.
local SKIP = 'xxxxxxxx'
local REPLY_FORMATS = {}
local function replyFormat(n)
  local f = REPLY_FORMATS[n]
  if f == nil then
    f = '<' .. SKIP .. 'dd' .. SKIP .. string.rep('dd' .. SKIP .. 'd', n)
    REPLY_FORMATS[n] = f
  end
  return f
end
