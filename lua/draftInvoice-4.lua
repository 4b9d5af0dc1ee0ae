--[[
  Drafts the invoice of one billing cycle, only if it does not exist yet (src/invoices/README.md).
  The id is deterministic from (project, customer, subscription, cycle start), so a second worker,
  or the same worker again, finds the draft of the first and continues from it: never a second one.
  The invoice joins the project's and its customer's invoice indexes in the same call, so every
  invoice that exists is listed (POST /v1/invoices/list).
  KEYS[1] the invoice hash        mg:{cat:P}:inv:<invoiceId>
  KEYS[2] the subscription's billing hash   mg:{cat:P}:invsub:<subscriptionId>
  KEYS[3] the project's invoice index       mg:{cat:P}:invidx           (sorted set, every score 0)
  KEYS[4] the customer's invoice index      mg:{cat:P}:invidx:c:<customerId>
  ARGV[1] the billing hash's `rev` the draft was computed from ('0' when none)
  ARGV[2] invoice JSON (status draft)   ARGV[3] lines JSON   ARGV[4] the amount the wallet is asked
          to cover (decimal integer text, opaque here)   ARGV[5] the `billed:<cycleStart>` field of
          this cycle   ARGV[6] its JSON   ARGV[7] the invoice's index member
          (`<issue_date>:<statement_start_at>:<invoiceId>`, numbers as 15 digits: newest sorts last)
          ARGV[8] n, then n pairs of `billed:<start>` field and JSON (earlier cycles whose late
          usage this invoice bills), then fields to delete (cycles past the late-usage window)
  Returns {'created'} | {'exists', status, invoice, lines, dueTotal} | {'rev_changed', rev}.
  The invoice hash also keeps `rated` (this cycle's usage quantities as first billed).
  Nothing is written unless 'created'. No amount is computed here: they are text the gateway made.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local stored = redis.call('HMGET', KEYS[1], 'status', 'invoice', 'lines', 'dueTotal')
  return { 'exists', stored[1], stored[2], stored[3], stored[4] }
end
local rev = redis.call('HGET', KEYS[2], 'rev') or '0'
if rev ~= ARGV[1] then return { 'rev_changed', rev } end

redis.call('HSET', KEYS[1], 'status', 'draft', 'invoice', ARGV[2], 'lines', ARGV[3], 'dueTotal', ARGV[4], 'rated', ARGV[6])
redis.call('ZADD', KEYS[3], 0, ARGV[7])
redis.call('ZADD', KEYS[4], 0, ARGV[7])
redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
local n = tonumber(ARGV[8])
local i = 9
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
  i = i + 1
end
redis.call('HINCRBY', KEYS[2], 'rev', 1)
return { 'created' }
