--[[
  Sets access flags of a customer that exists (one the catalog created).
  KEYS[1] the customer hash
  ARGV pairs of flag field and value: customerDisabled / customerUsageLimitReached ('1' | '0'),
  subscriptionStatus (a status, or '' to forget the override)
  Returns 'ok' or 'customer_not_found'.
]]
if redis.call('HEXISTS', KEYS[1], 'doc') == 0 then return 'customer_not_found' end
for i = 1, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 'ok'
