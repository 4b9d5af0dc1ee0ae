-- Money pairs. An amount of units (10^-8 of the budget's unit) is held as two exact doubles
-- (hi, lo) with 0 <= lo < 10^14, because Redis Lua numbers are doubles and would round a
-- 27-digit amount. Only addition, subtraction and comparison are needed, each with a carry.
-- Pairs are stored as packed doubles (struct), never as text, so no exponent form can appear.
local LO_BASE = 100000000000000

local function moneyAdd(ah, al, bh, bl)
  local h, l = ah + bh, al + bl
  if l >= LO_BASE then return h + 1, l - LO_BASE end
  return h, l
end

-- Callers guarantee a >= b.
local function moneySub(ah, al, bh, bl)
  local h, l = ah - bh, al - bl
  if l < 0 then return h - 1, l + LO_BASE end
  return h, l
end

local function moneyCmp(ah, al, bh, bl)
  if ah ~= bh then return ah < bh and -1 or 1 end
  if al ~= bl then return al < bl and -1 or 1 end
  return 0
end

-- A pair as the integer text of its units (no exponent form, no float rounding: both halves are
-- exact integers below 2^53).
local function moneyDigits(h, l)
  if h == 0 then return string.format('%.0f', l) end
  return string.format('%.0f%014.0f', h, l)
end
