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
  saveBudget(old, key)
  local fields = {}
  for i, l in ipairs(old.limits) do
    kept[l.id] = l
    for _, f in ipairs({ 'id', 'w', 'e', 'an', 'ah', 'al', 'ch', 'cl', 'ps' }) do fields[#fields + 1] = i .. '.' .. f end
  end
  if #fields > 0 then redis.call('HDEL', key, unpack(fields)) end
end

local n = tonumber(ARGV[7])
local args = { 'unit', ARGV[3], 'dttl', ARGV[4], 'mttl', ARGV[5], 'closes', ARGV[6], 'n', ARGV[7] }
for i = 1, n do
  local base = 7 + (i - 1) * 6
  local id, w = ARGV[base + 1], ARGV[base + 2]
  local p = i .. '.'
  for _, kv in ipairs({ { 'id', id }, { 'w', w }, { 'e', ARGV[base + 3] }, { 'an', ARGV[base + 4] },
                        { 'ah', ARGV[base + 5] }, { 'al', ARGV[base + 6] } }) do
    args[#args + 1] = p .. kv[1]; args[#args + 1] = kv[2]
  end
  local prev = kept[id]
  if prev and prev.w == w then
    args[#args + 1] = p .. 'ch'; args[#args + 1] = int(prev.ch)
    args[#args + 1] = p .. 'cl'; args[#args + 1] = int(prev.cl)
    args[#args + 1] = p .. 'ps'; args[#args + 1] = int(prev.ps)
  end
end
redis.call('HSET', key, unpack(args))

local b = loadBudget(key)
rollWindows(b, now)
saveBudget(b, key)
local status = old and 'updated' or 'created'
return budgetReply(b, status, { b.unit, int(b.dttl), int(b.mttl), b.closes })
