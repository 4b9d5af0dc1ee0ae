--[[
  Checks (and in mode `count`, counts) an amount of one feature against a customer's grants in
  effect, by the feature's overage strategy (src/entitlements/README.md): the synchronous path,
  and the example of calling includes/entitlementUsage.lua from a script.
  KEYS[1] the customer's usage hash, KEYS[2] its entitlement state hash (src/entitlements/keys.ts)
  ARGV the 11 arguments of entitlementUsage (src/entitlements/usage.ts entitlementUsageArgs)
  Returns { allowed (1|0), reason, usedUnits, limitUnits, deniedUntilMs } (see the include).
]]
--@include entitlementUsage
return entitlementUsage(KEYS[1], KEYS[2], ARGV, 1)
