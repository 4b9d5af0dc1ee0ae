--@include money
-- A customer's wallet (src/wallet/README.md), loaded into a table, changed in memory and written
-- back by walletSave. Amounts are money pairs at ledger scale 8 (lua/includes/money.lua).
-- Wallet hash fields: cur (currency), ah/al (cash available), hh/hl (cash held by runs), and
-- idempotency records. Credits hash: creditId -> "source|priority|createdAtMs|expiresAtMs|
-- issuedHi|issuedLo|availableHi|availableLo|heldHi|heldLo" (expiresAtMs 0: never).
-- Every movement appends a wallet_journal row to the list walletJournalKey (the outbox).

-- The integer text of a pair (money.lua).
local walletText = moneyDigits

-- The next id of one of the project's sequences: `prefix` .. n, n from the field `field` of the
-- project's counters hash `key` (credit: cr_<n>; run: run_<n>). n = last + 1, but at least
-- nowMs × 1000, so that ids only grow, even across a lost AOF tail: a redis-server restarted from
-- an AOF cut back to its last fsync has the older counter, while the ids handed out after it
-- are still known to clients (and a credit id names a field of the credits hash). Those were
-- below (their millisecond + 1) × 1000 while a sequence takes fewer than 1000 ids per
-- millisecond, so a later millisecond starts past them (the same rule as nextNumber in
-- includes/budget.lua; src/budgets/README.md, "Durability"). 16 digits until the year 2286, exact
-- in a double (below 2^53); old small counters just jump ahead.
local function walletNextId(key, field, prefix, nowMs)
  local last = tonumber(redis.call('HGET', key, field)) or 0
  local seeded = math.floor(nowMs) * 1000
  local n = string.format('%d', (last >= seeded) and (last + 1) or seeded)
  redis.call('HSET', key, field, n)
  return prefix .. n
end

local function walletCreditBefore(a, b)
  if a.priority ~= b.priority then return a.priority > b.priority end
  local ea = a.expiresAt == 0 and 1e300 or a.expiresAt
  local eb = b.expiresAt == 0 and 1e300 or b.expiresAt
  if ea ~= eb then return ea < eb end
  if a.createdAt ~= b.createdAt then return a.createdAt < b.createdAt end
  return a.seq < b.seq
end

local function walletLoad(wkey, ckey, jkey, projectId, customerId, nowMs)
  local f = redis.call('HMGET', wkey, 'cur', 'ah', 'al', 'hh', 'hl')
  local w = {
    wkey = wkey, ckey = ckey, jkey = jkey, project = projectId, customer = customerId, now = nowMs,
    cur = f[1] or '', ah = tonumber(f[2]) or 0, al = tonumber(f[3]) or 0, hh = tonumber(f[4]) or 0, hl = tonumber(f[5]) or 0,
    credits = {}, byId = {}, dirty = {}, rows = {}, changed = false,
  }
  local all = redis.call('HGETALL', ckey)
  for i = 1, #all, 2 do
    local s, p, ca, ea, ih, il, ah, al, hh, hl = string.match(all[i + 1], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
    local c = {
      id = all[i], seq = tonumber(string.match(all[i], '(%d+)$')) or 0, source = s, priority = tonumber(p), createdAt = tonumber(ca), expiresAt = tonumber(ea),
      ih = tonumber(ih), il = tonumber(il), ah = tonumber(ah), al = tonumber(al), hh = tonumber(hh), hl = tonumber(hl),
    }
    w.credits[#w.credits + 1] = c
    w.byId[c.id] = c
  end
  table.sort(w.credits, walletCreditBefore)
  return w
end

local function walletRow(w, movementId, kind, source, creditId, h, l, runId, invoiceId, reference)
  w.rows[#w.rows + 1] = 'wallet_journal\t' .. cjson.encode({
    project_id = w.project, customer_id = w.customer, movement_id = movementId, kind = kind, source = source,
    credit_id = creditId, amount = walletText(h, l), currency = w.cur, run_id = runId, invoice_id = invoiceId,
    reference = reference, ts_ms = w.now,
  })
end

local function walletCreditExpired(w, c)
  return c.expiresAt > 0 and c.expiresAt <= w.now
end

-- Expires the available part of every credit past its expiry (journaled once per credit).
local function walletExpire(w)
  for _, c in ipairs(w.credits) do
    if walletCreditExpired(w, c) and (c.ah > 0 or c.al > 0) then
      walletRow(w, 'expiry:' .. c.id, 'credit_expiry', c.source, c.id, c.ah, c.al, '', '', '')
      c.ah, c.al = 0, 0
      w.dirty[c.id] = true
    end
  end
end

-- Takes up to (h, l) from what is available: live credits in order, then (when useCash) cash.
-- Returns the allocations {creditId or '', source, h, l} and what is left of the amount.
local function walletTake(w, h, l, useCash)
  local allocs = {}
  for _, c in ipairs(w.credits) do
    if h == 0 and l == 0 then break end
    if not walletCreditExpired(w, c) and (c.ah > 0 or c.al > 0) then
      local th, tl = h, l
      if moneyCmp(c.ah, c.al, h, l) < 0 then th, tl = c.ah, c.al end
      c.ah, c.al = moneySub(c.ah, c.al, th, tl)
      h, l = moneySub(h, l, th, tl)
      w.dirty[c.id] = true
      allocs[#allocs + 1] = { c.id, c.source, th, tl }
    end
  end
  if useCash and (h > 0 or l > 0) and (w.ah > 0 or w.al > 0) then
    local th, tl = h, l
    if moneyCmp(w.ah, w.al, h, l) < 0 then th, tl = w.ah, w.al end
    w.ah, w.al = moneySub(w.ah, w.al, th, tl)
    h, l = moneySub(h, l, th, tl)
    w.changed = true
    allocs[#allocs + 1] = { '', 'cash_wallet', th, tl }
  end
  return allocs, h, l
end

-- The sums of what is available and held, over cash and live credits.
local function walletTotals(w)
  local ah, al, hh, hl = w.ah, w.al, w.hh, w.hl
  for _, c in ipairs(w.credits) do
    if not walletCreditExpired(w, c) then ah, al = moneyAdd(ah, al, c.ah, c.al) end
    hh, hl = moneyAdd(hh, hl, c.hh, c.hl)
  end
  return ah, al, hh, hl
end

local function walletSave(w)
  if w.changed then
    redis.call('HSET', w.wkey, 'cur', w.cur, 'ah', walletText(0, w.ah), 'al', walletText(0, w.al), 'hh', walletText(0, w.hh), 'hl', walletText(0, w.hl))
  end
  for id in pairs(w.dirty) do
    local c = w.byId[id]
    if c.ah == 0 and c.al == 0 and c.hh == 0 and c.hl == 0 then
      redis.call('HDEL', w.ckey, id)
    else
      redis.call('HSET', w.ckey, id, table.concat({ c.source, walletText(0, c.priority), walletText(0, c.createdAt), walletText(0, c.expiresAt),
        walletText(0, c.ih), walletText(0, c.il), walletText(0, c.ah), walletText(0, c.al), walletText(0, c.hh), walletText(0, c.hl) }, '|'))
    end
  end
  if #w.rows > 0 then redis.call('RPUSH', w.jkey, unpack(w.rows)) end
end

-- The balance as returned by the wallet scripts: cur, available h/l, held h/l, then per live
-- live credit (available or held > 0) id, source, createdAt, expiresAt, issued h/l, available h/l, priority.
local function walletReply(w, status)
  local ah, al, hh, hl = walletTotals(w)
  local out = { status, w.cur, ah, al, hh, hl }
  for _, c in ipairs(w.credits) do
    if not walletCreditExpired(w, c) and not (c.ah == 0 and c.al == 0 and c.hh == 0 and c.hl == 0) then
      for _, v in ipairs({ c.id, c.source, c.createdAt, c.expiresAt, c.ih, c.il, c.ah, c.al, c.priority }) do out[#out + 1] = v end
    end
  end
  return out
end
