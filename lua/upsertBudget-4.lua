--[[
  Creates or replaces a budget's configuration. Usage already counted is kept for limits whose
  id and window are unchanged; open holds stay open and keep counting as held.
  KEYS[1] budget hash, KEYS[2] holds hash, KEYS[3] open-hold index, KEYS[4] purge index
  ARGV[1] nowMs, ARGV[2] retentionMs, ARGV[3] unit, ARGV[4] defaultTtlMs, ARGV[5] maxTtlMs,
  ARGV[6] closesAt ('' = never), ARGV[7] number of limits n,
  then per limit 6 values: id, window, enforce (hard|soft), anchor ('' = default), amount hi, amount lo
  Returns a budget reply with status created | updated and s = { unit, defaultTtlMs, maxTtlMs, closesAt }.
]]
--@include money
--@include window
--@include budget

local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local key = KEYS[1]

-- Time is applied under the old configuration first, so expired holds count where they belonged.
local old = touchBudget(KEYS, now, retention)
local kept = {}
if old then
  for _, l in ipairs(old.limits) do kept[l.id] = l end
end

local b = {
  seq = old and old.seq or 0, hh = old and old.hh or 0, hl = old and old.hl or 0, nexp = old and old.nexp,
  limits = {}, dirty = true,
}
local cfg = { ARGV[4], '|', ARGV[5], '|', ARGV[6], ';' }
for i = 1, tonumber(ARGV[7]) do
  local base = 7 + (i - 1) * 6
  local id, w, e, an, ah, al = ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5], ARGV[base + 6]
  cfg[#cfg + 1] = id .. '|' .. w .. '|' .. e .. '|' .. an .. '|' .. ah .. '|' .. al .. ';'
  local l = {
    id = id, w = w, e = e, an = an, anchor = (an == '') and defaultAnchor(w) or tonumber(an),
    ah = tonumber(ah), al = tonumber(al), ch = 0, cl = 0, ps = -1,
  }
  local prev = kept[id]
  if prev and prev.w == w then l.ch, l.cl, l.ps = prev.ch, prev.cl, prev.ps end
  b.limits[i] = l
end
b.cfg = table.concat(cfg)
redis.call('HSET', key, 'cfg', b.cfg, 'unit', ARGV[3])
rollWindows(b, now)
saveBudget(b, key)
return budgetReply(b, old and 'updated' or 'created', { ARGV[3], ARGV[4], ARGV[5], ARGV[6] })
