--[[
  Ends a drainer's claim on a journal outbox list: trims the entries it stored in ClickHouse
  from the head of the list, but only while it still holds the claim (a drainer whose claim
  expired trims nothing: the next drainer reads those entries again and the insert skips them).
  Producers only append (RPUSH), so the head entries are still the ones the drainer read.
  KEYS[1] the journal list, KEYS[2] its claim key
  ARGV[1] the drainer's claim token, ARGV[2] how many entries to trim from the head (0: none)
  Returns 1 when the claim was held (entries trimmed, claim released), 0 when it was lost.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[2])
if n > 0 then redis.call('LTRIM', KEYS[1], n, -1) end
redis.call('DEL', KEYS[2])
return 1
