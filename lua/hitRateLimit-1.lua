--[[
  Counts one request in a fixed window.
  KEYS[1] the counter of the window (its name carries the window's start)
  ARGV[1] window length in ms (the counter expires after it)
  Returns the count including this request.
]]
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
