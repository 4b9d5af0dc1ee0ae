-- Window periods. Every limit counts usage in the period of its window that contains "now":
-- hour, day and week are fixed lengths laid from an anchor (by default the epoch, or for weeks
-- the first Monday after it, 1970-01-05); month periods start on the anchor's day of month and
-- time of day, clamped to the month's last day (an anchor on the 31st starts February's period
-- on the 28th or 29th). `never` is one period for the life of the budget.
-- Windows are stored as codes: 1 hour, 2 day, 3 week, 4 month, 5 never.
local HOUR, DAY, WEEK, MONTH, NEVER = 1, 2, 3, 4, 5
local WINDOW_CODES = { hour = HOUR, day = DAY, week = WEEK, month = MONTH, never = NEVER }
local HOUR_MS = 3600000
local DAY_MS = 86400000
local WEEK_MS = 604800000
local FIXED_MS = { HOUR_MS, DAY_MS, WEEK_MS }

-- Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
local function daysFromCivil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m > 2) and (m - 3) or (m + 9)
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civilFromDays(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = (mp < 10) and (mp + 3) or (mp - 9)
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end

local function monthStart(y, m, anchorDay, anchorTimeMs)
  local ny, nm = y, m + 1
  if nm == 13 then ny, nm = y + 1, 1 end
  local daysInMonth = daysFromCivil(ny, nm, 1) - daysFromCivil(y, m, 1)
  local d = anchorDay
  if d > daysInMonth then d = daysInMonth end
  return daysFromCivil(y, m, d) * DAY_MS + anchorTimeMs
end

-- The anchor of unanchored (calendar) periods.
local function defaultAnchor(window)
  if window == WEEK then return 4 * DAY_MS end
  return 0
end

-- Returns the start and end (epoch ms) of the period containing t; end is -1 for `never`.
local function windowPeriod(window, anchor, t)
  if window == NEVER then return 0, -1 end
  if window == MONTH then
    local anchorDays = math.floor(anchor / DAY_MS)
    local _, _, anchorDay = civilFromDays(anchorDays)
    local anchorTimeMs = anchor - anchorDays * DAY_MS
    local y, m = civilFromDays(math.floor(t / DAY_MS))
    local start = monthStart(y, m, anchorDay, anchorTimeMs)
    if start > t then
      m = m - 1
      if m == 0 then y, m = y - 1, 12 end
      start = monthStart(y, m, anchorDay, anchorTimeMs)
    end
    local ny, nm = y, m + 1
    if nm == 13 then ny, nm = y + 1, 1 end
    return start, monthStart(ny, nm, anchorDay, anchorTimeMs)
  end
  local len = FIXED_MS[window]
  local start = anchor + math.floor((t - anchor) / len) * len
  return start, start + len
end
