-- Applies a priced metered event to a running run (spec 4.5), once per idempotency key.
-- KEYS: 1 runs hash, 2 wallet hash, 3 credits hash, 4 journal list, 5 run deadlines, 6 run purges,
--       7 lease settlements, 8 the customer's catalog hash (access flags), 9 the catalog hash
--       (version), 10 the customer's entitlement state hash (featureSlug -> deniedUntilMs),
--       11 the run's data hash: l:<feature> its cost of the feature so far at ledger scale 8
--       ("hi|lo"), u:<feature> its quantity so far (tiered and package prices), i:<key> the cost
--       of an accepted consume, 12 the customer's entitlement usage hash (src/entitlements)
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 runId, 5 idempotencyKey, 6 featureSlug,
--       7 '1' when the gateway found an entitlement in effect, 8 mode: 'add' (ARGV 9/10 are the
--       event's cost at ledger scale 8) or 'set' (ARGV 9/10 are the feature's new cost total),
--       9 hi, 10 lo, 11 the catalog version the gateway priced with, 12 the subscriptionStatus
--       flag it saw, 13 the quantity so far it priced from ('set'), 14 the new quantity ('set'),
--       15 the usage_events row (JSON) to journal when accepted,
--       16..26 (when the feature has an entitlement in effect) the 11 arguments of
--       entitlementUsage, mode 'check': the event's quantity checked against the customer's grants
--       by the overage strategy, and counted (mode 'count') when the consume is accepted, so run
--       usage counts against grants like recorded usage, exactly once (the consume's record)
-- Returns { reason, cost (minor units), run... } with reason, in order of precedence (accepted, for a
-- run of a tree leasing from a budget, then adds what the tree consumed so far, its root's tc;
-- and when its count took the customer's usage of the feature to its limit for the first time
-- in the period, last, the table { usedUnits, limitUnits, deniedUntilMs }: the limit.reached
-- decision, src/notifications/README.md):
-- 'run_not_found' (alone) | 'duplicate' | 'expired' | 'not_running' | 'stale' (the catalog
-- changed: price again) | 'entitlement_denied' | 'stale_usage' (then the quantity so far, alone
-- with it: price again) | 'insufficient_budget' | 'accepted'. src/runs/errors.ts translates the
-- refusing ones (run_not_found; stale and stale_usage once the gateway stops retrying).
--@include money
--@include wallet
--@include runs
--@include entitlementUsage
local ctx = runContext(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]))
local id, slug = ARGV[4], ARGV[6]
local r = runLoad(ctx, id)
if not r then return { 'run_not_found', 0 } end
local recordField = 'i:' .. ARGV[5]
local costField, usageField = 'l:' .. slug, 'u:' .. slug
-- The run's data in one read: this key's record, the feature's cost and quantity so far.
local stored = redis.call('HMGET', KEYS[11], recordField, costField, usageField)
local record = stored[1]
if record then return runReply(r, { 'duplicate', tonumber(record) }) end
if runExpireIfDue(ctx, r) then
  runSave(ctx)
  return runReply(r, { 'expired', 0 })
end
if r.st == 'expired' then return runReply(r, { 'expired', 0 }) end
if r.st ~= 'running' then return runReply(r, { 'not_running', 0 }) end

local flags = redis.call('HMGET', KEYS[8], 'customerDisabled', 'subscriptionStatus')
local version = redis.call('HGET', KEYS[9], 'version') or ''
if version ~= ARGV[11] or (flags[2] or '') ~= ARGV[12] then return runReply(r, { 'stale', 0 }) end
local counting = ARGV[16] ~= nil
local denied
if counting then
  denied = entitlementUsage(KEYS[12], KEYS[10], ARGV, 16)[1] == 0
else
  local deniedUntil = tonumber(redis.call('HGET', KEYS[10], slug) or '')
  denied = deniedUntil ~= nil and deniedUntil > ctx.now
end
if flags[1] == '1' or ARGV[7] ~= '1' or denied then
  return runReply(r, { 'entitlement_denied', 0 })
end

local oh, ol = 0, 0
if stored[2] then
  local h, l = string.match(stored[2], '^([^|]*)|(.*)$')
  oh, ol = tonumber(h), tonumber(l)
end
local nh, nl
if ARGV[8] == 'add' then
  nh, nl = moneyAdd(oh, ol, tonumber(ARGV[9]), tonumber(ARGV[10]))
else
  if (stored[3] or '0') ~= ARGV[13] then return { 'stale_usage', 0, stored[3] or '0' } end
  nh, nl = tonumber(ARGV[9]), tonumber(ARGV[10])
end
local cost = runCeilMinor(nh, nl, r.x) - runCeilMinor(oh, ol, r.x)
if cost < 0 then cost = 0 end
if cost > r.b - r.c - r.k then return runReply(r, { 'insufficient_budget', cost }) end

r.c = r.c + cost
ctx.dirty[id] = true
local fields = { recordField, cost, costField, walletText(0, nh) .. '|' .. walletText(0, nl) }
if ARGV[8] == 'set' then
  fields[#fields + 1] = usageField
  fields[#fields + 1] = ARGV[14]
end
redis.call('HSET', KEYS[11], unpack(fields))
redis.call('RPUSH', KEYS[4], 'usage_events\t' .. ARGV[15])
local reached
if counting then
  ARGV[26] = 'count'
  local counted = entitlementUsage(KEYS[12], KEYS[10], ARGV, 16)
  if counted[6] == 1 then reached = { counted[3], counted[4], counted[5] } end
end
runSave(ctx)
local reply = runReply(r, { 'accepted', cost })
if r.ls ~= '' then
  reply[#reply + 1] = redis.call('HINCRBY', KEYS[1], string.match(r.ls, '^[^|]*|([^|]*)|') .. ':tc', cost)
end
if reached then reply[#reply + 1] = reached end
return reply
