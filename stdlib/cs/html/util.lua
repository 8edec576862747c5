-- Shared pieces of report.html's sections (cs.html, cs.html.matrix, cs.html.elastic): escaping,
-- number and size text, key/value and record tables, the section wrapper.
local M = {}

local fmt, concat, floor, ceil, abs, log = string.format, table.concat, math.floor, math.ceil, math.abs, math.log

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }
local function esc(s) return (tostring(s):gsub("[&<>\"']", ESC)) end
local function T(x) return type(x) == "table" and x or {} end
local function num(x) return type(x) == "number" and x == x and abs(x) ~= math.huge and x or nil end
local function str(x) return (type(x) == "string" or num(x)) and x or nil end

local function keys(t)
  local ks = {}
  for k in pairs(T(t)) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b)
    if type(a) ~= type(b) then return type(a) == "number" end
    if type(a) == "number" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return ks
end
local function islist(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

local function fnum(x)
  if x == floor(x) and abs(x) < 1e15 then return fmt("%d", x) end
  if abs(x) >= 1e4 then return fmt("%.0f", x) end
  return fmt("%.4g", x)
end
-- A message size as everything else in commscript writes it: the engine's format_size
-- (cs.format_size, 65536 -> "64K"), the one formatter. What is not a whole byte count (a report
-- edited by hand, an axis tick below 1 byte) is written as a number, and no number as "-".
local format_size = require("commscript.native").format_size
local function fsize(b)
  b = num(b)
  if not b then return "-" end
  if b >= 0 and b == floor(b) and b <= 2 ^ 53 then return format_size(b) end
  return fnum(b)
end

-- Compact text of any value: numbers formatted, lists [a, b], objects {k: v}; capped.
local function text(v, depth)
  depth = depth or 0
  if type(v) == "number" then return num(v) and fnum(v) or tostring(v) end
  if type(v) ~= "table" then return tostring(v) end
  if depth > 3 then return "..." end
  local parts = {}
  if islist(v) then
    for i = 1, #v do parts[i] = text(v[i], depth + 1) end
    return "[" .. concat(parts, ", ") .. "]"
  end
  for _, k in ipairs(keys(v)) do parts[#parts + 1] = tostring(k) .. ": " .. text(v[k], depth + 1) end
  local s = "{" .. concat(parts, ", ") .. "}"
  return #s > 240 and s:sub(1, 237) .. "..." or s
end
local function cellv(k, v) return (k == "bytes" and num(v)) and fsize(v) or text(v) end

local function kvtable(t)
  local rows = {}
  for _, k in ipairs(keys(t)) do
    rows[#rows + 1] = "<tr><th>" .. esc(k) .. "</th><td>" .. esc(cellv(k, t[k])) .. "</td></tr>"
  end
  return #rows > 0 and '<table class="kv">' .. concat(rows) .. "</table>" or ""
end

-- A table of records: columns are `prefer` (those present) and then every other key.
local function records(list, prefer, limit)
  list = T(list)
  local cols, seen = {}, {}
  local function add(k) if not seen[k] then seen[k], cols[#cols + 1] = true, k end end
  for _, c in ipairs(prefer or {}) do
    for _, row in ipairs(list) do if type(row) == "table" and row[c] ~= nil then add(c) break end end
  end
  for _, row in ipairs(list) do for _, k in ipairs(keys(type(row) == "table" and row or { value = row })) do add(k) end end
  if #list == 0 then return "" end
  local out = { '<div class="scroll"><table class="grid"><tr>' }
  for _, c in ipairs(cols) do out[#out + 1] = "<th>" .. esc(c) .. "</th>" end
  out[#out + 1] = "</tr>"
  for i = 1, math.min(#list, limit or 1e9) do
    local row = type(list[i]) == "table" and list[i] or { value = list[i] }
    out[#out + 1] = "<tr>"
    for _, c in ipairs(cols) do
      local hot = c == "state" and type(row[c]) == "string" and row[c] ~= "alive"
      out[#out + 1] = (hot and '<td class="hot">' or "<td>") .. (row[c] ~= nil and esc(cellv(c, row[c])) or "") .. "</td>"
    end
    out[#out + 1] = "</tr>"
  end
  out[#out + 1] = "</table></div>"
  if limit and #list > limit then out[#out + 1] = fmt('<p class="note">showing %d of %d</p>', limit, #list) end
  return concat(out)
end

local function section(id, title, body)
  return fmt('<section id="%s"><h2>%s</h2>\n%s\n</section>\n', id, esc(title), body)
end

-- "0-3, 5" (the numbers of a report list; cs.text.ranges)
local function ranges(list)
  local rs = {}
  for _, v in ipairs(T(list)) do if num(v) then rs[#rs + 1] = v end end
  return require("cs.text").ranges(rs, ", ")
end


M.esc, M.T, M.num, M.str, M.keys, M.islist = esc, T, num, str, keys, islist
M.fnum, M.fsize, M.text, M.cellv, M.kvtable, M.records = fnum, fsize, text, cellv, kvtable, records
M.section, M.ranges = section, ranges
return M
