-- LuaUnit tests of report.html's shared pieces (cs.html.util) and the sizes the sections write:
-- every section takes its size text from the one formatter (cs.format_size, the engine's), so a
-- section that grows its own copy again (html_elastic once wrote "64 KiB" next to "64K") fails.
-- Run: commscript --backend self --trusted tests/lua/test_html.lua
local cs = require "commscript"
local lu = require "luaunit"
local U = require "cs.html.util"
local elastic = require "cs.html.elastic"

local recipe = cs.recipe {
  name = "test_html",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.html.util's size text and the sections that use it",
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

-- A finding's evidence: the numbers a reader needs in words (a verdict's confidence in per cent,
-- its list of pairs counted), the raw table only behind the "details" toggle (issue 33: the
-- verdict cell printed "{confidence: 0.9993, margin: 3, pairs: [{above: 11, ...").
TestFindingEvidence = {}

local function finding_page(evidence)
  return require("cs.html").render {
    recipe = { name = "t" }, run = {},
    findings = { { severity = "warn", subject = { host = "n1" }, message = "slow link", evidence = evidence } },
  }
end

function TestFindingEvidence:test_verdict_in_words_raw_table_behind_details()
  local page = finding_page {
    host = "n1", score = 0.42,
    verdict = { confidence = 0.9993, margin = 3, threshold = 2.5,
                pairs = { { above = 11, cv = 0.2577, good = false, median_us = 812.5 }, { above = 9, cv = 0.1 } } },
    ranks = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 },
  }
  lu.assertStrContains(page, "<li><b>verdict</b> confidence 99.93 %, margin 3, pairs 2 entries, threshold 2.5</li>")
  lu.assertStrContains(page, "<li><b>score</b> 0.42</li>")
  lu.assertStrContains(page, "<li><b>ranks</b> 0, 1, 2, 3, 4, 5, 6, 7 ... (10 in all)</li>")
  local at = page:find("<details><summary>raw evidence</summary>", 1, true)
  lu.assertNotNil(at, "no raw evidence toggle")
  local before, after = page:sub(1, at), page:sub(at)
  lu.assertNotStrContains(before, "{confidence: 0.9993")   -- not in the visible part
  lu.assertStrContains(after, "{confidence: 0.9993, margin: 3, pairs: [{above: 11")  -- still there, behind the toggle
end

function TestFindingEvidence:test_evidence_text_is_escaped_in_words_and_table()
  local page = finding_page { ["<k>"] = "<script>x</script>", note = { a = "\"&'" } }
  lu.assertNotStrContains(page, "<script>x")
  lu.assertNotStrContains(page, "<k>")
  lu.assertStrContains(page, "<li><b>&lt;k&gt;</b> &lt;script&gt;x&lt;/script&gt;</li>")
  lu.assertStrContains(page, "<li><b>note</b> a &quot;&amp;&#39;</li>")
end

function TestFindingEvidence:test_no_evidence_no_toggle()
  lu.assertNotStrContains(finding_page(nil), "raw evidence")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestSizes", TestSizes },
    { "TestFindingEvidence", TestFindingEvidence },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
