-- cs.env.parse, part 1 of 5 of cs.env: parsing as the libraries parse (glibc's strtoll, NCCL_PARAM's integers,
-- truthy words), version comparison, name suggestions, and the small helpers the other parts
-- share. Pure functions. Recipes use cs.env, which re-exports this part's public functions.
local text = require "cs.text"
local M = {}

-- ---------------------------------------------------------------------------------------------
-- small helpers
-- ---------------------------------------------------------------------------------------------
local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function fmt_num(n)
  if type(n) ~= "number" then return tostring(n) end
  if n == math.floor(n) and math.abs(n) < 2 ^ 63 then return ("%.0f"):format(n) end
  return ("%.17g"):format(n)
end
M.fmt_num = fmt_num

-- How a value appears in a message: as is, or quoted when empty or with blanks at either end.
local show = text.show

local function version_parts(v)
  local t = {}
  for d in tostring(v):gmatch("%d+") do t[#t + 1] = tonumber(d) end
  return t
end

-- a < b for dotted versions ("2.3" = "2.3.0").
function M.version_lt(a, b)
  local x, y = version_parts(a), version_parts(b)
  for i = 1, math.max(#x, #y) do
    local p, q = x[i] or 0, y[i] or 0
    if p ~= q then return p < q end
  end
  return false
end
local version_lt = M.version_lt

local function has_prefix(s, p) return s:sub(1, #p) == p end

M.distance = text.distance  -- one home: cs.text

-- The closest candidate within a distance that grows with the name's length (case-insensitive;
-- `strip` is a common prefix left out of the length). Ties go to the first in sorted order.
function M.suggest(name, candidates, strip)
  local up = name:upper()
  local core = strip and has_prefix(up, strip) and up:sub(#strip + 1) or up
  local limit = math.max(1, math.min(3, math.floor(#core / 5)))
  local best, bestd
  local sorted = {}
  for _, c in ipairs(candidates) do sorted[#sorted + 1] = c end
  table.sort(sorted)
  for _, c in ipairs(sorted) do
    if c:upper() ~= up then
      local d = M.distance(up, c:upper())
      if d <= limit and (not bestd or d < bestd) then best, bestd = c, d end
    end
  end
  return best, bestd
end

-- ---------------------------------------------------------------------------------------------
-- strtoll, as glibc does it (NCCL_PARAM parses with strtoll(str, NULL, 0): docs/nccl.md#how-nccl-reads-a-variable)
-- ---------------------------------------------------------------------------------------------
local LLMAX = 9223372036854775807  -- LLONG_MAX (rounded to a double)

-- Returns value, endpos (index of the first character not consumed; 1 when no conversion),
-- base used, overflow (clamped to LLONG_MIN/MAX), digits (the digit text converted).
function M.strtoll(s, base)
  base = base or 0
  local i, n = 1, #s
  while i <= n and s:sub(i, i):match("^[ \t\n\v\f\r]$") do i = i + 1 end
  local neg = false
  local c = s:sub(i, i)
  if c == "+" or c == "-" then neg = c == "-"; i = i + 1 end
  local b = base
  if (b == 0 or b == 16) and s:sub(i, i) == "0" and s:sub(i + 1, i + 1):lower() == "x"
      and s:sub(i + 2, i + 2):match("^%x$") then
    b, i = 16, i + 2
  elseif b == 0 then
    b = s:sub(i, i) == "0" and 8 or 10
  end
  local start, v = i, 0
  while i <= n do
    local d = tonumber(s:sub(i, i), 36)
    if not d or d >= b then break end
    v = v * b + d
    i = i + 1
  end
  if i == start then return 0, 1, b, false, "" end
  local overflow = v > LLMAX
  if overflow then v = LLMAX end
  return neg and -v or v, i, b, overflow, s:sub(start, i - 1)
end

local TRUE_WORDS = set_of { "true", "yes", "on", "y", "t", "enable", "enabled" }
local FALSE_WORDS = set_of { "false", "no", "off", "n", "f", "disable", "disabled" }
local SIZE_POW = { k = 1, m = 2, g = 3, t = 4 }

-- Classifies how strtoll reads `raw`: { kind, value, intended, rest }.
-- kind: ok | empty | trailing_space | size_suffix | exponent | fraction | octal | word_true |
--       word_false | nonnumeric | trailing | overflow
function M.parse_int(raw, base)
  if raw == "" then return { kind = "empty" } end
  local v, endpos, b, overflow, digits = M.strtoll(raw, base or 0)
  local rest = raw:sub(endpos)
  if digits == "" then
    local w = trim(raw):lower()
    if TRUE_WORDS[w] then return { kind = "word_true", value = 0, intended = 1, rest = raw } end
    if FALSE_WORDS[w] then return { kind = "word_false", value = 0, intended = 0, rest = raw } end
    return { kind = "nonnumeric", value = 0, rest = raw }
  end
  if overflow then return { kind = "overflow", value = v, rest = rest } end
  local t = trim(raw)
  if rest == "" then
    if b == 8 and #digits > 1 then
      local dec = tonumber(t, 10)
      if dec and dec ~= v then return { kind = "octal", value = v, intended = dec } end
    end
    return { kind = "ok", value = v }
  end
  if rest:match("^%s+$") then return { kind = "trailing_space", value = v, rest = rest } end
  local unit = b ~= 16 and rest:match("^([kKmMgGtT])[iI]?[bB]?%s*$")
  if unit then
    local dec = b == 8 and tonumber(digits, 10) or math.abs(v)
    local sign = v < 0 and -1 or 1
    return { kind = "size_suffix", value = v, intended = sign * dec * 1024 ^ SIZE_POW[unit:lower()], rest = rest }
  end
  if rest:match("^[eE][+-]?%d+%s*$") or rest:match("^%.%d*[eE][+-]?%d+%s*$") then
    return { kind = "exponent", value = v, intended = tonumber(t), rest = rest }
  end
  if rest:match("^%.%d*%s*$") then return { kind = "fraction", value = v, intended = tonumber(t), rest = rest } end
  if b == 8 and rest:match("^[89]") then
    return { kind = "octal", value = v, intended = tonumber(t, 10), rest = rest }
  end
  return { kind = "trailing", value = v, rest = rest }
end


-- Shared with the other parts of cs.env (not part of its API).
M.internal = { trim = trim, set_of = set_of, fmt_num = fmt_num, show = show, version_lt = version_lt,
               has_prefix = has_prefix, TRUE_WORDS = TRUE_WORDS, FALSE_WORDS = FALSE_WORDS }

return M
