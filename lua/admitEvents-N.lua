--[[
  Admits a batch of raw usage events of one project (src/events/README.md): refuses the events
  of customers the catalog has disabled and finds those already accepted within the dedup window.
  It only reads; markEventsSeen-N writes the dedup hashes once the events' job is in Redis.
  KEYS the customer hashes and dedup hashes the events name, each once, all under the project's
  hash tag (one Cluster slot)
  ARGV[1] nowMs (the gateway's clock), then four per event: the index in KEYS of its customer
  hash; of the dedup hash of its shard in the current bucket and in the bucket before (0, 0:
  the event has neither idempotencyKey nor id); its dedup field (idempotencyKey ?? id, or '')
  Returns one integer per event: 0 new, 1 duplicate, 2 customer_disabled.
]]
local now = tonumber(ARGV[1])
local n = (#ARGV - 1) / 4

-- Fields to look up, grouped by hash: one HMGET per hash (in chunks: unpack's stack is limited).
local lookups = {}
for e = 1, n do
  local at = 2 + (e - 1) * 4
  local field = ARGV[at + 3]
  for k = 1, 2 do
    local h = tonumber(ARGV[at + k])
    if h > 0 then
      local list = lookups[h]
      if not list then list = {} lookups[h] = list end
      list[#list + 1] = e
    end
  end
end
-- The latest window end found per event.
local ends = {}
for h, events in pairs(lookups) do
  for from = 1, #events, 500 do
    local fields = {}
    for j = from, math.min(from + 499, #events) do fields[#fields + 1] = ARGV[2 + (events[j] - 1) * 4 + 3] end
    local values = redis.call('HMGET', KEYS[h], unpack(fields))
    for j = 1, #fields do
      local v = values[j]
      if v then
        local e = events[from + j - 1]
        local t = tonumber(v)
        if not ends[e] or t > ends[e] then ends[e] = t end
      end
    end
  end
end

local disabled = {}
local out = {}
for e = 1, n do
  local c = tonumber(ARGV[2 + (e - 1) * 4])
  local off = disabled[c]
  if off == nil then
    off = redis.call('HGET', KEYS[c], 'customerDisabled') == '1'
    disabled[c] = off
  end
  if off then
    out[e] = 2
  elseif ends[e] and ends[e] > now then
    out[e] = 1
  else
    out[e] = 0
  end
end
return out
