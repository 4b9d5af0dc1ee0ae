-- Forgets an ended run tree once its retention is over (the background sweep): every field of the
-- root and its descendants, their start records, their data hashes and their index entries.
-- KEYS: 1 runs hash, 2 run purges, 3 the project's run index, 4.. the data hash of each run of ARGV
-- ARGV: 1 customerId, 2 nowMs, 3.. the runIds of the tree, the root first (it names the purge
--       entry); the data hash of ARGV[i] is KEYS[i + 1]
-- Returns the number of runs forgotten: 0 when the root is not due (or is gone).
local member = ARGV[1] .. '\t' .. ARGV[3]
local due = redis.call('ZSCORE', KEYS[2], member)
if not due or tonumber(due) > tonumber(ARGV[2]) then return 0 end
local n = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', KEYS[1], id .. ':st', id .. ':sk')
  if f[1] then
    if f[1] == 'running' then return redis.error_reply('purgeRuns: run ' .. id .. ' is still running') end
    redis.call('HDEL', KEYS[1], id .. ':st', id .. ':dl', id .. ':b', id .. ':c', id .. ':k', id .. ':p', id .. ':x', id .. ':kids', id .. ':a',
      id .. ':e', id .. ':cu', id .. ':m', id .. ':sk', id .. ':ls', id .. ':tc')
    if f[2] then redis.call('HDEL', KEYS[1], 's:' .. f[2]) end
    redis.call('DEL', KEYS[i + 1])
    redis.call('HDEL', KEYS[3], id)
    n = n + 1
  end
end
redis.call('ZREM', KEYS[2], member)
return n
