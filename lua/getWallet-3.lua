-- The balance of a customer's wallet; credits past their expiry are expired first (journaled).
-- KEYS: 1 wallet hash, 2 credits hash, 3 journal list (mg:{cat:<project>}:journal)
-- ARGV: 1 projectId, 2 customerId, 3 nowMs
-- Returns walletReply: 'ok', currency, available hi/lo, held hi/lo, then 9 values per credit.
--@include money
--@include wallet
local w = walletLoad(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]))
walletExpire(w)
walletSave(w)
return walletReply(w, 'ok')
