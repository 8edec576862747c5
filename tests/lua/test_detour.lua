-- LuaUnit tests of stdlib/cs/detour.lua: judge (which rank ran a much smaller share of the
-- probe's wall time than the fleet (a CPU quota, a rank stopped from outside), from shares
-- measured on namespace hosts of this 2-core machine, 8 ranks, 5 samples of 0.1 s each) and
-- explain (what a starved rank's slowness made localisation name).
-- Run: commscript --backend self --trusted tests/lua/test_detour.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_detour",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.detour.judge",
}

-- scripts/truth_harness.py seed 4 (4 hosts x 2 ranks, quick): rank 7 held to 9 % of a CPU by a
-- CFS quota (period 100 ms), the others spinning 8 to 2 cores. Rank 7 is 1.4-4x under the
-- fleet's median sample by sample (under 2x in 2 of 5), 2.4x over the whole probe.
local SEED4 = {
  { 0.262, 0.189, 0.273, 0.283, 0.205 }, { 0.124, 0.123, 0.399, 0.266, 0.267 },
  { 0.196, 0.191, 0.211, 0.405, 0.201 }, { 0.142, 0.248, 0.341, 0.348, 0.229 },
  { 0.173, 0.157, 0.533, 0.244, 0.234 }, { 0.358, 0.224, 0.661, 0.294, 0.260 },
  { 0.276, 0.321, 0.404, 0.464, 0.315 }, { 0.147, 0.116, 0.100, 0.075, 0.107 },
}
local HOSTS = { "h0", "h0", "h1", "h1", "h2", "h2", "h3", "h3" }

-- seed 5 (8 hosts x 2 ranks, quick; the faults planted were network ones): 16 ranks spinning on 2
-- cores, nobody starved. Rank 9 ran 1.9x under the fleet over the probe, under 1.5x in 2 samples.
local SEED5 = {
  { 0.129, 0.124, 0.19, 0.087, 0.112 }, { 0.121, 0.154, 0.116, 0.162, 0.108 },
  { 0.161, 0.139, 0.133, 0.116, 0.1 }, { 0.14, 0.202, 0.184, 0.196, 0.298 },
  { 0.278, 0.088, 0.489, 0.172, 0.138 }, { 0.183, 0.67, 0.233, 0.141, 0.202 },
  { 0.254, 0.21, 0.119, 0.125, 0.823 }, { 0.091, 0.146, 0.053, 0.602, 0.172 },
  { 0.221, 0.186, 0.171, 0.142, 0.179 }, { 0.144, 0.105, 0.107, 0.125, 0.036 },
  { 0.315, 0.164, 0.166, 0.141, 0.14 }, { 0.169, 0.117, 0.173, 0.208, 0.185 },
  { 0.402, 0.19, 0.391, 0.201, 0.14 }, { 0.246, 0.719, 0.363, 0.119, 0.14 },
  { 0.444, 0.152, 0.142, 0.167, 0.236 }, { 0.219, 0.198, 0.135, 0.137, 0.109 },
}

local function ranks(starved)
  local out = {}
  for _, s in ipairs(starved) do out[#out + 1] = s.rank end
  return out
end

TestJudge = {}

function TestJudge:test_quota_named_over_the_whole_probe()
  local starved = cs.detour.judge(SEED4, HOSTS)
  lu.assertEquals(ranks(starved), { 7 })
  lu.assertEquals(starved[1].host, "h3")
  lu.assertEquals(starved[1].above, 4)  -- 1.37x in the first sample
  -- the ratio is the fleet's median mean share over the rank's mean share, recomputed here
  local means = {}
  for r, s in ipairs(SEED4) do
    local sum = 0
    for _, x in ipairs(s) do sum = sum + x end
    means[r] = sum / #s
  end
  local sorted = {}
  for i, m in ipairs(means) do sorted[i] = m end
  table.sort(sorted)
  local fleet = (sorted[4] + sorted[5]) / 2
  lu.assertAlmostEquals(starved[1].fleet, fleet, 1e-12)
  lu.assertAlmostEquals(starved[1].ran, means[8], 1e-12)
  lu.assertAlmostEquals(starved[1].ratio, fleet / means[8], 1e-12)
  lu.assertTrue(starved[1].ratio > 2 and starved[1].ratio < 3)
end

function TestJudge:test_healthy_fleet_names_nobody()
  -- the same run without rank 7: shares spread 0.12-0.66 by sample, nobody starved
  local healthy = {}
  for r = 1, 7 do healthy[r] = SEED4[r] end
  lu.assertEquals(ranks(cs.detour.judge(healthy, HOSTS)), {})
end

function TestJudge:test_crowded_healthy_fleet_names_nobody()
  local hosts = {}
  for r = 1, 16 do hosts[r] = "h" .. math.floor((r - 1) / 2) end
  lu.assertEquals(ranks(cs.detour.judge(SEED5, hosts)), {})
end

function TestJudge:test_one_low_sample_is_not_starvation()
  -- a rank far under the fleet over the probe because of one sample (a burst of other work):
  -- it ran as much as the fleet in the other four
  local f = {}
  for r = 1, 7 do f[r] = SEED4[r] end
  f[8] = { 0.01, 0.30, 0.28, 0.30, 0.01 }
  lu.assertEquals(ranks(cs.detour.judge(f, HOSTS)), {})
end

function TestJudge:test_stopped_rank_named()
  -- stopped from outside for 70 % of every 100 ms: it runs under a third of the fleet's share
  local f = {}
  for r = 1, 7 do f[r] = SEED4[r] end
  f[8] = { 0.08, 0.06, 0.10, 0.09, 0.07 }
  local starved = cs.detour.judge(f, HOSTS)
  lu.assertEquals(ranks(starved), { 7 })
  lu.assertStrContains(cs.detour.findings(starved)[1].message, "rank 7 (host h3) ran 8% of the time")
end

-- A rank stopped from outside on a crowded host (131 of every 188 ms, 16 ranks on 2 cores): the
-- scheduler gives it its time back when it runs, so its share is only 1.9x under the fleet (a
-- healthy rank's reached 1.7x), but each of its samples holds a gap of a whole stop.
function TestJudge:test_a_stopped_rank_is_named_by_its_gaps()
  local f, gaps = {}, {}
  for r = 1, 7 do
    f[r] = SEED4[r]
    gaps[r] = { 0.004 + 0.001 * r, 0.012, 0.006, 0.030, 0.009 }
  end
  f[8] = { 0.11, 0.14, 0.16, 0.12, 0.15 }  -- 1.9x under the fleet over the probe
  gaps[8] = { 0.131, 0.129, 0.012, 0.133, 0.130 }
  lu.assertEquals(ranks(cs.detour.judge(f, HOSTS)), {}, "by its share alone: not starved")
  local starved = cs.detour.judge(f, HOSTS, { gaps = gaps })
  lu.assertEquals(ranks(starved), { 7 })
  lu.assertEquals(starved[1].by, "gaps")
  lu.assertEquals(starved[1].long_gaps, 4)
  lu.assertStrContains(cs.detour.findings(starved)[1].message, "stopped for 130 ms at a time in 4")
  -- one long gap (a page fault storm, a migration) is no stop; nor are short ones under GAP.min_s
  gaps[8] = { 0.131, 0.009, 0.012, 0.010, 0.011 }
  lu.assertEquals(ranks(cs.detour.judge(f, HOSTS, { gaps = gaps })), {})
  for r = 1, 8 do gaps[r] = { 0.001, 0.001, 0.001, 0.001, 0.001 } end
  gaps[8] = { 0.008, 0.008, 0.008, 0.008, 0.008 }
  lu.assertEquals(ranks(cs.detour.judge(f, HOSTS, { gaps = gaps })), {})
end

function TestJudge:test_two_ranks_have_no_fleet()
  lu.assertEquals(cs.detour.judge({ { 0.5 }, { 0.01 } }, { "h0", "h1" }), {})
end

TestExplain = {}

-- scripts/truth_harness.py seed 10 (4 hosts x 2 ranks): rank 3 stopped 74 % of every 168 ms; the
-- re-tests named the link 1-3, an innocent partner's. The starved rank explains its pairs.
function TestExplain:test_a_starved_ranks_link_and_host_are_explained()
  local loc = {
    links = { { a = 1, b = 3, value = 900 }, { a = 4, b = 6, value = 800 } },
    hosts = { { host = "h1" }, { host = "h2" } },
    ranks = { { rank = 3 } },
    unconfirmed = { { rule = "not_confirmed", subject = { rank = 3, host = "h1" } },
                    { rule = "not_confirmed", subject = { host = "h1" } },
                    { rule = "not_confirmed", subject = { rank = 5, host = "h2" } } },
  }
  local f = cs.detour.explain(loc, { { rank = 3, host = "h1" } }, HOSTS)
  lu.assertEquals(#loc.links, 1)
  lu.assertEquals(loc.links[1].a, 4, "a link without the starved rank stays")
  lu.assertEquals(#loc.hosts, 1)
  lu.assertEquals(loc.hosts[1].host, "h2")
  lu.assertEquals(#loc.ranks, 1, "the rank itself stays named")
  lu.assertEquals(#loc.unconfirmed, 1)
  lu.assertEquals(loc.unconfirmed[1].subject.rank, 5)
  lu.assertEquals(#f, 2)
  lu.assertEquals(f[1].severity, "info")
  lu.assertEquals(f[1].message, "link 1-3: rank 3 (host h1) is starved of CPU (the cpu stage), which explains it")
  lu.assertEquals(f[2].message, "host h1: rank 3 (host h1) is starved of CPU (the cpu stage), which explains it")
end

function TestExplain:test_nobody_starved_changes_nothing()
  local loc = { links = { { a = 1, b = 3 } }, hosts = {}, ranks = {} }
  lu.assertEquals(cs.detour.explain(loc, {}, HOSTS), {})
  lu.assertEquals(cs.detour.explain(loc, nil, HOSTS), {})
  lu.assertEquals(#loc.links, 1)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances { { "TestJudge", TestJudge }, { "TestExplain", TestExplain } }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
