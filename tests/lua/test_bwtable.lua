-- LuaUnit tests of stdlib/cs/bwtable.lua (the nccl-tests table with p50/p99/cv columns).
-- Run: commscript --backend self --trusted tests/lua/test_bwtable.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_bwtable",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.bwtable",
}

local function lines_of(s)
  local out = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do out[#out + 1] = l end
  return out
end

local function words(s)
  local out = {}
  for w in s:gmatch("%S+") do out[#out + 1] = w end
  return out
end

-- A result shaped like comm:bench's.
local function result(t)
  local r = { bytes = 1048576, count = 262144, dtype = "float32", redop = "sum", root = -1,
              time_us = 123.456, algbw = 8.4937, busbw = 12.7406, checked = true, wrong = 0,
              p50_us = 120.5, p99_us = 140.25, cv = 0.0512 }
  for k, v in pairs(t or {}) do r[k] = v end
  return r
end

TestHeader = {}

function TestHeader:test_three_comment_lines()
  local l = lines_of(cs.bwtable.header())
  lu.assertEquals(#l, 3)
  for i = 1, 3 do lu.assertEquals(l[i]:sub(1, 1), "#") end
end

function TestHeader:test_column_names()
  local l = lines_of(cs.bwtable.header())
  lu.assertStrContains(l[1], "out-of-place")
  lu.assertStrContains(l[1], "in-place")
  lu.assertTrue(l[1]:find("out-of-place", 1, true) < l[1]:find(" in-place", 1, true))
  lu.assertEquals(words(l[2]), { "#", "size", "count", "type", "redop", "root",
    "time", "algbw", "busbw", "#wrong", "p50", "p99", "cv%",
    "time", "algbw", "busbw", "#wrong", "p50", "p99", "cv%" })
  lu.assertEquals(words(l[3]), { "#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)",
    "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)" })
end

TestRow = {}

function TestRow:test_values_formatted()
  local row = cs.bwtable.row(result(), result { time_us = 99.999, algbw = 10.5, busbw = 15.75, wrong = 3,
                                               p50_us = 98, p99_us = 101, cv = 0.001 })
  lu.assertEquals(words(row), { "1048576", "262144", "float32", "sum", "-1",
    "123.46", "8.49", "12.74", "0", "120.50", "140.25", "5.1",
    "100.00", "10.50", "15.75", "3", "98.00", "101.00", "0.1" })
end

function TestRow:test_unchecked_is_NA()
  local row = cs.bwtable.row(result { checked = false, wrong = nil }, nil)
  local w = words(row)
  lu.assertEquals(w[9], "N/A")
  lu.assertEquals(#w, 12, "the missing in-place half is blank")
end

function TestRow:test_only_in_place()
  local w = words(cs.bwtable.row(nil, result { time_us = 5 }))
  lu.assertEquals(#w, 12)
  lu.assertEquals(w[1], "1048576")
  lu.assertEquals(w[6], "5.00")
end

-- Every value ends in the same column as its header label (nccl-tests' right alignment).
function TestRow:test_aligned_with_header()
  local head = lines_of(cs.bwtable.header())[2]
  local row = cs.bwtable.row(result(), result())
  lu.assertEquals(#row, #head)
  local function ends(s)
    local e = {}
    for stop in s:gmatch("%S+()") do e[#e + 1] = stop end
    return e
  end
  local he, re = ends(head), ends(row)
  table.remove(he, 1)  -- the "#"
  lu.assertEquals(re, he)
end

TestFooter = {}

function TestFooter:test_ok()
  local l = lines_of(cs.bwtable.footer(0, 1.23456))
  lu.assertEquals(l[1], "# Out of bounds values : 0 OK")
  lu.assertEquals(l[2], "# Avg bus bandwidth    : 1.2346")
  lu.assertEquals(l[3], "#")
end

function TestFooter:test_failed()
  local l = lines_of(cs.bwtable.footer(17, 0))
  lu.assertEquals(l[1], "# Out of bounds values : 17 FAILED")
  lu.assertEquals(l[2], "# Avg bus bandwidth    : 0.0000")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestHeader", TestHeader },
    { "TestRow", TestRow },
    { "TestFooter", TestFooter },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
