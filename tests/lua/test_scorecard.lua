-- LuaUnit tests of stdlib/cs/scorecard.lua (docs/full_diag-and-scorecard.md): each part's score from known inputs,
-- worked out by hand; the 30/25/25/20 weights and the weighted total; renormalisation when a
-- part is missing; the bands at their edges; config overrides; formulas that carry the numbers.
-- Run: commscript --backend self --trusted tests/lua/test_scorecard.lua
local cs = require "commscript"
local lu = require "luaunit"
local sc = require "cs.scorecard"

local recipe = cs.recipe {
  name = "test_scorecard",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.scorecard",
}

local EPS = 1e-9

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

local function part(card, name)
  for _, p in ipairs(card.parts) do
    if p.name == name then return p end
  end
  return nil
end

local function names(card)
  local out = {}
  for i, p in ipairs(card.parts) do out[i] = p.name end
  return out
end

-- One part alone (the others unmeasured): its score is also the total.
local function only(key, m, cfg)
  local card = sc.compute({ [key] = m }, cfg)
  lu.assertEquals(names(card), { key })
  return part(card, key), card
end

-- The four parts of the scorecard with numbers whose scores are easy to work out by hand:
--   bandwidth: 4.25 / 10 = 0.425 utilisation, / 0.85 -> 50
--   latency:   all-reduce 100 x 10/20 = 50; point-to-point 100 x 2/1 = 200 -> 100; mean 75
--   balance:   100 x 8/10 x (1 - 0.25) = 60
--   stability: (1 - 0.1/0.5) x (1 - (1/100)/0.05) = 0.8 x 0.8 -> 64
local FULL = {
  bandwidth = { busbw = 4.25, reference = 10, source = "test", op = "allreduce", bytes = 4194304 },
  latency = { collective_us = 20, collective_target_us = 10, p2p_us = 1, p2p_target_us = 2 },
  balance = { worst = 8, median = 10, spread = 0.25, worst_is = "rank 3" },
  stability = { cv = 0.1, operations = 100, errors = 1, timeouts = 0, wrong = 0 },
}

-- ---------------------------------------------------------------------------------------------
TestBandwidth = {}

function TestBandwidth:test_good_utilisation_scores_100()
  local p = only("bandwidth", { busbw = 8.5, reference = 10 })
  lu.assertAlmostEquals(p.score, 100, EPS)
  lu.assertAlmostEquals(p.measured.utilisation, 0.85, EPS)
end

function TestBandwidth:test_half_of_good_scores_50()
  local p = only("bandwidth", { busbw = 4.25, reference = 10 })
  lu.assertAlmostEquals(p.score, 50, EPS)
  lu.assertAlmostEquals(p.measured.utilisation, 0.425, EPS)
end

function TestBandwidth:test_linear_and_clamped()
  lu.assertAlmostEquals(only("bandwidth", { busbw = 1.7, reference = 10 }).score, 20, EPS)
  lu.assertAlmostEquals(only("bandwidth", { busbw = 20, reference = 10 }).score, 100, EPS)  -- above the line
  lu.assertEquals(only("bandwidth", { busbw = 0, reference = 10 }).score, 0)
end

function TestBandwidth:test_no_reference_no_part()
  lu.assertEquals(names(sc.compute { bandwidth = { busbw = 5 } }), {})
  lu.assertEquals(names(sc.compute { bandwidth = { busbw = 5, reference = 0 } }), {})
end

function TestBandwidth:test_good_utilisation_from_config()
  -- 0.5 utilisation with bandwidth_good = 0.5 is 100; with 0.8 it is 62.5
  lu.assertAlmostEquals(only("bandwidth", { busbw = 5, reference = 10 }, { bandwidth_good = 0.5 }).score, 100, EPS)
  lu.assertAlmostEquals(only("bandwidth", { busbw = 5, reference = 10 }, { bandwidth_good = 0.8 }).score, 62.5, EPS)
end

-- ---------------------------------------------------------------------------------------------
TestLatency = {}

function TestLatency:test_target_over_measured()
  lu.assertAlmostEquals(only("latency", { collective_us = 20, collective_target_us = 10 }).score, 50, EPS)
  lu.assertAlmostEquals(only("latency", { collective_us = 40, collective_target_us = 10 }).score, 25, EPS)
  lu.assertAlmostEquals(only("latency", { collective_us = 8, collective_target_us = 10 }).score, 100, EPS)  -- clamped
end

function TestLatency:test_mean_of_collective_and_p2p()
  -- 100 x 10/20 = 50 and 100 x 2/8 = 25: mean 37.5
  local p = only("latency", { collective_us = 20, collective_target_us = 10, p2p_us = 8, p2p_target_us = 2 })
  lu.assertAlmostEquals(p.score, 37.5, EPS)
  -- each term is clamped before the mean: 100 (not 200) and 50 -> 75
  p = only("latency", { collective_us = 20, collective_target_us = 10, p2p_us = 1, p2p_target_us = 2 })
  lu.assertAlmostEquals(p.score, 75, EPS)
end

function TestLatency:test_p2p_alone_and_nothing()
  lu.assertAlmostEquals(only("latency", { p2p_us = 4, p2p_target_us = 2 }).score, 50, EPS)
  lu.assertEquals(names(sc.compute { latency = { collective_us = 20 } }), {})  -- no target: not scored
end

-- ---------------------------------------------------------------------------------------------
TestBalance = {}

function TestBalance:test_worst_over_median()
  lu.assertAlmostEquals(only("balance", { worst = 8, median = 10 }).score, 80, EPS)
  lu.assertAlmostEquals(only("balance", { worst = 12, median = 10 }).score, 100, EPS)  -- min(1, ...)
end

function TestBalance:test_times_one_minus_spread()
  lu.assertAlmostEquals(only("balance", { worst = 8, median = 10, spread = 0.25 }).score, 60, EPS)
  lu.assertAlmostEquals(only("balance", { worst = 10, median = 10, spread = 0.5 }).score, 50, EPS)
  lu.assertEquals(only("balance", { worst = 10, median = 10, spread = 3 }).score, 0)  -- min(1, spread)
  -- the ratio is capped at 1 before the spread factor: 100 x 1 x 0.5, not 100 x 1.2 x 0.5
  lu.assertAlmostEquals(only("balance", { worst = 12, median = 10, spread = 0.5 }).score, 50, EPS)
end

function TestBalance:test_no_median_no_part()
  lu.assertEquals(names(sc.compute { balance = { worst = 1, median = 0 } }), {})
  lu.assertEquals(names(sc.compute { balance = { worst = 1 } }), {})
end

-- ---------------------------------------------------------------------------------------------
TestStability = {}

function TestStability:test_cv_factor()
  lu.assertAlmostEquals(only("stability", { cv = 0, operations = 10 }).score, 100, EPS)
  lu.assertAlmostEquals(only("stability", { cv = 0.1, operations = 10 }).score, 80, EPS)
  lu.assertAlmostEquals(only("stability", { cv = 0.25, operations = 10 }).score, 50, EPS)
  lu.assertEquals(only("stability", { cv = 0.5, operations = 10 }).score, 0)
  lu.assertEquals(only("stability", { cv = 2, operations = 10 }).score, 0)
end

function TestStability:test_error_rate_factor()
  -- 1 bad in 100 = 1 %: 1 - 0.01/0.05 = 0.8
  lu.assertAlmostEquals(only("stability", { cv = 0, operations = 100, errors = 1 }).score, 80, EPS)
  -- errors, timeouts and wrong results all count: 2 % -> 0.6
  local p = only("stability", { cv = 0, operations = 100, timeouts = 1, wrong = 1 })
  lu.assertAlmostEquals(p.score, 60, EPS)
  lu.assertAlmostEquals(p.measured.error_rate, 0.02, EPS)
  -- 5 % and more: 0
  lu.assertEquals(only("stability", { cv = 0, operations = 100, errors = 5 }).score, 0)
  lu.assertEquals(only("stability", { cv = 0, operations = 10, errors = 9 }).score, 0)
end

function TestStability:test_factors_multiply()
  -- 0.8 x 0.8
  lu.assertAlmostEquals(only("stability", { cv = 0.1, operations = 100, errors = 1 }).score, 64, EPS)
end

function TestStability:test_limits_from_config()
  -- cv 0.1 against cv_limit 0.2 -> 0.5; 1 % against error_rate_limit 0.04 -> 0.75: 37.5
  local p = only("stability", { cv = 0.1, operations = 100, errors = 1 }, { cv_limit = 0.2, error_rate_limit = 0.04 })
  lu.assertAlmostEquals(p.score, 37.5, EPS)
end

function TestStability:test_no_operations_no_part()
  lu.assertEquals(names(sc.compute { stability = { cv = 0.1, operations = 0 } }), {})
end

-- ---------------------------------------------------------------------------------------------
TestTotal = {}

function TestTotal:test_default_weights()
  local card = sc.compute(FULL)
  lu.assertEquals(card.weights, { bandwidth = 0.30, latency = 0.25, balance = 0.25, stability = 0.20 })
  lu.assertEquals(names(card), { "bandwidth", "latency", "balance", "stability" })
  local expect = { bandwidth = 50, latency = 75, balance = 60, stability = 64 }
  local w = { bandwidth = 0.30, latency = 0.25, balance = 0.25, stability = 0.20 }
  for _, p in ipairs(card.parts) do
    lu.assertAlmostEquals(p.score, expect[p.name], EPS, p.name)
    lu.assertAlmostEquals(p.weight, w[p.name], EPS, p.name)
    lu.assertAlmostEquals(p.effective_weight, w[p.name], EPS, p.name)  -- all four present: no change
  end
  -- 0.30 x 50 + 0.25 x 75 + 0.25 x 60 + 0.20 x 64 = 15 + 18.75 + 15 + 12.8
  lu.assertAlmostEquals(card.total, 61.55, EPS)
  lu.assertEquals(card.band, "needs improvement")
  lu.assertEquals(card.config, "defaults")
end

function TestTotal:test_total_is_the_weighted_sum()
  local card = sc.compute(FULL)
  local sum, wsum = 0, 0
  for _, p in ipairs(card.parts) do
    sum = sum + p.score * p.effective_weight
    wsum = wsum + p.effective_weight
  end
  lu.assertAlmostEquals(wsum, 1, EPS)
  lu.assertAlmostEquals(card.total, sum, EPS)
end

function TestTotal:test_renormalised_when_a_part_is_missing()
  local m = { bandwidth = FULL.bandwidth, latency = FULL.latency, balance = FULL.balance }
  local card = sc.compute(m)
  lu.assertEquals(names(card), { "bandwidth", "latency", "balance" })
  -- weights 0.30, 0.25, 0.25 over 0.80: 0.375, 0.3125, 0.3125
  lu.assertAlmostEquals(part(card, "bandwidth").effective_weight, 0.375, EPS)
  lu.assertAlmostEquals(part(card, "latency").effective_weight, 0.3125, EPS)
  lu.assertAlmostEquals(part(card, "balance").effective_weight, 0.3125, EPS)
  lu.assertAlmostEquals(part(card, "bandwidth").weight, 0.30, EPS)  -- the configured weight is kept
  -- 50 x 0.375 + 75 x 0.3125 + 60 x 0.3125 = 18.75 + 23.4375 + 18.75
  lu.assertAlmostEquals(card.total, 60.9375, EPS)
end

function TestTotal:test_two_parts_missing()
  -- latency 75 (0.25) and stability 64 (0.20) over 0.45
  local card = sc.compute { latency = FULL.latency, stability = FULL.stability }
  lu.assertAlmostEquals(part(card, "latency").effective_weight, 0.25 / 0.45, EPS)
  lu.assertAlmostEquals(part(card, "stability").effective_weight, 0.20 / 0.45, EPS)
  lu.assertAlmostEquals(card.total, (75 * 0.25 + 64 * 0.20) / 0.45, EPS)
end

function TestTotal:test_nothing_measured()
  local card = sc.compute {}
  lu.assertEquals(#card.parts, 0)
  lu.assertEquals(card.total, 0)
  lu.assertEquals(card.band, "needs improvement")
  lu.assertEquals(card.formula, "no part measured")
end

-- ---------------------------------------------------------------------------------------------
TestBands = {}

function TestBands:test_edges()
  lu.assertEquals(sc.band(100), "excellent")
  lu.assertEquals(sc.band(85), "excellent")
  lu.assertEquals(sc.band(84.99), "good")
  lu.assertEquals(sc.band(70), "good")
  lu.assertEquals(sc.band(69.99), "needs improvement")
  lu.assertEquals(sc.band(0), "needs improvement")
end

function TestBands:test_edges_through_compute()
  -- a latency part alone: score = total = 100 x target / 100
  local function total_band(target)
    local card = sc.compute { latency = { collective_us = 100, collective_target_us = target } }
    return card.total, card.band
  end
  local t, b = total_band(85)
  lu.assertAlmostEquals(t, 85, EPS)
  lu.assertEquals(b, "excellent")
  t, b = total_band(84.99)
  lu.assertAlmostEquals(t, 84.99, EPS)
  lu.assertEquals(b, "good")
  t, b = total_band(70)
  lu.assertAlmostEquals(t, 70, EPS)
  lu.assertEquals(b, "good")
  t, b = total_band(69.99)
  lu.assertAlmostEquals(t, 69.99, EPS)
  lu.assertEquals(b, "needs improvement")
end

function TestBands:test_bands_from_config()
  local bands = { excellent = 95, good = 60 }
  lu.assertEquals(sc.band(90, bands), "good")
  lu.assertEquals(sc.band(95, bands), "excellent")
  lu.assertEquals(sc.band(59.9, bands), "needs improvement")
  -- 61.55 is "needs improvement" by default, "good" with good = 60
  local card = sc.compute(FULL, { bands = bands })
  lu.assertAlmostEquals(card.total, 61.55, EPS)
  lu.assertEquals(card.band, "good")
  lu.assertEquals(card.bands, bands)
  lu.assertEquals(card.config, "config [scorecard]")
end

function TestBands:test_one_band_from_config_keeps_the_other()
  -- [scorecard.bands] good = 60 only: excellent stays the default 85 (as weights do, key by key)
  local card = sc.compute(FULL, { bands = { good = 60 } })
  lu.assertAlmostEquals(card.total, 61.55, EPS)
  lu.assertEquals(card.band, "good")
  card = sc.compute({ latency = { collective_us = 100, collective_target_us = 90 } }, { bands = { good = 60 } })
  lu.assertEquals(card.band, "excellent")
  lu.assertEquals(card.bands, { excellent = 85, good = 60 })
end

-- ---------------------------------------------------------------------------------------------
TestConfigWeights = {}

function TestConfigWeights:test_override()
  -- all on bandwidth: the total is the bandwidth score (50)
  local card = sc.compute(FULL, { weights = { bandwidth = 1, latency = 0, balance = 0, stability = 0 } })
  lu.assertEquals(names(card), { "bandwidth" })  -- weight 0: left out
  lu.assertAlmostEquals(card.total, 50, EPS)
  lu.assertAlmostEquals(part(card, "bandwidth").effective_weight, 1, EPS)
end

function TestConfigWeights:test_partial_override_keeps_the_other_defaults()
  -- stability 0.20 -> 0.45: weights 0.30, 0.25, 0.25, 0.45 (sum 1.25)
  local card = sc.compute(FULL, { weights = { stability = 0.45 } })
  lu.assertEquals(card.weights, { bandwidth = 0.30, latency = 0.25, balance = 0.25, stability = 0.45 })
  lu.assertAlmostEquals(part(card, "stability").effective_weight, 0.45 / 1.25, EPS)
  lu.assertAlmostEquals(card.total, (50 * 0.30 + 75 * 0.25 + 60 * 0.25 + 64 * 0.45) / 1.25, EPS)
  lu.assertEquals(card.config, "config [scorecard]")
end

function TestConfigWeights:test_defaults_are_not_changed_by_an_override()
  sc.compute(FULL, { weights = { bandwidth = 0.9 } })
  lu.assertEquals(sc.defaults.weights, { bandwidth = 0.30, latency = 0.25, balance = 0.25, stability = 0.20 })
  lu.assertAlmostEquals(sc.compute(FULL).total, 61.55, EPS)
end

function TestConfigWeights:test_unknown_weight_rejected()
  lu.assertStrContains(error_of(sc.compute, FULL, { weights = { bandwith = 0.3 } }), "scorecard: unknown weight 'bandwith'")
end

function TestConfigWeights:test_bad_weight_rejected()
  lu.assertStrContains(error_of(sc.compute, FULL, { weights = { latency = -1 } }), "weight latency must be a number >= 0")
  lu.assertStrContains(error_of(sc.compute, FULL, { weights = { latency = "x" } }), "weight latency must be a number >= 0")
end

-- ---------------------------------------------------------------------------------------------
TestFormulas = {}

function TestFormulas:test_parts_carry_their_numbers()
  local card = sc.compute(FULL)
  lu.assertEquals(part(card, "bandwidth").formula, "min(100, 100 x (busbw 4.250 / reference 10.000) / 0.85)")
  lu.assertEquals(part(card, "latency").formula,
    "mean of min(100, 100 x target 10.00 / all-reduce 20.00 us), min(100, 100 x target 2.00 / point-to-point 1.00 us)")
  lu.assertEquals(part(card, "balance").formula,
    "100 x min(1, worst 8.000 / median 10.000) x (1 - min(1, per-rank spread 0.250))")
  lu.assertEquals(part(card, "stability").formula,
    "100 x (1 - min(1, cv 0.100 / 0.50)) x (1 - min(1, error rate 0.0100 / 0.05))")
end

function TestFormulas:test_total_formula_carries_scores_and_effective_weights()
  local card = sc.compute { bandwidth = FULL.bandwidth, latency = FULL.latency, balance = FULL.balance }
  -- 0.25 / 0.80 = 0.3125, printed with %.3f (0.312 or 0.313 depending on the last bit)
  lu.assertStrMatches(card.formula, "^50%.0 x 0%.375 %+ 75%.0 x 0%.31[23] %+ 60%.0 x 0%.31[23] .*")
  lu.assertStrContains(card.formula, "renormalised")
end

function TestFormulas:test_config_numbers_appear()
  local card = sc.compute(FULL, { bandwidth_good = 0.5, cv_limit = 0.2, error_rate_limit = 0.04 })
  lu.assertStrContains(part(card, "bandwidth").formula, "/ 0.50)")
  lu.assertStrContains(part(card, "stability").formula, "cv 0.100 / 0.20")
  lu.assertStrContains(part(card, "stability").formula, "error rate 0.0100 / 0.04")
  lu.assertEquals(part(card, "stability").reference, { cv_limit = 0.2, error_rate_limit = 0.04 })
  lu.assertEquals(part(card, "bandwidth").reference.good_utilisation, 0.5)
end

function TestFormulas:test_render()
  local text = sc.render(sc.compute(FULL))
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  lu.assertEquals(#lines, 6)
  lu.assertEquals(lines[1], "score 62/100 (needs improvement)")
  lu.assertStrContains(lines[2], "bandwidth")
  lu.assertStrContains(lines[2], " 50.0  weight 0.30")
  lu.assertStrContains(lines[3], "reference: ")  -- the bandwidth reference's source, under its part
  lu.assertStrContains(lines[6], "stability")
  lu.assertStrContains(lines[6], " 64.0  weight 0.20")
end

function TestFormulas:test_a_part_left_out_is_re_spread_and_said()
  local m = {}
  for k, v in pairs(FULL) do m[k] = v end
  m.bandwidth = { left_out = "one rank: busbw is 0 by definition" }
  local card = sc.compute(m)
  lu.assertNil(part(card, "bandwidth"))
  lu.assertEquals(card.left_out, { { name = "bandwidth", weight = 0.30, why = "one rank: busbw is 0 by definition" } })
  lu.assertAlmostEquals(part(card, "latency").effective_weight, 0.25 / 0.70, 1e-12)
  lu.assertStrContains(sc.render(card), "bandwidth   left out (weight 0.30 re-spread over the others): one rank")
end

TestInputs = {}

-- A ctx as full_diag's: config, baseline, hosts; comm only for the one-host copy bandwidth.
local function fake_ctx(t)
  return { size = t.size or 2, nhosts = t.nhosts or 2, config = { scorecard = t.scorecard }, baseline = t.baseline,
           comm = { broadcast_value = function(_, v) return v end } }
end

local function ar(bytes, busbw, p50, time, rank_mean)
  return { op = "allreduce", bytes = bytes, busbw = busbw, p50_us = p50, time_us = time, cv = 0.1,
           rank_mean_us = rank_mean or { 10, 10 }, placement = "out-of-place" }
end

local SWEEP = { allreduce = { ar(8, 0.01, 5, 6), ar(1048576, 10, 100, 100) } }

function TestInputs:test_reference_from_the_baseline_at_its_p50()
  -- the baseline's mean time 200 us, p50 100 us: at the p50, 4 GB/s x 200 / 100 = 8 GB/s
  local base = { run = { start = "2026-01-01T00:00:00Z" }, results = { ar(1048576, 4, 100, 200) } }
  local m = sc.inputs(fake_ctx { baseline = base }, { sweep = SWEEP, cvs = { 0.1, 0.3 }, operations = 2, wrong = 0 })
  lu.assertEquals(m.bandwidth.reference, 8)
  lu.assertEquals(m.bandwidth.busbw, 10)
  lu.assertEquals(m.bandwidth.bytes, 1048576)
  lu.assertStrContains(m.bandwidth.source, "baseline 2026-01-01T00:00:00Z")
  lu.assertEquals(m.stability.cv, 0.2)
  lu.assertEquals(m.latency.collective_us, 5)
  lu.assertEquals(m.latency.collective_target_us, sc.LATENCY_TARGET_US.hosts)
  lu.assertNil(m.balance)  -- no matrix
  lu.assertEquals(cs.stats.busbw_at_p50(base.results[1]), 8)
end

function TestInputs:test_config_reference_wins_and_one_host_defaults()
  local m = sc.inputs(fake_ctx { scorecard = { bandwidth_reference_gbps = 25 }, nhosts = 1 },
    { sweep = SWEEP, cvs = {}, operations = 2, wrong = 0 })
  lu.assertEquals(m.bandwidth.reference, 25)
  lu.assertEquals(m.latency.collective_target_us, sc.LATENCY_TARGET_US.one_host)
  lu.assertEquals(m.latency.source, "default for one host (shared memory)")
end

function TestInputs:test_balance_from_the_matrix()
  local matrix = { lat = { { nil, 3 }, { 5, nil } }, bw = { { nil, 2 }, { 4, nil } } }
  local m = sc.inputs(fake_ctx { scorecard = { bandwidth_reference_gbps = 25 } },
    { sweep = SWEEP, matrix = matrix, cvs = {}, operations = 2, wrong = 0 })
  lu.assertEquals(m.balance.worst, 2)
  lu.assertEquals(m.balance.worst_is, "rank 0")
  lu.assertEquals(m.balance.median, 3)
  lu.assertEquals(m.latency.p2p_us, 4)
  lu.assertEquals(m.latency.p2p_target_us, sc.P2P_LATENCY_TARGET_US.hosts)
end

function TestInputs:test_one_rank_leaves_bandwidth_out()
  local m = sc.inputs(fake_ctx { size = 1, nhosts = 1 }, { sweep = SWEEP, cvs = {}, operations = 2, wrong = 0 })
  lu.assertStrContains(m.bandwidth.left_out, "one rank")
  lu.assertNil(m.bandwidth.busbw)
end

function TestInputs:test_a_gpu_job_takes_the_gpu_path_not_memcpy()
  local gpu = { gbps = 400, source = "GPU path, the slowest of: host a: ...", nominal_gbps = 450, measured_gbps = 400 }
  local m = sc.inputs(fake_ctx { nhosts = 1 }, { sweep = SWEEP, cvs = {}, operations = 2, wrong = 0, gpu_path = gpu })
  lu.assertEquals(m.bandwidth.reference, 400)
  lu.assertEquals(m.bandwidth.nominal, 450)
  lu.assertStrContains(m.bandwidth.source, "GPU path")
  -- no GPU facts: left out, with the reason, rather than against the CPU's memcpy
  m = sc.inputs(fake_ctx { nhosts = 1 }, { sweep = SWEEP, cvs = {}, operations = 2, wrong = 0,
                                            gpu_path = { why = "no GPU link facts" } })
  lu.assertStrContains(m.bandwidth.left_out, "no GPU link facts")
end

function TestInputs:test_check_config_is_bad_input()
  sc.check_config(nil)
  sc.check_config { weights = { bandwidth = 1 } }
  local ok, e = pcall(sc.check_config, { weights = { bandwith = 1 } })
  lu.assertFalse(ok)
  lu.assertEquals(e.code, cs.exit.bad_input)
  lu.assertStrContains(e.message, "[scorecard]: ")
  lu.assertStrContains(e.message, "unknown weight 'bandwith'")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestBandwidth", TestBandwidth },
    { "TestLatency", TestLatency },
    { "TestBalance", TestBalance },
    { "TestStability", TestStability },
    { "TestTotal", TestTotal },
    { "TestBands", TestBands },
    { "TestConfigWeights", TestConfigWeights },
    { "TestFormulas", TestFormulas },
    { "TestInputs", TestInputs },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
