-- Starts a run: reserves its budget from the customer's wallet (a root run), from its parent's
-- remaining (a child run), or records the lease the gateway took on a budget for it (a root run
-- with a lease: the wallet is not touched), once per idempotency key.
-- KEYS: 1 runs hash, 2 wallet hash, 3 credits hash, 4 journal list, 5 run deadlines, 6 run purges,
--       7 lease settlements, 8 the project's counters hash, 9 the project's run index
--       (runId -> '<currency>|<customerId>')
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 idempotencyKey, 5 request fingerprint,
--       6 budget (minor units), 7 x (8 - the currency's exponent), 8 currency, 9 parentRunId or '',
--       10 deadline (epoch ms), 11 the static fields (JSON), 12 the lease ('<lease number>|<budgetKey>',
--       '' for none), 13 '1' when that lease is still open
-- Returns { status, runId, run... (runReply) } with status 'ok' | 'replayed' (the first run) |
-- 'idempotency_conflict' | 'parent_not_found' | 'parent_not_running' | 'currency_mismatch' |
-- 'insufficient_funds' (the wallet's available) | 'insufficient_budget' (the parent's remaining) |
-- 'lease_closed' (the lease ended before this run could start on it). src/runs/errors.ts translates
-- the refusing statuses. Run ids are run_<n>, n from walletNextId (includes/wallet.lua): it only
-- grows, from at least nowMs × 1000, so an id is never handed out twice, even across a lost AOF tail.
--@include money
--@include wallet
--@include runs
local ctx = runContext(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]))
local recordField = 's:' .. ARGV[4]
local record = redis.call('HGET', KEYS[1], recordField)
if record then
  local id, fingerprint = string.match(record, '^([^|]*)|(.*)$')
  if fingerprint ~= ARGV[5] then return { 'idempotency_conflict', id } end
  local r = runLoad(ctx, id)
  runExpireIfDue(ctx, r)
  runSave(ctx)
  return runReply(r, { 'replayed', id })
end

local budget, x, currency, parentId = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], ARGV[9]
local deadline = tonumber(ARGV[10])
local parent = nil
local status = 'ok'
if parentId ~= '' then
  parent = runLoad(ctx, parentId)
  if not parent then
    status = 'parent_not_found'
  elseif runExpireIfDue(ctx, parent) or parent.st ~= 'running' then
    status = 'parent_not_running'
  elseif parent.cu ~= currency then
    status = 'currency_mismatch'
  elseif parent.b - parent.c - parent.k < budget then
    status = 'insufficient_budget'
  end
elseif ARGV[12] ~= '' then
  if ARGV[13] ~= '1' then status = 'lease_closed' end
else
  local w = runWallet(ctx)
  if w.cur ~= '' and w.cur ~= currency then
    status = 'currency_mismatch'
  else
    local ah, al = walletTotals(w)
    local bh, bl = runMinorToPair(budget, x)
    if w.cur == '' or moneyCmp(ah, al, bh, bl) < 0 then status = 'insufficient_funds' end
  end
end
if status ~= 'ok' then
  -- Expiries found on the way (credits, a parent past its deadline) are kept.
  runSave(ctx)
  return { status, '' }
end

local id = walletNextId(KEYS[8], 'run', 'run_', ctx.now)
local r = { id = id, st = 'running', dl = deadline, b = budget, c = 0, k = 0, p = parentId, x = x, kids = '', a = '', e = 0, cu = currency, m = ARGV[11], sk = ARGV[4], ls = '' }
if parent then
  r.ls = parent.ls
  if parent.dl < r.dl then r.dl = parent.dl end
  parent.k = parent.k + budget
  parent.kids = parent.kids .. id .. ','
  ctx.dirty[parent.id] = true
elseif ARGV[12] ~= '' then
  local n, budgetKey = string.match(ARGV[12], '^([^|]*)|(.*)$')
  r.ls = n .. '|' .. id .. '|' .. budgetKey
else
  local w = ctx.w
  local bh, bl = runMinorToPair(budget, x)
  local allocs = walletTake(w, bh, bl, true)
  local parts = {}
  for i, a in ipairs(allocs) do
    if a[1] == '' then
      w.hh, w.hl = moneyAdd(w.hh, w.hl, a[3], a[4])
    else
      local c = w.byId[a[1]]
      c.hh, c.hl = moneyAdd(c.hh, c.hl, a[3], a[4])
    end
    w.changed = true
    walletRow(w, 'hold:' .. id .. ':' .. i, 'hold', a[2], a[1], a[3], a[4], id, '', ARGV[4])
    parts[#parts + 1] = a[1] .. ',' .. a[2] .. ',' .. walletText(0, a[3]) .. ',' .. walletText(0, a[4]) .. ';'
  end
  r.a = table.concat(parts)
end
ctx.runs[id] = r
ctx.created[id] = true
ctx.dirty[id] = true
redis.call('HSET', KEYS[1], recordField, id .. '|' .. ARGV[5])
redis.call('HSET', KEYS[9], id, currency .. '|' .. ARGV[2])
runSave(ctx)
return runReply(r, { 'ok', id })
