-- LuaUnit tests of stdlib/cs/rules.lua (the diagnosis rules of docs/full_diag-and-scorecard.md): every builtin rule
-- with a made-up `run` that passes (no finding) and one that fails (a finding with the right
-- severity, subject and numbers); site rule files loaded, evaluated, and refused when broken.
-- Run: commscript --backend self --trusted tests/lua/test_rules.lua
local cs = require "commscript"
local lu = require "luaunit"
local rules = require "cs.rules"
local scorecard = require "cs.scorecard"

local recipe = cs.recipe {
  name = "test_rules",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.rules",
}

local EPS = 1e-9

-- Findings of the builtin rules on `run`, and those of rule `id` among them.
local function eval(run, id)
  local all = rules.evaluate(run)
  local mine = {}
  for _, f in ipairs(all) do
    if f.rule == id then mine[#mine + 1] = f end
  end
  return mine, all
end

local function by_subject_op(list)
  local out = {}
  for _, f in ipairs(list) do out[f.subject.op] = f end
  return out
end

-- A healthy 4-rank, 2-host run: every builtin rule is quiet on it.
local HOSTS = { "h0", "h0", "h1", "h1" }
local function sweep_entry(op, bytes, busbw, time_us, extra)
  local r = { op = op, bytes = bytes, busbw = busbw, time_us = time_us, placement = "out-of-place", wrong = 0,
              wrong_ranks = {} }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end
local function healthy()
  return {
    size = 4, rank_hosts = HOSTS,
    sweep = { allreduce = { sweep_entry("allreduce", 8, 0.001, 10), sweep_entry("allreduce", 65536, 5, 20) } },
    stragglers = {}, localisation = { hosts = {}, ranks = {}, links = {} },
    scorecard = nil, baseline = nil, thresholds = {},
  }
end

-- ---------------------------------------------------------------------------------------------
TestBuiltin = {}

function TestBuiltin:test_ids_and_severities()
  local got = {}
  for _, r in ipairs(rules.builtin) do got[#got + 1] = r.id .. "=" .. r.severity end
  lu.assertEquals(got, { "corruption=error", "straggler=warn", "slow_host=warn", "slow_rank=warn", "slow_link=warn",
                         "baseline_regression=warn", "below_target=warn" })
  for _, r in ipairs(rules.builtin) do lu.assertTrue(#r.remedy > 0, r.id) end
end

function TestBuiltin:test_healthy_run_has_no_finding()
  local _, all = eval(healthy())
  lu.assertEquals(all, {})
  lu.assertEquals(rules.evaluate({}), {})  -- nothing measured: nothing to say
end

-- ---------------------------------------------------------------------------------------------
TestCorruption = {}

function TestCorruption:test_pass()
  lu.assertEquals(eval(healthy(), "corruption"), {})
end

function TestCorruption:test_fail()
  local run = healthy()
  run.sweep.allgather = { sweep_entry("allgather", 1024, 1, 5, { wrong = 3, wrong_ranks = { 2 } }),
                          sweep_entry("allgather", 2048, 1, 5) }
  local f = eval(run, "corruption")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "error")
  lu.assertEquals(f[1].subject, { ranks = { 2 }, op = "allgather" })
  lu.assertEquals(f[1].evidence, { op = "allgather", bytes = 1024, wrong = 3, ranks = { 2 } })
  lu.assertStrContains(f[1].message, "allgather 1024 (out-of-place): 3 wrong elements on rank(s) 2")
  lu.assertStrContains(f[1].remedy, "corruption")
end

function TestCorruption:test_one_finding_per_wrong_result()
  local run = healthy()
  run.sweep.allreduce[1].wrong, run.sweep.allreduce[1].wrong_ranks = 1, { 0, 3 }
  run.sweep.allreduce[2].wrong, run.sweep.allreduce[2].wrong_ranks = 7, { 3 }
  local f = eval(run, "corruption")
  lu.assertEquals(#f, 2)
  lu.assertEquals(f[1].subject.ranks, { 0, 3 })
  lu.assertEquals(f[2].evidence.wrong, 7)
end

-- ---------------------------------------------------------------------------------------------
TestStraggler = {}

function TestStraggler:test_pass()
  lu.assertEquals(eval(healthy(), "straggler"), {})
end

function TestStraggler:test_fail()
  local run = healthy()
  run.stragglers = { { rank = 2, lateness = 5000, median = 6000, score = 5000 / 6000, op = "allreduce", bytes = 8 } }
  local f = eval(run, "straggler")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { rank = 2, host = "h1" })
  lu.assertEquals(f[1].evidence, { lateness_us = 5000, median_us = 6000, op = "allreduce", bytes = 8 })
  lu.assertStrContains(f[1].message, "rank 2 arrives late: 5000 us after the others")
  lu.assertStrContains(f[1].message, "(83% of the op time)")
end

-- ---------------------------------------------------------------------------------------------
TestSlowHost = {}

function TestSlowHost:test_pass()
  lu.assertEquals(eval(healthy(), "slow_host"), {})
end

function TestSlowHost:test_fail()
  local run = healthy()
  run.size, run.rank_hosts = 6, { "h0", "h0", "h1", "h1", "h2", "h2" }
  run.localisation.hosts = { { host = "h2", ranks = { 4, 5 }, score = 3.2, median = 32, reference = 10,
                               retest = { rank = 4, partner = 0, partner_host = "h0", value = 30, reference = 10 } } }
  local f = eval(run, "slow_host")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { host = "h2", ranks = { 4, 5 } })
  lu.assertEquals(f[1].evidence.score, 3.2)
  lu.assertStrContains(f[1].message, "host h2 is slow with every other host: its pairs take 3.2x the fleet's median (32.0 vs 10.0 us)")
  lu.assertStrContains(f[1].message, "confirmed alone against h0")
end

-- ---------------------------------------------------------------------------------------------
TestSlowRank = {}

function TestSlowRank:test_pass()
  lu.assertEquals(eval(healthy(), "slow_rank"), {})
end

function TestSlowRank:test_fail()
  local run = healthy()
  run.localisation.ranks = { { rank = 1, score = 4.4, median = 44, partner = 3, value = 133.2, reference = 27.9 } }
  local f = eval(run, "slow_rank")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { rank = 1, host = "h0" })
  lu.assertEquals(f[1].evidence.value, 133.2)
  lu.assertStrContains(f[1].message,
    "rank 1 is slow with every partner: 4.4x the fleet's median pair time; alone with rank 3 it took 133.2 us against 27.9 us")
end

-- ---------------------------------------------------------------------------------------------
TestSlowLink = {}

function TestSlowLink:test_pass()
  lu.assertEquals(eval(healthy(), "slow_link"), {})
end

function TestSlowLink:test_fail()
  local run = healthy()
  run.localisation.links = { { a = 0, b = 2, value = 90, score = 4.5, retest = 88, reference = 20 } }
  local f = eval(run, "slow_link")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { pair = { 0, 2 }, hosts = { "h0", "h1" } })
  lu.assertStrContains(f[1].message, "link 0-2 is slow: 90.0 us, 4.5x the fleet's median")
end

-- Two ranks of an oversubscribed host may share a core: the slow exchange is no link's fault.
function TestSlowLink:test_same_oversubscribed_host_is_info()
  local run = healthy()
  run.rank_hosts = { "h0", "h0", "h1", "h1" }
  run.oversubscribed = { h0 = true }
  run.localisation.links = { { a = 0, b = 1, value = 90, score = 4.5, retest = 88, reference = 20 },
                             { a = 2, b = 3, value = 90, score = 4.5, retest = 88, reference = 20 } }
  local f = eval(run, "slow_link")
  lu.assertEquals(#f, 2)
  lu.assertEquals(f[1].severity, "info")
  lu.assertStrContains(f[1].message, "host h0 runs more ranks than it has CPUs")
  lu.assertStrContains(f[1].remedy, "--bind-to core")
  lu.assertEquals(f[2].severity, "warn")  -- h1 is not oversubscribed: still a warning
end

function TestSlowLink:test_between_hosts_stays_warn_when_oversubscribed()
  local run = healthy()
  run.oversubscribed = { h0 = true, h1 = true }
  run.localisation.links = { { a = 0, b = 2, value = 90, score = 4.5, retest = 88, reference = 20 } }
  lu.assertEquals(eval(run, "slow_link")[1].severity, "warn")
end

-- ---------------------------------------------------------------------------------------------
-- baseline_regression: per op, the median over sizes >= 64K of busbw / baseline busbw below
-- 1 - tolerance (default 0.25), or the median over sizes <= 1K of time / baseline time above
-- 1 + 2 x tolerance.
TestBaseline = {}

local BIG = { 65536, 131072, 262144, 524288, 1048576 }

-- A run and its baseline: allreduce at 8 B (10 us) and at BIG sizes (busbw 10 GB/s); the run's
-- busbw at each size is 10 x ratio(bytes), its time at 8 B is 10 x time_ratio.
local function with_baseline(ratio, time_ratio)
  local run, base = healthy(), { results = {} }
  run.sweep = { allreduce = { sweep_entry("allreduce", 8, 0.001, 10 * (time_ratio or 1)) } }
  base.results[1] = sweep_entry("allreduce", 8, 0.001, 10, { kind = "sweep" })
  for _, b in ipairs(BIG) do
    run.sweep.allreduce[#run.sweep.allreduce + 1] = sweep_entry("allreduce", b, 10 * ratio(b), 100)
    base.results[#base.results + 1] = sweep_entry("allreduce", b, 10, 100, { kind = "sweep" })
  end
  -- a pair result (no busbw) in the baseline is ignored
  base.results[#base.results + 1] = { kind = "pair", op = "sendrecv", a = 0, b = 1, bytes = 262144, min_us = 50 }
  run.baseline = base
  return run
end

function TestBaseline:test_no_baseline_no_finding()
  lu.assertEquals(eval(healthy(), "baseline_regression"), {})
  local run = healthy()
  run.baseline = { results = "not a list" }
  lu.assertEquals(eval(run, "baseline_regression"), {})
end

function TestBaseline:test_forty_percent_drop_is_a_finding()
  local f = eval(with_baseline(function() return 0.6 end), "baseline_regression")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { op = "allreduce" })
  lu.assertAlmostEquals(f[1].evidence.median_ratio, 0.6, EPS)
  lu.assertEquals(f[1].evidence.tolerance, 0.25)
  lu.assertEquals(f[1].evidence.sizes, #BIG)
  lu.assertStrContains(f[1].message, "allreduce bandwidth regressed: median 60% of the baseline's at sizes >= 64K")
end

function TestBaseline:test_ten_percent_drop_is_none()
  lu.assertEquals(eval(with_baseline(function() return 0.9 end), "baseline_regression"), {})
  lu.assertEquals(eval(with_baseline(function() return 1 end), "baseline_regression"), {})
  lu.assertEquals(eval(with_baseline(function() return 1.5 end), "baseline_regression"), {})  -- faster is fine
end

function TestBaseline:test_edge_of_the_tolerance()
  -- 0.76 is within 25 %, 0.74 is not
  lu.assertEquals(eval(with_baseline(function() return 0.76 end), "baseline_regression"), {})
  lu.assertEquals(#eval(with_baseline(function() return 0.74 end), "baseline_regression"), 1)
end

function TestBaseline:test_one_noisy_size_is_none()
  -- 128K at 10 % of the baseline, the other four sizes as before: the median is 1
  local run = with_baseline(function(b) return b == 131072 and 0.1 or 1 end)
  lu.assertEquals(eval(run, "baseline_regression"), {})
  -- ... while two noisy sizes of five still leave the median at 1, three make it a regression
  run = with_baseline(function(b) return (b == 65536 or b == 131072) and 0.1 or 1 end)
  lu.assertEquals(eval(run, "baseline_regression"), {})
  run = with_baseline(function(b) return b <= 262144 and 0.1 or 1 end)
  local f = eval(run, "baseline_regression")
  lu.assertEquals(#f, 1)
  lu.assertAlmostEquals(f[1].evidence.median_ratio, 0.1, EPS)
end

function TestBaseline:test_small_sizes_do_not_count_for_bandwidth()
  -- a bandwidth drop to 10 % at 32K only: below 64K, not counted
  local run, base = healthy(), { results = { sweep_entry("allreduce", 32768, 10, 100) } }
  run.sweep = { allreduce = { sweep_entry("allreduce", 32768, 1, 100) } }
  run.baseline = base
  lu.assertEquals(eval(run, "baseline_regression"), {})
  -- the same at 64K (the edge, included) is a regression
  run.sweep.allreduce[1].bytes, base.results[1].bytes = 65536, 65536
  local f = eval(run, "baseline_regression")
  lu.assertEquals(#f, 1)
  lu.assertAlmostEquals(f[1].evidence.median_ratio, 0.1, EPS)
  lu.assertEquals(f[1].evidence.sizes, 1)
end

function TestBaseline:test_sizes_or_ops_missing_from_the_baseline_are_ignored()
  local run = with_baseline(function() return 0.5 end)
  run.baseline.results = { run.baseline.results[1] }  -- only the 8 B entry
  lu.assertEquals(eval(run, "baseline_regression"), {})
  run = with_baseline(function() return 0.5 end)
  for _, r in ipairs(run.baseline.results) do r.op = r.op and "allgather" end
  lu.assertEquals(eval(run, "baseline_regression"), {})
  run = with_baseline(function() return 0.5 end)
  for _, r in ipairs(run.baseline.results) do r.placement = "in-place" end
  lu.assertEquals(eval(run, "baseline_regression"), {})
end

function TestBaseline:test_small_message_time()
  -- time x 1.4 at 8 B is within 2 x 25 %; x 2 is a finding
  lu.assertEquals(eval(with_baseline(function() return 1 end, 1.4), "baseline_regression"), {})
  local f = eval(with_baseline(function() return 1 end, 2), "baseline_regression")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].subject, { op = "allreduce" })
  lu.assertAlmostEquals(f[1].evidence.median_ratio, 2, EPS)
  lu.assertEquals(f[1].evidence.tolerance, 0.5)
  lu.assertStrContains(f[1].message, "allreduce small-message time regressed: median 2.0x the baseline's at sizes <= 1K")
end

function TestBaseline:test_both_and_per_op()
  local run = with_baseline(function() return 0.5 end, 3)
  run.sweep.broadcast = { sweep_entry("broadcast", 65536, 10, 100) }
  table.insert(run.baseline.results, sweep_entry("broadcast", 65536, 10, 100))
  local f = eval(run, "baseline_regression")
  lu.assertEquals(#f, 2)  -- allreduce bandwidth and allreduce time; broadcast unchanged
  for _, x in ipairs(f) do lu.assertEquals(x.subject.op, "allreduce") end
end

function TestBaseline:test_tolerance_from_thresholds()
  local run = with_baseline(function() return 0.6 end)
  run.thresholds = { baseline_tolerance = 0.5 }
  lu.assertEquals(eval(run, "baseline_regression"), {})
  run = with_baseline(function() return 0.9 end)
  run.thresholds = { baseline_tolerance = 0.05 }
  local f = eval(run, "baseline_regression")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].evidence.tolerance, 0.05)
end

-- ---------------------------------------------------------------------------------------------
TestBelowTarget = {}

-- A scorecard computed by cs.scorecard: busbw 4 GB/s, small all-reduce 30 us.
local function scored(thresholds)
  local run = healthy()
  run.scorecard = scorecard.compute {
    bandwidth = { busbw = 4, reference = 10, op = "allreduce", bytes = 4194304 },
    latency = { collective_us = 30, collective_target_us = 10 },
  }
  run.thresholds = thresholds
  return run
end

function TestBelowTarget:test_pass()
  lu.assertEquals(eval(scored {}, "below_target"), {})  -- no target: nothing to miss
  lu.assertEquals(eval(scored { busbw_min_gbps = 4, latency_max_us = 30 }, "below_target"), {})  -- met exactly
  lu.assertEquals(eval(scored { busbw_min_gbps = 3.5, latency_max_us = 50 }, "below_target"), {})
end

function TestBelowTarget:test_bandwidth_below()
  local f = eval(scored { busbw_min_gbps = 5 }, "below_target")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { op = "allreduce" })
  lu.assertEquals(f[1].evidence.target_gbps, 5)
  lu.assertEquals(f[1].evidence.measured.busbw_gbps, 4)
  lu.assertStrContains(f[1].message, "bus bandwidth 4.00 GB/s is below the target 5.00 GB/s")
end

function TestBelowTarget:test_latency_above()
  local f = eval(scored { latency_max_us = 20 }, "below_target")
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].subject, { op = "allreduce" })
  lu.assertEquals(f[1].evidence, { measured_us = 30, target_us = 20 })
  lu.assertStrContains(f[1].message, "small all-reduce takes 30.00 us, above the target 20.00 us")
  lu.assertEquals(#eval(scored { busbw_min_gbps = 5, latency_max_us = 20 }, "below_target"), 2)
end

-- ---------------------------------------------------------------------------------------------
TestEvaluate = {}

function TestEvaluate:test_rule_order_and_fields()
  local run = healthy()
  run.stragglers = { { rank = 3, lateness = 100, median = 200, score = 0.5 } }
  run.sweep.allreduce[1].wrong, run.sweep.allreduce[1].wrong_ranks = 1, { 1 }
  local all = rules.evaluate(run)
  lu.assertEquals(#all, 2)
  lu.assertEquals(all[1].rule, "corruption")  -- builtin order, not the order of anything else
  lu.assertEquals(all[2].rule, "straggler")
  for _, f in ipairs(all) do
    for _, k in ipairs({ "severity", "subject", "message", "evidence", "remedy", "rule" }) do
      lu.assertNotNil(f[k], k)
    end
  end
end

function TestEvaluate:test_a_hit_may_set_its_own_severity()
  local list = { { id = "mine", severity = "warn", check = function()
    return { { subject = { rank = 0 }, message = "bad", severity = "error" }, { subject = { rank = 1 } } }
  end } }
  local f = rules.evaluate({}, list)
  lu.assertEquals(#f, 2)
  lu.assertEquals(f[1].severity, "error")
  lu.assertEquals(f[2].severity, "warn")
  lu.assertEquals(f[2].message, "mine")  -- no message: the rule's id
end

function TestEvaluate:test_a_failing_check_names_the_rule()
  local list = { { id = "boom", severity = "warn", check = function() error("kaput") end } }
  local ok, err = pcall(rules.evaluate, {}, list)
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "rule boom failed")
  lu.assertStrContains(tostring(err), "kaput")
end

-- ---------------------------------------------------------------------------------------------
-- Site rule files (rules.load).
TestSiteRules = {}

local tmpfiles = {}

local function tmp_path(suffix)
  local base = os.tmpname()  -- creates the file: keep only the name
  os.remove(base)
  return base .. suffix
end

local function site_file(text)
  local path = tmp_path("_site.lua")
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  tmpfiles[#tmpfiles + 1] = path
  return path
end

function TestSiteRules:tearDown()
  for _, p in ipairs(tmpfiles) do os.remove(p) end
  tmpfiles = {}
end

-- The error of rules.load(paths): a { code = 1, message = } table.
local function load_error(paths)
  local ok, err = pcall(rules.load, paths)
  lu.assertFalse(ok, "expected rules.load to fail")
  lu.assertEquals(type(err), "table", tostring(err))
  lu.assertEquals(err.code, 1)
  lu.assertEquals(type(err.message), "string")
  return err.message
end

function TestSiteRules:test_errors_never_print_table_addresses()
  -- Variations: a check that raises a plain table, one with a message, one whose __index loops
  -- (read raw, never run), and a rule file whose top level raises a table.
  for _, e in ipairs({ {}, { message = "mine" }, setmetatable({}, { __index = function() while true do end end }) }) do
    local ok, err = pcall(rules.evaluate, {}, { { id = "t", severity = "info", check = function() error(e) end } })
    lu.assertFalse(ok)
    lu.assertNotStrContains(tostring(err), "table: 0x")
  end
  local msg = load_error { site_file("error({})") }
  lu.assertNotStrContains(msg, "table: 0x")
  lu.assertStrContains(msg, "without a message")
end

function TestSiteRules:test_sandboxed_rule_files_are_lua_files_only()
  -- (This suite runs --trusted, where any path loads; the sandboxed refusal is
  -- tests/e2e/test_attack_limits.py.) A syntax error never quotes the file's text.
  local msg = load_error { site_file("SECRET_WORD_1 SECRET_WORD_2\n") }
  lu.assertNotStrContains(msg, "SECRET_WORD")
end

local GOOD = [[
local cs = require "commscript"
return {
  { id = "site_too_big", severity = "error", remedy = "split the job",
    check = function(run)
      if (run.size or 0) > 2 then
        return { { subject = { ranks = run.size }, message = ("site: %d ranks is more than 2"):format(run.size),
                   evidence = { size = run.size, median = cs.stats.median({ 1, 2, 3 }) } } }
      end
      return {}
    end },
  { id = "site_quiet", severity = "info", check = function() return {} end },
}
]]

function TestSiteRules:test_loaded_rule_is_evaluated()
  local path = site_file(GOOD)
  local loaded = rules.load { path }
  lu.assertEquals(#loaded, 2)
  lu.assertEquals(loaded[1].id, "site_too_big")
  -- fires on 4 ranks, with the builtin rules alongside
  local list = {}
  for _, r in ipairs(rules.builtin) do list[#list + 1] = r end
  for _, r in ipairs(loaded) do list[#list + 1] = r end
  local f = rules.evaluate(healthy(), list)
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].rule, "site_too_big")
  lu.assertEquals(f[1].severity, "error")
  lu.assertEquals(f[1].subject, { ranks = 4 })
  lu.assertEquals(f[1].message, "site: 4 ranks is more than 2")
  lu.assertEquals(f[1].evidence, { size = 4, median = 2 })
  lu.assertEquals(f[1].remedy, "split the job")
  -- quiet on 2 ranks
  local run = healthy()
  run.size = 2
  lu.assertEquals(rules.evaluate(run, loaded), {})
end

function TestSiteRules:test_several_files_in_order()
  local a = site_file('return { { id = "a", severity = "warn", check = function() return {} end } }')
  local b = site_file('return { { id = "b", severity = "info", check = function() return {} end } }')
  local loaded = rules.load { a, b }
  lu.assertEquals(#loaded, 2)
  lu.assertEquals(loaded[1].id, "a")
  lu.assertEquals(loaded[2].id, "b")
  lu.assertEquals(rules.load {}, {})
  lu.assertEquals(rules.load(nil), {})
end

function TestSiteRules:test_site_file_is_sandboxed()
  -- A rule file runs in the recipes' sandbox (cs.sandbox): no io, and os without remove/execute,
  -- at load time and inside check.
  local path = site_file('return { { id = "x", severity = "warn", check = function() return { { message = tostring(io) } } end } }')
  local ok, err = pcall(rules.evaluate, {}, rules.load { path })
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "undeclared global 'io' (not available in the sandbox")
  local path2 = site_file('os.remove("/nonexistent")\nreturn {}')
  local msg = load_error { path2 }
  lu.assertStrContains(msg, path2)
  lu.assertStrContains(msg, "os.remove is not available in the sandbox")
end

-- Regression: a rule file (or a sandboxed recipe calling rules.load) once got the real
-- require, and with it ffi, io and os.
function TestSiteRules:test_site_file_cannot_require_outside_commscript()
  for _, mod in ipairs({ "ffi", "io", "os", "jit" }) do
    local msg = load_error { site_file(('local m = require "%s"\nreturn {}'):format(mod)) }
    lu.assertStrContains(msg, ("require '%s' is not allowed in a rule file"):format(mod))
  end
  -- commscript's own modules stay available
  lu.assertEquals(#rules.load { site_file('local d = require "cs.diagnose"\nreturn {}') }, 0)
end

function TestSiteRules:test_syntax_error()
  local path = site_file('return { { id = "x", severity = "warn", check = function() return {} end }\n')
  local msg = load_error { path }
  lu.assertStrContains(msg, "rule file")
  lu.assertStrContains(msg, path)
end

function TestSiteRules:test_missing_file()
  local path = tmp_path("_absent.lua")
  local msg = load_error { path }
  lu.assertStrContains(msg, path)
end

function TestSiteRules:test_missing_check()
  local path = site_file('return { { id = "nocheck", severity = "warn" } }')
  local msg = load_error { path }
  lu.assertStrContains(msg, path)
  lu.assertStrContains(msg, "rule nocheck: check must be a function(run)")
end

function TestSiteRules:test_bad_severity()
  local path = site_file('return { { id = "loud", severity = "critical", check = function() return {} end } }')
  local msg = load_error { path }
  lu.assertStrContains(msg, path)
  lu.assertStrContains(msg, "rule loud: severity must be info, warn or error")
end

function TestSiteRules:test_missing_id_and_not_a_table()
  local path = site_file('return { { severity = "warn", check = function() return {} end } }')
  lu.assertStrContains(load_error { path }, "a rule needs an id")
  path = site_file('return { "just a string" }')
  lu.assertStrContains(load_error { path }, "a rule must be a table")
  path = site_file('return 42')
  local msg = load_error { path }
  lu.assertStrContains(msg, path)
  lu.assertStrContains(msg, "must return a list of rules")
end

function TestSiteRules:test_error_while_loading()
  local path = site_file('error("site config missing")\nreturn {}')
  local msg = load_error { path }
  lu.assertStrContains(msg, path)
  lu.assertStrContains(msg, "site config missing")
end

function TestSiteRules:test_a_broken_file_after_a_good_one_is_named()
  local good = site_file('return { { id = "a", severity = "warn", check = function() return {} end } }')
  local bad = site_file('return { { id = "b", severity = "bogus", check = function() return {} end } }')
  local msg = load_error { good, bad }
  lu.assertStrContains(msg, bad)
  lu.assertNotStrContains(msg, good)
end

TestFromConfig = {}

function TestFromConfig:test_builtin_then_site_files()
  local rules = require "cs.rules"
  local list = rules.from_config {}
  lu.assertEquals(#list, #rules.builtin)
  for i, r in ipairs(rules.builtin) do lu.assertIs(list[i], r) end
  lu.assertEquals(#rules.from_config { rules = {} }, #rules.builtin)
  local ok, e = pcall(rules.from_config, { rules = { files = "/nonexistent/rules.lua" } })
  lu.assertFalse(ok)
  lu.assertEquals(e.code, 1)
  lu.assertStrContains(e.message, "/nonexistent/rules.lua")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestBuiltin", TestBuiltin },
    { "TestCorruption", TestCorruption },
    { "TestStraggler", TestStraggler },
    { "TestSlowHost", TestSlowHost },
    { "TestSlowRank", TestSlowRank },
    { "TestSlowLink", TestSlowLink },
    { "TestBaseline", TestBaseline },
    { "TestBelowTarget", TestBelowTarget },
    { "TestEvaluate", TestEvaluate },
    { "TestSiteRules", TestSiteRules },
    { "TestFromConfig", TestFromConfig },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
