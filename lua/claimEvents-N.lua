--[[
  Claims a batch's events of one project for inserting into ClickHouse: an event is inserted
  by exactly one batch, even when the gateway put it into two jobs (a retry racing its first
  send) and workers process both at once. The first batch to claim an event owns it for good;
  a retry of that batch (same batchId: after a crash, or a replayed dead letter) still owns it.
  KEYS[1] the project's claim hash of today, KEYS[2] of yesterday (src/events/keys.ts)
  ARGV[1] batchId, ARGV[2] seconds the hashes live, then the event ids
  Returns one integer per event: 1 this batch owns it, 0 another batch does.
]]
local batch, ttl = ARGV[1], ARGV[2]
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local owner = redis.call('HGET', KEYS[2], id)
  if not owner then
    if redis.call('HSETNX', KEYS[1], id, batch) == 1 then
      owner = batch
    else
      owner = redis.call('HGET', KEYS[1], id)
    end
  end
  out[#out + 1] = (owner == batch) and 1 or 0
end
redis.call('EXPIRE', KEYS[1], ttl)
return out
