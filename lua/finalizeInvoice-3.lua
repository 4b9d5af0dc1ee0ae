--[[
  Finalizes a drafted invoice: its lines settled (wallet credits applied), its status unpaid or
  paid, the subscription's cursor moved past the cycle, and one journal row per line pushed onto
  the project's outbox, all at once (the team's journal contract: `<table>\t<json row>`).
  KEYS[1] the invoice hash   KEYS[2] the subscription's billing hash   KEYS[3] mg:{cat:P}:journal
  ARGV[1] the final status   ARGV[2] invoice JSON   ARGV[3] lines JSON
  ARGV[4] the cycle's end (epoch ms): the cursor moves to it unless already past it
  ARGV[5..] journal entries
  Returns 'finalized' | 'already_final' (another call finalized it: nothing written) | 'invoice_not_found'.
]]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'invoice_not_found' end
if status ~= 'draft' then return 'already_final' end

redis.call('HSET', KEYS[1], 'status', ARGV[1], 'invoice', ARGV[2], 'lines', ARGV[3])
local cursor = tonumber(redis.call('HGET', KEYS[2], 'cursor') or '0')
if tonumber(ARGV[4]) > cursor then redis.call('HSET', KEYS[2], 'cursor', ARGV[4]) end
for i = 5, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
return 'finalized'
