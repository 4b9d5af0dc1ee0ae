--[[
  Creates or replaces a budget's configuration. Usage already counted is kept for limits whose
  id and window are unchanged; open holds stay open and keep counting as held.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] retentionMs, ARGV[3] unit, ARGV[4] defaultTtlMs, ARGV[5] maxTtlMs,
  ARGV[6] closesAt ('' = never), ARGV[7] number of limits n,
  then per limit 6 values: id, window, enforce (hard|soft), anchor ('' = calendar), amount hi, amount lo
  Returns a budget reply with status created | updated and
  s = { unit, defaultTtlMs, maxTtlMs, closesAt (-1 = never) }.
]]
--@include money
--@include window
--@include budget

local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local key = KEYS[1]

-- Time is applied under the old configuration first, so expired holds count where they belonged;
-- its writes are carried into the new record's and made together at the end.
local old = touchBudget(KEYS, now, retention)
local kept = {}
if old then
  local i = 0
  for limit in string.gmatch(old.cfg, '([^;]+);') do
    i = i + 1
    kept[string.match(limit, '^[^|]+')] = old.limits[i]
  end
end

local dttl, mttl, closes, n = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]) or -1, tonumber(ARGV[7])
local b = {
  seq = old and old.seq or 0, hh = old and old.hh or 0, hl = old and old.hl or 0, nexp = old and old.nexp or -1,
  dttl = dttl, mttl = mttl, closes = closes, limits = {}, dirty = true,
  writes = old and old.writes or {}, later = old and old.later or {}, closed = {},
  consumed = old and old.consumed,
  journal = old and old.journal, jhead = old and old.jhead, junit = old and old.junit, jlist = old and old.jlist,
}
local num, cfg = { dttl, mttl, closes, n }, {}
for i = 1, n do
  local base = 7 + (i - 1) * 6
  local id, window, enforce, anchorArg = ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], ARGV[base + 4]
  local w, hard, anchor = WINDOW_CODES[window], (enforce == 'hard') and 1 or 0, tonumber(anchorArg) or -1
  local ah, al = tonumber(ARGV[base + 5]), tonumber(ARGV[base + 6])
  for _, v in ipairs({ w, hard, anchor, ah, al }) do num[#num + 1] = v end
  cfg[i] = id .. '|' .. window .. '|' .. enforce .. '|' .. anchorArg .. '|' .. ARGV[base + 5] .. '|' .. ARGV[base + 6] .. ';'
  local l = {
    w = w, hard = hard == 1, anchor = (anchor < 0) and defaultAnchor(w) or anchor, ah = ah, al = al,
    -- No period yet: the first roll (pe = 0) moves it into the current one, wherever that starts
    -- (the ISO week around the epoch starts in 1969).
    ch = 0, cl = 0, ps = -9007199254740992, pe = 0,
  }
  local prev = kept[id]
  if prev and prev.w == w then
    l.ch, l.cl, l.ps, l.pe = prev.ch, prev.cl, prev.ps, prev.pe
    -- A new anchor lays new periods: usage counted so far stays, in the new current period.
    if prev.anchor ~= l.anchor then l.ps, l.pe = windowPeriod(w, l.anchor, now) end
  end
  b.limits[i] = l
end
b.cfg = table.concat(cfg)
for _, v in ipairs({ 'num', struct.pack(doubles(#num), unpack(num)), 'cfg', b.cfg, 'unit', ARGV[3] }) do
  b.writes[#b.writes + 1] = v
end
rollWindows(b, now)
-- Expiries applied under the old configuration are this call's changes too: report their crossings.
for i, l in ipairs(b.limits) do
  local prev = kept[string.match(cfg[i], '^[^|]+')]
  if prev and prev.w == l.w and prev.ps == l.ps then l.bh, l.bl = prev.bh, prev.bl end
end
saveBudget(b, key)
return budgetReply(b, old and 'updated' or 'created', { ARGV[3], dttl, mttl, closes })
