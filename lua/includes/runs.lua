-- Runs of one customer (src/runs/README.md): leases on the customer's wallet, all in one hash
-- (fields `<runId>:<name>`) under the project's hash tag, beside the wallet, so one script can
-- move a reservation between a run, its parent and the wallet. Amounts of runs are integers in
-- minor currency units (below 2^53, exact doubles); `x` is 8 minus the currency's exponent, the
-- power of ten from minor units to ledger scale 8.
-- Fields: st status, dl deadline (ms), b budget, c consumed, k held by running children, p parent
-- id, x, cu currency, kids ("id,id,"), a the wallet allocations of a root run
-- ("creditId,source,hi,lo;" with '' for cash), e endedAt, m the static fields as JSON;
-- sk the start's idempotency key (its record is the field s:<key>); ls the lease of a run tree
-- that leases from a budget ("<lease number>|<root runId>|<budgetKey>", on the root and every
-- descendant; '' otherwise), tc on such a root: what the whole tree consumed so far (every
-- accepted consume adds to it, so it can be reported to the budget while children run).
-- What consumes write (the cost and quantity so far per feature, the records of accepted
-- consumes) is in the run's own data hash (consumeRun). runContext takes the script's KEYS,
-- expected as: 1 runs hash, 2 wallet hash, 3 credits hash, 4 journal list, 5 the project's run
-- deadlines and 6 the project's ended root runs by purge time (sorted sets of
-- "<customerId>\t<runId>"), 7 the project's lease settlements to make (a hash
-- "<customerId>\t<runId>" -> "<lease number>|<consumed>|<x>|<budgetKey>" of ended leasing roots,
-- which the gateway settles at the budget, another slot, and then deletes).

-- How long an ended run tree is kept (get, replays) before the sweep forgets it.
local RUN_RETENTION_MS = 86400000

local RUN_POW10 = { [0] = 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
  10000000000, 100000000000, 1000000000000, 10000000000000, 100000000000000 }

local function runContext(keys, projectId, customerId, nowMs)
  return { keys = keys, project = projectId, customer = customerId, now = nowMs, runs = {}, dirty = {}, ended = {}, created = {}, purge = {}, leases = {}, w = nil }
end

-- Minor units → a money pair at ledger scale 8.
local function runMinorToPair(m, x)
  local d = RUN_POW10[14 - x]
  local r = m % d
  return (m - r) / d, r * RUN_POW10[x]
end

-- A money pair at ledger scale 8 → minor units, rounded up.
local function runCeilMinor(h, l, x)
  local d = RUN_POW10[x]
  local r = l % d
  return h * RUN_POW10[14 - x] + (l - r) / d + (r > 0 and 1 or 0)
end

local function runLoad(ctx, id)
  local r = ctx.runs[id]
  if r then return r end
  local f = redis.call('HMGET', ctx.keys[1], id .. ':st', id .. ':dl', id .. ':b', id .. ':c', id .. ':k', id .. ':p', id .. ':x', id .. ':kids', id .. ':a', id .. ':e', id .. ':cu', id .. ':m', id .. ':ls')
  if not f[1] then return nil end
  r = {
    id = id, st = f[1], dl = tonumber(f[2]), b = tonumber(f[3]), c = tonumber(f[4]), k = tonumber(f[5]), p = f[6] or '',
    x = tonumber(f[7]), kids = f[8] or '', a = f[9] or '', e = tonumber(f[10]) or 0, cu = f[11] or '', m = f[12] or '{}', ls = f[13] or '',
  }
  ctx.runs[id] = r
  return r
end

local function runWallet(ctx)
  if not ctx.w then
    ctx.w = walletLoad(ctx.keys[2], ctx.keys[3], ctx.keys[4], ctx.project, ctx.customer, ctx.now)
    walletExpire(ctx.w)
  end
  return ctx.w
end

-- Ends a root run at the wallet: its consumption (minor units) is captured from its allocations
-- in order (credits first, as reserved), the rest goes back (a part of an expired credit expires).
local function runSettleWallet(ctx, r)
  local w = runWallet(ctx)
  local rh, rl = runMinorToPair(r.c, r.x)
  local i = 0
  for cid, source, ah, al in string.gmatch(r.a, '([^,;]*),([^,;]*),([^,;]*),([^,;]*);') do
    i = i + 1
    ah, al = tonumber(ah), tonumber(al)
    local uh, ul = ah, al
    if moneyCmp(rh, rl, ah, al) < 0 then uh, ul = rh, rl end
    rh, rl = moneySub(rh, rl, uh, ul)
    local bh, bl = moneySub(ah, al, uh, ul)
    if uh > 0 or ul > 0 then walletRow(w, 'capture:' .. r.id .. ':' .. i, 'capture', source, cid, uh, ul, r.id, '', '') end
    if cid == '' then
      w.hh, w.hl = moneySub(w.hh, w.hl, ah, al)
      w.ah, w.al = moneyAdd(w.ah, w.al, bh, bl)
      w.changed = true
      if bh > 0 or bl > 0 then walletRow(w, 'release:' .. r.id .. ':' .. i, 'release', source, cid, bh, bl, r.id, '', '') end
    else
      local c = w.byId[cid]
      c.hh, c.hl = moneySub(c.hh, c.hl, ah, al)
      w.dirty[cid] = true
      if bh > 0 or bl > 0 then
        if walletCreditExpired(w, c) then
          walletRow(w, 'expiry:' .. cid .. ':' .. r.id, 'credit_expiry', source, cid, bh, bl, r.id, '', '')
        else
          c.ah, c.al = moneyAdd(c.ah, c.al, bh, bl)
          walletRow(w, 'release:' .. r.id .. ':' .. i, 'release', source, cid, bh, bl, r.id, '', '')
        end
      end
    end
  end
end

-- Ends a running run: its running descendants first (expired when past their deadline, else
-- canceled), then it gives what it did not consume back to its parent, or settles at the wallet;
-- a root leasing from a budget leaves its settlement (its consumed) to the gateway instead.
local function runEnd(ctx, r, status)
  for kid in string.gmatch(r.kids, '[^,]+') do
    local c = runLoad(ctx, kid)
    if c and c.st == 'running' then runEnd(ctx, c, c.dl <= ctx.now and 'expired' or 'canceled') end
  end
  r.st, r.e = status, ctx.now
  ctx.dirty[r.id] = true
  ctx.ended[#ctx.ended + 1] = r.id
  if r.p ~= '' then
    local p = runLoad(ctx, r.p)
    p.c = p.c + r.c
    p.k = p.k - r.b
    ctx.dirty[p.id] = true
  else
    if r.ls == '' then
      runSettleWallet(ctx, r)
    else
      local n, budgetKey = string.match(r.ls, '^([^|]*)|[^|]*|(.*)$')
      ctx.leases[#ctx.leases + 1] = { ctx.customer .. '\t' .. r.id, n .. '|' .. string.format('%d', r.c) .. '|' .. string.format('%d', r.x) .. '|' .. budgetKey }
    end
    ctx.purge[#ctx.purge + 1] = r.id
  end
end

-- Expires a running run past its deadline; true when it did.
local function runExpireIfDue(ctx, r)
  if r.st == 'running' and r.dl <= ctx.now then
    runEnd(ctx, r, 'expired')
    return true
  end
  return false
end

local function runSave(ctx)
  for id in pairs(ctx.dirty) do
    local r = ctx.runs[id]
    if ctx.created[id] then
      redis.call('HSET', ctx.keys[1], id .. ':st', r.st, id .. ':dl', r.dl, id .. ':b', r.b, id .. ':c', r.c, id .. ':k', r.k, id .. ':p', r.p,
        id .. ':x', r.x, id .. ':kids', r.kids, id .. ':a', r.a, id .. ':e', r.e, id .. ':cu', r.cu, id .. ':m', r.m, id .. ':sk', r.sk, id .. ':ls', r.ls)
      redis.call('ZADD', ctx.keys[5], r.dl, ctx.customer .. '\t' .. id)
    else
      redis.call('HSET', ctx.keys[1], id .. ':st', r.st, id .. ':c', r.c, id .. ':k', r.k, id .. ':kids', r.kids, id .. ':e', r.e)
    end
  end
  for _, id in ipairs(ctx.ended) do redis.call('ZREM', ctx.keys[5], ctx.customer .. '\t' .. id) end
  for _, id in ipairs(ctx.purge) do redis.call('ZADD', ctx.keys[6], ctx.now + RUN_RETENTION_MS, ctx.customer .. '\t' .. id) end
  for _, l in ipairs(ctx.leases) do redis.call('HSET', ctx.keys[7], l[1], l[2]) end
  if ctx.w then walletSave(ctx.w) end
end

-- A run as the scripts answer it: status, budget, consumed, held by children, deadline, endedAt,
-- currency, static fields (JSON), lease ('' when the run does not lease from a budget).
local function runReply(r, out)
  for _, v in ipairs({ r.st, r.b, r.c, r.k, r.dl, r.e, r.cu, r.m, r.ls }) do out[#out + 1] = v end
  return out
end
