--[[
  Leases on a budget (src/budgets/README.md, "Leases"): a run started with budgetKey reserves
  its budget here like a hold (open), reports what it consumed so far (report: consumed grows,
  held shrinks by as much) and, when it ends, its final total (end: the unreported rest is
  released). A lease past its deadline is closed by every budget script (expireDue), released,
  not settled: a run reports its real usage, and a report that comes later still counts.
  KEYS[1] budget hash, KEYS[2] open-hold index, KEYS[3] purge index, KEYS[4] journal outbox list
  ARGV[1] nowMs, ARGV[2] retentionMs, ARGV[3] 'open' | 'report' | 'end'
  open:        ARGV[4] amount hi, ARGV[5] amount lo, ARGV[6] the run's ttlMs, ARGV[7] expiresAt,
               ARGV[8] the run's currency, ARGV[9] '<customerId>|<idempotency key>' of the run's
               start, ARGV[10] the start's request fingerprint
  report, end: ARGV[4] lease number, ARGV[5] total hi, ARGV[6] total lo (what the run consumed
               so far, at scale 8)
  Returns { 'budget_not_found' } or a budget reply whose status is
  open: ok | replayed | idempotency_conflict | unit_mismatch | budget_closed | ttl_exceeds_max |
        budget_exceeded | amount_overflow (in this order of precedence),
  report, end: ok | replayed (nothing changed) | lease_not_found (forgotten after its retention),
  with s = { lease number, amount hi, amount lo, expiresAt, state (1 open, 2 ended, 4 expired),
  reported hi, reported lo } (ttl_exceeds_max: s[3] = maxTtlMs). A new lease's number comes from
  nextNumber (includes/budget.lua): it only grows, from at least nowMs × 1000.
  src/budgets/errors.ts translates the refusing statuses.
  Only an open that answers ok writes the idempotency record (field il:<ARGV[9]>: the lease
  number, then the fingerprint), kept while the lease is open and the retention after.
]]
--@include money
--@include window
--@include budget

local now, retention, action = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local n = (action == 'open') and nil or ARGV[4]
local b = touchBudget(KEYS, now, retention, (action == 'open') and ('il:' .. ARGV[9]) or ('l' .. n))
if b == nil then return { 'budget_not_found' } end

local h = nil
local function answer(status, s)
  saveBudget(b, KEYS[1])
  if s == nil and h ~= nil then s = { n, h.hi, h.lo, h.exp, h.state, h.shi, h.slo } end
  return budgetReply(b, status, s or {})
end

if action == 'open' then
  local ah, al, ttl, expiresAt = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local prior = b.extra
  if prior then
    if string.sub(prior, 9) ~= ARGV[10] then return answer('idempotency_conflict') end
    n = int(struct.unpack('<d', prior))
    h = b.closed['l' .. n]
    if h == nil then
      local rec = redis.call('HGET', KEYS[1], 'l' .. n)
      if not rec then return answer('idempotency_conflict') end
      h = unpackHold(rec)
    end
    return answer('replayed')
  end
  if string.upper(redis.call('HGET', KEYS[1], 'unit') or '') ~= ARGV[8] then return answer('unit_mismatch') end
  if b.closes >= 0 and b.closes <= now then return answer('budget_closed') end
  if ttl > b.mttl then return answer('ttl_exceeds_max', { '', '', b.mttl }) end
  if not fitsHardLimits(b, ah, al) then return answer('budget_exceeded') end
  if not pairRoom(b, ah) then return answer('amount_overflow') end

  n = int(nextNumber(tonumber(redis.call('HGET', KEYS[1], 'lseq')) or 0, now))
  h = { state = OPEN, hi = ah, lo = al, exp = expiresAt, shi = 0, slo = 0, idem = ARGV[9] }
  b.hh, b.hl = moneyAdd(b.hh, b.hl, ah, al)
  if b.nexp < 0 or expiresAt < b.nexp then b.nexp = expiresAt end
  b.dirty = true
  local w = b.writes
  w[#w + 1] = 'lseq'
  w[#w + 1] = n
  w[#w + 1] = 'l' .. n
  w[#w + 1] = packHold(h)
  w[#w + 1] = 'il:' .. ARGV[9]
  w[#w + 1] = struct.pack('<d', tonumber(n)) .. ARGV[10]
  b.later[#b.later + 1] = { 'ZADD', KEYS[2], int(expiresAt), 'l' .. n }
  return answer('ok')
end

-- report, end. HMGET gives false for a missing field; a lease expired on the way is in b.closed.
h = b.closed['l' .. n] or (b.extra and unpackHold(b.extra)) or nil
if h == nil then return answer('lease_not_found') end
local th, tl = tonumber(ARGV[5]), tonumber(ARGV[6])
local dh, dl = leaseReport(b, KEYS, n, h, th, tl, now)
local changed = dh > 0 or dl > 0
if action == 'end' and h.state == OPEN then
  leaseClose(b, KEYS, n, h, SETTLED, now, retention)
  changed = true
end
return answer(changed and 'ok' or 'replayed')
