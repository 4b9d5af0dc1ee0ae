--[[
  Claims a batch's events of one project for inserting into ClickHouse: an event is inserted
  by exactly one batch, even when the gateway put it into two jobs (a retry racing its first
  send) and workers process both at once. The first batch to claim an event owns it for good;
  a retry of that batch (same batchId: after a crash, or a replayed dead letter) still owns it.
  The moment an event is first claimed is also the one moment its usage is counted against the
  customer's entitlements (includes/entitlementUsage.lua, src/entitlements/README.md): exactly
  once per event id, whatever the retries, replays and copies. That count decides, per feature,
  whether the event's usage is accepted or refused (the feature's overage strategy at its
  limit); the decision is kept with the claim (value "<batchId>|<refused feature>,..."), so a
  retry of the batch writes the same rows, and it is what the ClickHouse rows say (status).
  KEYS[1] the project's claim hash of today, KEYS[2] of yesterday (src/events/keys.ts), then the
  usage and entitlement state hashes of the customers counted (src/entitlements/keys.ts)
  ARGV[1] batchId, ARGV[2] seconds the hashes live, ARGV[3] n, ARGV[4 .. 3+n] the event ids,
  then 14 per count: the event's number (1..n), the index in KEYS of the usage hash and of the
  state hash, and the 11 arguments of entitlementUsage (the first being the feature's slug)
  Returns { owned, reached }:
    owned: one entry per event: 0 another batch owns it; 1 this batch owns it and nothing of it
      was refused; or the slugs of the features that refused it, comma-separated (owned too)
    reached: per count that took a customer's usage of a feature to its limit for the first time
      in the period (the decision of limit.reached): { count's number (1..), usedUnits,
      limitUnits, deniedUntilMs }
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
    claiming[id] = e
    fresh[e] = true
    out[e] = 1
  elseif claiming[id] then
    -- A copy of an event this call claims: the copy's decision is the first's (below).
    out[e] = -claiming[id]
  else
    local by, refused = string.match(owner, '^([^|]*)|?(.*)$')
    if by ~= batch then
      out[e] = 0
    elseif refused == '' then
      out[e] = 1
    else
      out[e] = refused
    end
  end
end
-- The counts of the events claimed now, kept in a table (nothing written yet), and what each
-- decided: the features that refused an event, and the counts that reached a limit...
local counted = {}
local refusedBy = {}
local reached = {}
local number = 0
for at = 4 + n, #ARGV, 14 do
  number = number + 1
  local e = tonumber(ARGV[at])
  if fresh[e] then
    local allowed, reason, hit = entitlementUsage(KEYS[tonumber(ARGV[at + 1])], KEYS[tonumber(ARGV[at + 2])], ARGV, at + 3, counted)
    if allowed == 0 and reason == 'denied' then
      local list = refusedBy[e] or {}
      list[#list + 1] = ARGV[at + 3]
      refusedBy[e] = list
    end
    if hit then reached[#reached + 1] = { number, hit[1], hit[2], hit[3] } end
  end
end
-- ...then every write: the claims with their decisions, and the counters once per customer and feature.
for e = 1, n do
  if fresh[e] then
    local refused = refusedBy[e] and table.concat(refusedBy[e], ',') or nil
    redis.call('HSET', KEYS[1], ARGV[3 + e], refused and (batch .. '|' .. refused) or batch)
    if refused then out[e] = refused end
  end
end
for e = 1, n do
  if type(out[e]) == 'number' and out[e] < 0 then out[e] = out[-out[e]] end
end
redis.call('EXPIRE', KEYS[1], ttl)
entitlementUsage(nil, nil, nil, nil, counted)
return { out, reached }
