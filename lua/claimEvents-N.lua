--[[
  Claims a batch's events of one project for inserting into ClickHouse: an event is inserted
  by exactly one batch, even when the gateway put it into two jobs (a retry racing its first
  send) and workers process both at once. The first batch to claim an event owns it for good;
  a retry of that batch (same batchId: after a crash, or a replayed dead letter) still owns it.
  The moment an event is first claimed is also the one moment its usage is counted against the
  customer's entitlements (includes/entitlementUsage.lua, src/entitlements/README.md): exactly
  once per event id, whatever the retries, replays and copies.
  KEYS[1] the project's claim hash of today, KEYS[2] of yesterday (src/events/keys.ts), then the
  usage and entitlement state hashes of the customers counted (src/entitlements/keys.ts)
  ARGV[1] batchId, ARGV[2] seconds the hashes live, ARGV[3] n, ARGV[4 .. 3+n] the event ids,
  then 14 per count: the event's number (1..n), the index in KEYS of the usage hash and of the
  state hash, and the 11 arguments of entitlementUsage
  Returns one integer per event: 1 this batch owns it, 0 another batch does.
]]
--@include entitlementUsage
local batch, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- Reads first: who owns each event, and which this call claims (an id twice in the batch is
-- claimed once).
local out = {}
local fresh = {}
local claiming = {}
for e = 1, n do
  local id = ARGV[3 + e]
  local owner = redis.call('HGET', KEYS[2], id) or redis.call('HGET', KEYS[1], id)
  if not owner and not claiming[id] then
    claiming[id] = true
    fresh[e] = true
    owner = batch
  elseif claiming[id] then
    owner = batch
  end
  out[e] = (owner == batch) and 1 or 0
end
-- The counts of the events claimed now, kept in a table (nothing written yet)...
local counted = {}
for at = 4 + n, #ARGV, 14 do
  if fresh[tonumber(ARGV[at])] then
    entitlementUsage(KEYS[tonumber(ARGV[at + 1])], KEYS[tonumber(ARGV[at + 2])], ARGV, at + 3, counted)
  end
end
-- ...then every write: the claims, and the counters once per customer and feature.
for e = 1, n do
  if fresh[e] then redis.call('HSET', KEYS[1], ARGV[3 + e], batch) end
end
redis.call('EXPIRE', KEYS[1], ttl)
entitlementUsage(nil, nil, nil, nil, counted)
return out
