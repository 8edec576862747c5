-- LuaUnit tests of stdlib/cs/bwtable.lua (the nccl-tests table with the sampled pass's
-- i_p50/i_p99/i_cv% columns).
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
    "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99", "i_cv%",
    "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99", "i_cv%" })
  lu.assertEquals(words(l[3]), { "#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)",
    "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)" })
end

TestRow = {}

function TestRow:test_values_formatted()
  local row = cs.bwtable.row(result { p99_us = 140.26 }, result { time_us = 99.999, algbw = 10.5, busbw = 15.75,
                                               wrong = 3, p50_us = 98, p99_us = 101, cv = 0.001 })
  -- Times as nccl-tests prints them: 2 decimals below 100 us, 1 below 10000, then none.
  lu.assertEquals(words(row), { "1048576", "262144", "float32", "sum", "-1",
    "123.5", "8.49", "12.74", "0", "120.5", "140.3", "5.1",
    "100.00", "10.50", "15.75", "3", "98.00", "101.0", "0.1" })  -- 99.999 < 100: 2 decimals
  local w = words(cs.bwtable.row(result { time_us = 12345.6, p50_us = 99.994, p99_us = 10000 }))
  lu.assertEquals({ w[6], w[10], w[11] }, { "12346", "99.99", "10000" })
end

function TestRow:test_unchecked_is_NA()
  local row = cs.bwtable.row(result { checked = false, wrong = nil }, nil)
  local w = words(row)
  lu.assertEquals(w[9], "N/A")
  lu.assertEquals(#w, 12)
end

-- Without an in-place run the in-place half is absent from the header and the rows: no
-- trailing blank columns, and every line ends where the out-of-place half ends.
function TestRow:test_in_place_half_absent_when_not_run()
  local h = lines_of(cs.bwtable.header { inplace = false })
  lu.assertEquals(#h, 3)
  lu.assertStrContains(h[1], "out-of-place")
  lu.assertNil(h[1]:find("in-place", 1, true), "no in-place title")
  lu.assertEquals(words(h[2]), { "#", "size", "count", "type", "redop", "root",
    "time", "algbw", "busbw", "#wrong", "i_p50", "i_p99", "i_cv%" })
  local row = cs.bwtable.row(result())
  lu.assertEquals(#words(row), 12)
  lu.assertEquals(#row, #h[2], "the row ends with the header's last column")
  lu.assertNil(row:find("%s$"), "no trailing blanks")
  for i = 1, 3 do lu.assertNil(h[i]:find("%s$"), "no trailing blanks in header line " .. i) end
end

-- With an in-place run its half is filled, in the columns the header names.
function TestRow:test_in_place_half_present_when_run()
  local h = lines_of(cs.bwtable.header { inplace = true })
  lu.assertStrContains(h[1], "in-place")
  lu.assertEquals(#words(h[2]), 20)
  local row = cs.bwtable.row(result(), result { time_us = 7.25 })
  local w = words(row)
  lu.assertEquals(#w, 19)
  lu.assertEquals(w[13], "7.25")
  lu.assertEquals(#row, #h[2])
  lu.assertEquals(cs.bwtable.header(), cs.bwtable.header { inplace = true }, "in-place by default")
end

function TestRow:test_only_in_place()
  local w = words(cs.bwtable.row(nil, result { time_us = 5 }))
  lu.assertEquals(#w, 12)
  lu.assertEquals(w[1], "1048576")
  lu.assertEquals(w[6], "5.00")
end

-- Huge values keep every column's width (precision shrinks, then exponent notation), so each
-- value still ends under its header label.
function TestRow:test_widths_hold_at_huge_values()
  local head = lines_of(cs.bwtable.header())[2]
  local big = result { bytes = 2 ^ 46, count = 2 ^ 44, time_us = 1.5e9, algbw = 123456.789, busbw = 1e6,
                       wrong = 1e9, p50_us = 2e10, p99_us = 12345.6, cv = 123.4 }
  local function ends(s)
    local e = {}
    for stop in s:gmatch("%S+()") do e[#e + 1] = stop end
    return e
  end
  local he = ends(head)
  table.remove(he, 1)
  for _, row in ipairs { cs.bwtable.row(big, big), cs.bwtable.row(result(), big), cs.bwtable.row(big, result()) } do
    lu.assertEquals(#row, #head, row)
    lu.assertEquals(ends(row), he, row)
  end
  local w = words(cs.bwtable.row(big, nil))
  lu.assertEquals(w[6], "1.50e+09", "time")
  lu.assertEquals(w[7], "123457", "algbw: no decimals left")
  lu.assertEquals(w[8], "1000000", "busbw")
  lu.assertEquals(w[9], "1e+09", "#wrong")
  lu.assertStrContains(w[1], "e+13", false)
  lu.assertTrue(math.abs(tonumber(w[1]) / 2 ^ 46 - 1) < 1e-6, "size in exponent notation, still the number")
  lu.assertEquals(tonumber(w[6]), 1.5e9)
end

function TestRow:test_fit()
  lu.assertEquals(cs.bwtable.fit(3.14159, 7, 2), "   3.14")
  lu.assertEquals(cs.bwtable.fit(123456.7, 7, 2), " 123457")
  lu.assertEquals(cs.bwtable.fit(12345678, 7, 2), "1.2e+07")
  lu.assertEquals(#cs.bwtable.fit(1e300, 7, 2), 7)
  lu.assertEquals(#cs.bwtable.fit(-1e300, 7, 2), 7)
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
