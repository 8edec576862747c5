-- LuaUnit tests of cs.findings (collect, report, print, table: the printer full_diag, soak and
-- env_audit share), cs.text (rank ranges, sizes, plurals) and cs.selftest's option checks (its
-- run is tested end to end by tests/e2e/test_chaos.py).
-- Run: commscript --backend self --trusted tests/lua/test_findings.lua
local cs = require "commscript"
local lu = require "luaunit"
local findings = require "cs.findings"
local text = require "cs.text"

local recipe = cs.recipe {
  name = "test_findings",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.findings, cs.text and cs.selftest",
}

-- A ctx whose report and log are recorded.
local function fake_ctx()
  local ctx = { reported = {}, lines = {} }
  ctx.report = { finding = function(_, f) ctx.reported[#ctx.reported + 1] = f end }
  function ctx.log(fmt, ...) ctx.lines[#ctx.lines + 1] = fmt:format(...) end
  return ctx
end

local A = { severity = "error", subject = { rank = 1 }, message = "rank 1 is slow", remedy = "reseat it" }
local B = { severity = "warn", subject = { variable = "NCCL_ALGO", ranks = { 0, 1, 2, 3 } }, message = "m",
            evidence = { value = "ring" }, remedy = "" }
local C = { severity = "info", subject = "job", message = "note" }

TestFindings = {}

function TestFindings:test_collector_reports_keeps_and_counts()
  local ctx = fake_ctx()
  local found = findings.collector(ctx)
  found:add { A, B }
  found:add { C, A }
  found:add(nil)
  lu.assertEquals(#ctx.reported, 4)
  lu.assertIs(ctx.reported[1], A)
  lu.assertEquals(#found.list, 4)
  lu.assertEquals(found.counts, { error = 2, warn = 1, info = 1 })
  lu.assertEquals(findings.counts { A, C, C }, { error = 1, warn = 0, info = 2 })
end

function TestFindings:test_print()
  local ctx = fake_ctx()
  findings.print(ctx, { A, B }, { heading = "# findings", empty = "none: healthy" })
  lu.assertEquals(ctx.lines, { "# findings", "  [error] rank 1 is slow", "         -> reseat it", "  [warn] m" })
  ctx = fake_ctx()
  findings.print(ctx, {}, { heading = "# findings", empty = "none: healthy" })
  lu.assertEquals(ctx.lines, { "# findings", "  none: healthy" })
  ctx = fake_ctx()
  findings.print(ctx, { A }, { prefix = "# ALERT ", remedy = false })
  lu.assertEquals(ctx.lines, { "# ALERT [error] rank 1 is slow" })
end

function TestFindings:test_table()
  local lines = findings.table({ B, A }, 4)
  lu.assertEquals(#lines, 4)
  lu.assertStrMatches(lines[1], "^severity%s+variable%s+value%s+ranks%s+finding$")
  lu.assertStrMatches(lines[2], "^warn%s+NCCL_ALGO%s+ring%s+all%s+m$")
  lu.assertStrMatches(lines[3], "^error%s+%?%s+%-%s+%-%s+rank 1 is slow$")
  lu.assertStrMatches(lines[4], "^%s+%-> reseat it$")
  lu.assertIs(cs.env.format_table, findings.table)
end

TestText = {}

function TestText:test_ranges()
  lu.assertEquals(text.ranges { 0, 1, 2, 3, 5 }, "0-3,5")
  lu.assertEquals(text.ranges { 8, 7, 0, 2, 1, 5 }, "0-2,5,7-8")
  lu.assertEquals(text.ranges({ 3, 4 }, ", "), "3-4")
  lu.assertEquals(text.ranges({ 1, 3 }, ", "), "1, 3")
  lu.assertEquals(text.ranges {}, "")
  local l = { 3, 1 }
  text.ranges(l)
  lu.assertEquals(l, { 3, 1 }, "the input is not sorted in place")
  lu.assertIs(cs.env.rank_ranges, text.ranges)
  lu.assertIs(cs.topo.ranges, text.ranges)
end

function TestText:test_size_plural_cut_show()
  lu.assertEquals(text.size(65536), "64K")
  lu.assertEquals(text.size(1536), "1536")
  lu.assertIs(text.size, cs.format_size)
  lu.assertEquals(text.plural(1, "rank"), "1 rank")
  lu.assertEquals(text.plural(0, "rank"), "0 ranks")
  lu.assertEquals(text.cut("abcdefgh", 6), "abc...")
  lu.assertEquals(text.cut("abc", 6), "abc")
  lu.assertEquals(text.show(""), "''")
  lu.assertEquals(text.show(" x"), "' x'")
  lu.assertEquals(text.show("x"), "x")
end

function TestText:test_sorted_keys()
  lu.assertEquals(text.sorted_keys { b = 1, a = 2, c = 3 }, { "a", "b", "c" })
  lu.assertEquals(text.sorted_keys { [5] = true, [0] = true, [12] = true }, { 0, 5, 12 })
  lu.assertEquals(text.sorted_keys {}, {})
end

TestSelftest = {}

local function raised(f, ...)
  local ok, e = pcall(f, ...)
  lu.assertFalse(ok)
  return e
end

function TestSelftest:test_target()
  local st = require "cs.selftest"
  local function ctx(size, rank) return { size = size, opt = { rank = rank }, recipe = { name = "chaos_x" } } end
  lu.assertEquals(st.target(ctx(4, -1)), 3)
  lu.assertEquals(st.target(ctx(4, 1)), 1)
  lu.assertEquals(st.target(ctx(3, -1), 3), 2)
  local e = raised(st.target, ctx(1, -1))
  lu.assertEquals(e.code, cs.exit.bad_input)
  lu.assertEquals(e.message, "chaos_x needs at least 2 ranks")
  e = raised(st.target, ctx(2, -1), 3)
  lu.assertEquals(e.message, "chaos_x needs at least 3 ranks")
  e = raised(st.target, ctx(4, 4))
  lu.assertEquals(e.code, cs.exit.bad_input)
  lu.assertEquals(e.message, "--rank 4 is not a rank")
end

-- chaos_slow's judgement: a link between two ranks of an oversubscribed host is no failure (CI
-- named one at --factor 1, 4 ranks on 2 cores), a link at the slowed rank always is.
function TestSelftest:test_slow_outcome()
  local st = require "cs.selftest"
  local hosts = { "h0", "h0", "h0", "h0" }
  local link = { ranks = {}, hosts = {}, links = { { a = 0, b = 2 } } }
  local busy = { h0 = true }
  local o = st.slow_outcome(link, {}, hosts, busy)
  lu.assertTrue(o.correct)
  lu.assertEquals({ o.links, o.shared_core_links }, { 0, 1 })
  o = st.slow_outcome(link, {}, hosts, {})  -- as many CPUs as ranks: the link is a failure
  lu.assertFalse(o.correct)
  lu.assertEquals({ o.links, o.shared_core_links }, { 1, 0 })
  local at_target = { ranks = { { rank = 2 } }, hosts = {}, links = { { a = 0, b = 2 } } }
  o = st.slow_outcome(at_target, { 2 }, hosts, busy)  -- the slowed rank's link: a failure anyway
  lu.assertFalse(o.correct)
  lu.assertEquals(o.named, { 2 })
  o = st.slow_outcome({ ranks = { { rank = 2 } }, hosts = {}, links = {} }, { 2 }, hosts, busy)
  lu.assertTrue(o.correct)
  o = st.slow_outcome({ ranks = { { rank = 1 } }, hosts = {}, links = {} }, { 2 }, hosts, busy)
  lu.assertFalse(o.correct)
  o = st.slow_outcome({ ranks = {}, hosts = { { ranks = { 2, 3 } } }, links = {} }, { 2 }, hosts, busy)
  lu.assertFalse(o.correct)  -- a host of two ranks named for one slowed rank
  o = st.slow_outcome({ ranks = {}, hosts = {}, links = { { a = 0, b = 1 } } }, {}, { "h0", "h0", "h1", "h1" },
    { h1 = true })  -- its host is not the oversubscribed one
  lu.assertFalse(o.correct)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestFindings", TestFindings },
    { "TestText", TestText },
    { "TestSelftest", TestSelftest },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
