-- Expires a customer's runs that are past their deadline (the background sweep).
-- KEYS: 1 runs hash, 2 wallet hash, 3 credits hash, 4 journal list, 5 run deadlines, 6 run purges,
--       7 lease settlements
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4.. runIds the sweep found due
-- Returns the number of runs it ended (descendants included). A run no longer running is
-- dropped from the deadlines.
--@include money
--@include wallet
--@include runs
local ctx = runContext(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]))
for i = 4, #ARGV do
  local r = runLoad(ctx, ARGV[i])
  if not r then
    redis.call('ZREM', KEYS[5], ctx.customer .. '\t' .. ARGV[i])
  elseif r.st ~= 'running' then
    ctx.ended[#ctx.ended + 1] = r.id
  else
    runExpireIfDue(ctx, r)
  end
end
runSave(ctx)
return #ctx.ended
