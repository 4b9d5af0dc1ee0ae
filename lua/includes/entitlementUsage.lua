-- Counts usage of one feature of one customer against the grants in effect, with the feature's
-- overage strategy (src/entitlements/README.md). One function, so that any script of the
-- project's slot `{cat:<projectId>}` can check and count an entitlement atomically with its own
-- writes (runs consume, the ingest claim).
--
-- entitlementUsage(usageKey, stateKey, a, i[, batch])
--   usageKey  mg:{cat:P}:eu:<customerId>, a hash: field <featureSlug> = the feature's counters
--   stateKey  mg:{cat:P}:es:<customerId>, a hash: field <featureSlug> = deniedUntilMs while denied
--   a[i .. i+10] (strings, as src/entitlements/usage.ts entitlementUsageArgs builds them):
--     i    featureSlug
--     i+1  nowMs (the decision's clock)
--     i+2  periodStartMs, i+3 periodEndMs: the reset period holding nowMs, [start, end)
--     i+4  overage strategy: none | last-call | always
--     i+5  aggregation method: sum | count | max | latest
--     i+6  amountHi, i+7 amountLo: the event's amount in units of 10^-8 as a (hi, lo) pair
--     i+8  eventTsMs (orders `latest` values)
--     i+9  grants in effect, highest priority first: "<grantId>=<hi>:<lo>,..." (allowances), or ''
--     i+10 mode: count (check, and count when allowed) | check (check only, writes nothing)
-- Returns { allowed (1|0), reason, usedUnits, limitUnits, deniedUntilMs, reached (1|0) }:
--   reason: counted | unchanged (allowed; a max/latest value that does not change the
--   aggregate) | checked (mode check, allowed) | denied (the strategy refuses the amount; in
--   count mode it is added to the period's `refused`) | period_closed (the period is older than
--   the stored one: periods only move forward; nothing counted)
--   usedUnits / limitUnits: usage counted against the grants in effect after the call, and the
--   sum of their allowances, as integer strings of units of 10^-8
--   deniedUntilMs: the period's end when the feature is denied after the call, else 0
--   reached: 1 when this call (mode count) is the one that took usage to the limit
--     (usedUnits >= limitUnits, any strategy) for the first time in the period: the decision
--     limit.reached is sent from (src/notifications/README.md). The period's counters keep a
--     marker, so it is 1 once per customer, feature and period, whatever the retries.
-- batch (optional): a table the caller keeps for one script call when it counts many amounts
--   (the ingest claim): counters are read once per customer and feature, kept in it, and
--   written by one final call entitlementUsage(nil, nil, nil, nil, batch); such calls return
--   allowed (1|0), reason and, for the call that reached the limit, { usedUnits, limitUnits,
--   deniedUntilMs } as a third value (else nil). Without it every call reads and writes its
--   counters itself and returns the table above.
-- The stored field is
-- "<periodStart>;<periodEnd>;<usage>;<overage>;<refused>;<latestTs>;<grants>;<reached>;<countedAt>"
-- with pairs as "hi:lo", grants as "<grantId>=hi:lo,..." (consumed per grant this period), reached
-- 1 once the period's usage reached the limit ('' before), and countedAt the greatest nowMs of the
-- period's counts (mode count; the decision's clock: when the gateway accepted the event, or the
-- consume's now), which the read routes answer as usageAsOf. Fields written before a marker
-- existed end earlier (with the grants, or with reached): a missing one reads as ''.
--@include money
local entitlementUsage
do
  local add, sub, cmp = moneyAdd, moneySub, moneyCmp
  local function pair(s)
    local h, l = string.match(s or '', '^(%d+):(%d+)$')
    if not h then return 0, 0 end
    return tonumber(h), tonumber(l)
  end
  local function text(h, l) return string.format('%.0f:%.0f', h, l) end
  local units = moneyDigits

  -- A feature's counters of a period, fresh.
  local function fresh(st, periodStart, periodEnd)
    st.ps, st.pe = periodStart, periodEnd
    st.uh, st.ul, st.oh, st.ol, st.rh, st.rl, st.lt = 0, 0, 0, 0, 0, 0, -1
    st.consumed, st.order = {}, {}
    st.reached = false
    st.ca = nil
  end

  -- The stored counters of a feature (nil: none yet).
  local function load(usageKey, stateKey, feature)
    local st = { key = usageKey, stateKey = stateKey, feature = feature }
    local raw = redis.call('HGET', usageKey, feature)
    if not raw then return st end
    local ps, pe, u, o, r, lt, gs, reached, ca = string.match(raw, '^([^;]*);([^;]*);([^;]*);([^;]*);([^;]*);([^;]*);([^;]*);?([^;]*);?(.*)$')
    fresh(st, tonumber(ps), tonumber(pe))
    st.reached = reached == '1'
    st.ca = tonumber(ca)
    st.uh, st.ul = pair(u)
    st.oh, st.ol = pair(o)
    st.rh, st.rl = pair(r)
    st.lt = tonumber(lt)
    for id, h, l in string.gmatch(gs, '([^=,]+)=(%d+):(%d+)') do
      st.consumed[id] = { tonumber(h), tonumber(l) }
      st.order[#st.order + 1] = id
    end
    return st
  end

  -- Usage against the limit: what the grants in effect gave, plus overage (sum, count); the
  -- aggregate itself (max, latest).
  local function usedOf(st, grants, additive)
    if not additive then return st.uh, st.ul end
    local h, l = st.oh, st.ol
    local consumed = st.consumed
    for k = 1, #grants do
      local c = consumed[grants[k].id]
      if c then h, l = add(h, l, c[1], c[2]) end
    end
    return h, l
  end

  -- "<id>=<hi>:<lo>,..." as { {id, h, l}, ... } and the sum of the allowances.
  local function parseGrants(spec)
    local grants, limitH, limitL = {}, 0, 0
    for id, h, l in string.gmatch(spec, '([^=,]+)=(%d+):(%d+)') do
      local g = { id = id, h = tonumber(h), l = tonumber(l) }
      grants[#grants + 1] = g
      limitH, limitL = add(limitH, limitL, g.h, g.l)
    end
    return { grants = grants, h = limitH, l = limitL }
  end

  local function take(st, id, h, l)
    local c = st.consumed[id]
    if not c then
      c = { 0, 0 }
      st.consumed[id] = c
      st.order[#st.order + 1] = id
    end
    c[1], c[2] = add(c[1], c[2], h, l)
  end

  local function store(st)
    local parts = {}
    for _, id in ipairs(st.order) do parts[#parts + 1] = id .. '=' .. text(st.consumed[id][1], st.consumed[id][2]) end
    redis.call('HSET', st.key, st.feature, string.format('%.0f;%.0f;%s;%s;%s;%.0f;%s;%s;%s',
      st.ps, st.pe, text(st.uh, st.ul), text(st.oh, st.ol), text(st.rh, st.rl), st.lt, table.concat(parts, ','),
      st.reached and '1' or '', st.ca and string.format('%.0f', st.ca) or ''))
    if st.deniedUntil > 0 then
      redis.call('HSET', st.stateKey, st.feature, string.format('%.0f', st.deniedUntil))
    else
      redis.call('HDEL', st.stateKey, st.feature)
    end
  end

  entitlementUsage = function(usageKey, stateKey, a, i, batch)
    if usageKey == nil then
      for _, st in pairs(batch) do
        if st.dirty then store(st) end
      end
      return
    end
    local feature = a[i]
    local periodStart, periodEnd = tonumber(a[i + 2]), tonumber(a[i + 3])
    local strategy, method = a[i + 4], a[i + 5]
    local amountH, amountL = tonumber(a[i + 6]), tonumber(a[i + 7])
    local eventTs, mode = tonumber(a[i + 8]), a[i + 10]

    -- The grants in effect, in priority order, and the limit: the sum of their allowances
    -- (parsed once per batch: the events of a customer mostly share them).
    local spec = a[i + 9]
    local parsed
    if batch then
      local cache = batch[1]
      if not cache then
        cache = {}
        batch[1] = cache
      end
      parsed = cache[spec]
      if not parsed then
        parsed = parseGrants(spec)
        cache[spec] = parsed
      end
    else
      parsed = parseGrants(spec)
    end
    local grants, limitH, limitL = parsed.grants, parsed.h, parsed.l

    -- The counters; a newer period starts from zero, an older one is closed.
    local cacheKey = usageKey .. '\0' .. feature
    local st = batch and batch[cacheKey]
    if not st then
      st = load(usageKey, stateKey, feature)
      if batch then batch[cacheKey] = st end
    end
    if st.ps ~= nil and st.ps > periodStart then
      if batch then return 0, 'period_closed' end
      return { 0, 'period_closed', '0', units(limitH, limitL), 0, 0 }
    end
    local restart = st.ps == nil or st.ps < periodStart
    if restart and mode ~= 'count' then
      st = { key = usageKey, stateKey = stateKey, feature = feature }
      restart = false
      fresh(st, periodStart, periodEnd)
    end
    if restart then fresh(st, periodStart, periodEnd) end
    st.pe = periodEnd
    local consumed = st.consumed
    local additive = method == 'sum' or method == 'count'
    local usedH, usedL = usedOf(st, grants, additive)
    local atLimit = strategy ~= 'always' and cmp(usedH, usedL, limitH, limitL) >= 0

    -- The aggregate after this amount, and whether it changes anything.
    local nextH, nextL = amountH, amountL
    local changes = true
    if additive then
      nextH, nextL = add(usedH, usedL, amountH, amountL)
    elseif method == 'max' then
      changes = cmp(amountH, amountL, st.uh, st.ul) > 0
    else
      changes = eventTs >= st.lt
    end

    local allowed
    if atLimit then
      allowed = false
    elseif strategy == 'none' then
      allowed = not changes or cmp(nextH, nextL, limitH, limitL) <= 0
    else
      allowed = true
    end

    local denies = strategy ~= 'always'
    if mode ~= 'count' then
      local until_ = (denies and cmp(usedH, usedL, limitH, limitL) >= 0) and periodEnd or 0
      return { allowed and 1 or 0, allowed and 'checked' or 'denied', units(usedH, usedL), units(limitH, limitL), until_, 0 }
    end

    local reason
    if not allowed then
      st.rh, st.rl = add(st.rh, st.rl, amountH, amountL)
      reason = 'denied'
    elseif not changes then
      reason = 'unchanged'
    else
      reason = 'counted'
      local remH, remL
      if additive then
        st.uh, st.ul = add(st.uh, st.ul, amountH, amountL)
        remH, remL = amountH, amountL
      else
        -- The new value is spread over the grants in effect from scratch.
        st.uh, st.ul = nextH, nextL
        if method == 'latest' then st.lt = eventTs end
        for k = 1, #grants do
          local c = consumed[grants[k].id]
          if c then c[1], c[2] = 0, 0 end
        end
        st.oh, st.ol = 0, 0
        remH, remL = nextH, nextL
      end
      for k = 1, #grants do
        local g = grants[k]
        if remH == 0 and remL == 0 then break end
        local c = consumed[g.id]
        local ch, cl = 0, 0
        if c then ch, cl = c[1], c[2] end
        if cmp(ch, cl, g.h, g.l) < 0 then
          local freeH, freeL = sub(g.h, g.l, ch, cl)
          if cmp(remH, remL, freeH, freeL) <= 0 then
            take(st, g.id, remH, remL)
            remH, remL = 0, 0
          else
            take(st, g.id, freeH, freeL)
            remH, remL = sub(remH, remL, freeH, freeL)
          end
        end
      end
      st.oh, st.ol = add(st.oh, st.ol, remH, remL)
    end

    -- Every count of the period (counted, unchanged or denied) moves countedAt: the usage read
    -- afterwards takes this event into account.
    local nowMs = tonumber(a[i + 1])
    if not st.ca or nowMs > st.ca then st.ca = nowMs end
    usedH, usedL = usedOf(st, grants, additive)
    local atOrPast = cmp(usedH, usedL, limitH, limitL) >= 0
    st.deniedUntil = (denies and atOrPast) and periodEnd or 0
    st.dirty = true
    -- The one call of the period that finds usage at the limit: it is the decision that reached it.
    local reached = atOrPast and not st.reached
    if reached then st.reached = true end
    if batch then
      if reached then return allowed and 1 or 0, reason, { units(usedH, usedL), units(limitH, limitL), st.deniedUntil } end
      return allowed and 1 or 0, reason
    end
    store(st)
    return { allowed and 1 or 0, reason, units(usedH, usedL), units(limitH, limitL), st.deniedUntil, reached and 1 or 0 }
  end
end
