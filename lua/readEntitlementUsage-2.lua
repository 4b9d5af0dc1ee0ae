--[[
  Reads a customer for the entitlement routes in one call: its catalog hash (read document and
  access flags) and its usage counters, as one snapshot (src/entitlements/README.md).
  KEYS[1] the customer hash (src/catalog/keys.ts), KEYS[2] its usage hash (src/entitlements/keys.ts)
  Returns { HGETALL of KEYS[1], HGETALL of KEYS[2] } (flat field/value lists).
]]
return { redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]) }
