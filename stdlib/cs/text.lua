-- Small text helpers with one home each: rank ranges, sizes, plurals, cut and quoted values.
--   text.ranges({0,1,2,3,5} [, sep])  -> "0-3,5"   (sorted copy; sep between runs, default ",")
--   text.size(65536)                  -> "64K"     (the engine's format_size, = cs.format_size)
--   text.plural(3, "rank")            -> "3 ranks"
--   text.cut(s, n)                    -> s, or its first n-3 characters and "..."
--   text.show(v)                      -> v, quoted when empty or with blanks at either end
--   text.sorted_keys(t)               -> t's keys in a new list, sorted (to list names, ranks in order)
--   text.distance(a, b)               -> edits from a to b (insert, delete, substitute, swap neighbours)
local native = require "commscript.native"
local M = {}

M.size = native.format_size

function M.ranges(list, sep)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local out, i = {}, 1
  while i <= #s do
    local j = i
    while j < #s and s[j + 1] == s[j] + 1 do j = j + 1 end
    out[#out + 1] = j > i and ("%d-%d"):format(s[i], s[j]) or ("%d"):format(s[i])
    i = j + 1
  end
  return table.concat(out, sep or ",")
end

-- Optimal string alignment distance (Levenshtein plus swaps of neighbours): commscript's one
-- did-you-mean distance (bindings/lua/edit_distance.hpp), for recipe options and environment names.
M.distance = native.edit_distance

function M.plural(n, word) return ("%d %s%s"):format(n, word, n == 1 and "" or "s") end

function M.cut(s, n)
  s = tostring(s)
  if #s <= n then return s end
  return s:sub(1, n - 3) .. "..."
end

function M.show(v)
  if v == "" or v:match("^%s") or v:match("%s$") then return "'" .. v .. "'" end
  return v
end

function M.sorted_keys(t)
  local k = {}
  for x in pairs(t) do k[#k + 1] = x end
  table.sort(k)
  return k
end

return M
