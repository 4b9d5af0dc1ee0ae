--[[
  Remembers raw usage events as accepted, once the job that carries them is in Redis.
  KEYS the dedup hashes of the current bucket the events fall in (one project, one hash tag)
  ARGV[1] the epoch ms the window ends (nowMs + window, on the gateway's clock), ARGV[2] the
  hashes' Redis TTL in ms (two windows: a bucket is looked at until the window after it ends),
  then two per event: the index in KEYS of its hash, its field (idempotencyKey ?? id)
  The window is decided by the stored end (tests move the gateway's clock); the TTL only lets
  Redis free a bucket afterwards.
  Returns the number of fields written.
]]
local ends = ARGV[1]
local byHash = {}
for i = 3, #ARGV, 2 do
  local h = tonumber(ARGV[i])
  local list = byHash[h]
  if not list then list = {} byHash[h] = list end
  list[#list + 1] = ARGV[i + 1]
  list[#list + 1] = ends
end
local written = 0
for h, pairs_ in pairs(byHash) do
  for from = 1, #pairs_, 1000 do
    redis.call('HSET', KEYS[h], unpack(pairs_, from, math.min(from + 999, #pairs_)))
  end
  redis.call('PEXPIRE', KEYS[h], ARGV[2])
  written = written + #pairs_ / 2
end
return written
