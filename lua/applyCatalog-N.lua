--[[
  Applies a validated catalog document: the catalog and every customer it touches, all or
  nothing. The gateway validated and built everything; this script only checks that the catalog
  is still the version the gateway read (optimistic concurrency) and writes.
  KEYS[1] the catalog hash, KEYS[2..] the customer hashes to write (all under one hash tag)
  ARGV[1] the catalog version the gateway read (0: there was no catalog), ARGV[2] catalog JSON,
  ARGV[3] index JSON, then 3 values per customer key: src JSON, doc JSON, and '1' to forget the
  subscriptionStatus access flag (the document changed that customer's subscriptions) or '0'.
  Returns { 'ok', new version } or { 'version_conflict', current version }.
  The access flags (customerDisabled, customerUsageLimitReached) are never written here: they
  belong to /v1/access/update.
]]
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  return { 'version_conflict', current }
end

-- Nothing below can fail on valid input, so the script writes all of it or (on a conflict) none.
local version = current + 1
redis.call('HSET', KEYS[1], 'version', version, 'catalog', ARGV[2], 'index', ARGV[3])
for i = 2, #KEYS do
  local at = 3 + (i - 2) * 3
  redis.call('HSET', KEYS[i], 'src', ARGV[at + 1], 'doc', ARGV[at + 2])
  if ARGV[at + 3] == '1' then redis.call('HDEL', KEYS[i], 'subscriptionStatus') end
end
return { 'ok', version }
