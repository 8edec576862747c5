-- LuaUnit tests of report.html's shared pieces (cs.html_util) and the sizes the sections write:
-- every section takes its size text from the one formatter (cs.format_size, the engine's), so a
-- section that grows its own copy again (html_elastic once wrote "64 KiB" next to "64K") fails.
-- Run: commscript --backend self --trusted tests/lua/test_html.lua
local cs = require "commscript"
local lu = require "luaunit"
local U = require "cs.html_util"
local elastic = require "cs.html_elastic"

local recipe = cs.recipe {
  name = "test_html",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.html_util's size text and the sections that use it",
}

TestSizes = {}

function TestSizes:test_same_text_as_format_size()
  local G, T = 2 ^ 30, 2 ^ 40
  for _, b in ipairs { 0, 1, 8, 1000, 1023, 1024, 1536, 65536, 3 * 2 ^ 20, 2 * G, T, 1024 * T, 2 ^ 53 } do
    lu.assertEquals(U.fsize(b), cs.format_size(b), "size " .. string.format("%.0f", b))
  end
  lu.assertEquals(U.fsize(65536), "64K")
end

function TestSizes:test_what_is_not_a_byte_count()
  lu.assertEquals(U.fsize(nil), "-")
  lu.assertEquals(U.fsize("64K"), "-")
  lu.assertEquals(U.fsize(0 / 0), "-")
  lu.assertEquals(U.fsize(0.5), "0.5")  -- a log2 axis tick below one byte
  lu.assertEquals(U.fsize(-1), "-1")
end

function TestSizes:test_record_tables_write_bytes_as_sizes()
  lu.assertStrContains(U.kvtable { bytes = 1048576, op = "allreduce" }, "<td>1M</td>")
end

-- The backend comparison (protocol_compare's section): its size column and crossovers in the
-- words protocol_compare itself prints ("mpi wins up to 64K, gloo from 128K").
function TestSizes:test_protocol_table_uses_the_one_formatter()
  local page = elastic.protocols {
    protocol_compare = {
      ranks = 2, dtype = "float32", backends = { "mpi", "gloo" },
      tables = { {
        op = "allreduce",
        rows = {
          { bytes = 8, winner = "mpi", by = { mpi = { time_us = 3, busbw = 0.1 }, gloo = { time_us = 9, busbw = 0.05 } } },
          { bytes = 131072, winner = "gloo", by = { mpi = { time_us = 90, busbw = 1 }, gloo = { time_us = 80, busbw = 2 } } },
        },
        crossovers = { { from = "mpi", below = 65536, to = "gloo", at = 131072 } },
      } },
    },
  }
  lu.assertStrContains(page, "<td>" .. cs.format_size(8) .. "</td>")
  lu.assertStrContains(page, "<td>" .. cs.format_size(131072) .. "</td>")
  lu.assertStrContains(page, ("mpi up to %s, gloo from %s"):format(cs.format_size(65536), cs.format_size(131072)))
  lu.assertNotStrContains(page, "KiB")
  lu.assertNotStrContains(page, "8 B<")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestSizes", TestSizes },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
