-- LuaUnit tests of stdlib/cs/alerts.lua (the scorecard's alerts: latency over its threshold N
-- times in a row, sustained low utilisation, error rate), driven with made-up measurements.
-- Run: commscript --backend self --trusted tests/lua/test_alerts.lua
local cs = require "commscript"
local lu = require "luaunit"
local alerts = require "cs.alerts"

local recipe = cs.recipe {
  name = "test_alerts",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.alerts",
}

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

-- Feeds latencies (us) of one op+size; returns every alert fired, in order.
local function feed(a, op, bytes, values)
  local out = {}
  for _, v in ipairs(values) do
    for _, x in ipairs(a:observe { op = op, bytes = bytes, latency_us = v }) do out[#out + 1] = x end
  end
  return out
end

local function kinds(list)
  local k = {}
  for i, a in ipairs(list) do k[i] = a.kind end
  return k
end

-- ---------------------------------------------------------------------------------------------
TestLatency = {}

function TestLatency:test_three_in_a_row_fire_exactly_once()
  local a = alerts.new { latency_threshold_us = 100 }
  local out = feed(a, "allreduce", 1024, { 50, 150, 160, 170, 180, 190 })
  lu.assertEquals(#out, 1)
  local al = out[1]
  lu.assertEquals(al.kind, "latency")
  lu.assertEquals(al.severity, "warn")
  lu.assertEquals(al.subject, { op = "allreduce", bytes = 1024 })
  lu.assertEquals(al.evidence.values_us, { 150, 160, 170 })
  lu.assertEquals(al.evidence.threshold_us, 100)
  lu.assertStrContains(al.message, "allreduce 1K")
  lu.assertStrContains(al.message, "3 times in a row")
  lu.assertTrue(#al.remedy > 0)
  lu.assertEquals(a:summary().by_kind.latency, 1)
end

function TestLatency:test_fires_on_the_third_value()
  local a = alerts.new { latency_threshold_us = 100 }
  lu.assertEquals(#a:observe { op = "allreduce", bytes = 8, latency_us = 101 }, 0)
  lu.assertEquals(#a:observe { op = "allreduce", bytes = 8, latency_us = 101 }, 0)
  lu.assertEquals(#a:observe { op = "allreduce", bytes = 8, latency_us = 101 }, 1)
end

function TestLatency:test_two_do_not_fire()
  local a = alerts.new { latency_threshold_us = 100 }
  lu.assertEquals(#feed(a, "allreduce", 1024, { 150, 160, 50, 40 }), 0)
  lu.assertEquals(a:summary().alerts, 0)
end

function TestLatency:test_a_value_under_the_threshold_resets_the_count()
  local a = alerts.new { latency_threshold_us = 100 }
  lu.assertEquals(#feed(a, "allreduce", 1024, { 150, 160, 90, 170, 180, 100, 200, 210 }), 0)
  -- the threshold itself is not over it
  lu.assertEquals(#feed(a, "allreduce", 2048, { 100, 100, 100, 100 }), 0)
end

function TestLatency:test_one_alert_per_episode()
  local a = alerts.new { latency_threshold_us = 100 }
  -- flapping after the alert: 1 or 2 good values do not end the episode
  local out = feed(a, "allreduce", 1024, { 150, 160, 170, 180, 10, 150, 160, 170, 10, 20, 150, 160, 170 })
  lu.assertEquals(#out, 1)
  -- 3 good values in a row end it: the next 3 over the threshold fire again
  out = feed(a, "allreduce", 1024, { 10, 20, 30, 150, 160, 170 })
  lu.assertEquals(#out, 1)
  lu.assertEquals(out[1].evidence.values_us, { 150, 160, 170 })
  lu.assertEquals(a:summary().by_kind.latency, 2)
end

function TestLatency:test_the_count_is_per_op_and_size()
  local a = alerts.new { latency_threshold_us = 100 }
  -- interleaved: no op+size is over the threshold 3 times in a row of its own
  local out = {}
  for _, m in ipairs {
    { "allreduce", 1024, 150 }, { "allgather", 1024, 150 }, { "allreduce", 2048, 150 },
    { "allreduce", 1024, 150 }, { "allgather", 1024, 50 }, { "allreduce", 2048, 150 },
    { "allreduce", 1024, 50 }, { "allgather", 1024, 150 }, { "allreduce", 2048, 150 },
  } do
    for _, x in ipairs(a:observe { op = m[1], bytes = m[2], latency_us = m[3] }) do out[#out + 1] = x end
  end
  lu.assertEquals(#out, 1)
  lu.assertEquals(out[1].subject, { op = "allreduce", bytes = 2048 })
end

function TestLatency:test_consecutive_is_configurable()
  local a = alerts.new { latency_threshold_us = 100, consecutive = 2 }
  lu.assertEquals(#feed(a, "broadcast", 8, { 150, 160 }), 1)
end

function TestLatency:test_derived_threshold_is_factor_times_the_first_interval_p50()
  local a = alerts.new {}
  -- first interval: no threshold yet, nothing fires however high
  lu.assertEquals(#feed(a, "allreduce", 1024, { 10, 12, 11, 1000, 1000 }), 0)
  lu.assertNil(a:threshold("allreduce", 1024))
  lu.assertEquals(#a:interval_end(0), 0)
  lu.assertEquals(a:threshold("allreduce", 1024), 3 * 12)  -- nearest-rank p50 of the five
  lu.assertEquals(#feed(a, "allreduce", 1024, { 30, 36, 40, 37 }), 0)
  local out = feed(a, "allreduce", 1024, { 37 })
  lu.assertEquals(#out, 1)
  lu.assertEquals(out[1].evidence.values_us, { 40, 37, 37 })
  lu.assertEquals(out[1].evidence.threshold_us, 36)
  lu.assertTrue(out[1].evidence.derived)
end

function TestLatency:test_derived_per_op_and_size_from_its_own_first_interval()
  local a = alerts.new { latency_factor = 2 }
  feed(a, "allreduce", 1024, { 10, 10, 10 })
  a:interval_end(0)
  feed(a, "allgather", 1024, { 50, 50, 50 })     -- first seen in interval 1
  lu.assertNil(a:threshold("allgather", 1024))
  a:interval_end(1)
  lu.assertEquals(a:threshold("allreduce", 1024), 20)
  lu.assertEquals(a:threshold("allgather", 1024), 100)
  lu.assertEquals(a:summary().thresholds, { ["allreduce/1024"] = 20, ["allgather/1024"] = 100 })
end

function TestLatency:test_baseline_waits_for_enough_values()
  local a = alerts.new { baseline_min_samples = 3 }
  lu.assertEquals(#feed(a, "allreduce", 8, { 10, 1000 }), 0)
  a:interval_end(0)
  lu.assertNil(a:threshold("allreduce", 8))          -- 2 values: not yet
  lu.assertEquals(#feed(a, "allreduce", 8, { 20, 1000, 1000 }), 0)
  a:interval_end(1)
  lu.assertEquals(a:threshold("allreduce", 8), 3 * 1000)  -- p50 of 10, 1000, 20, 1000, 1000
  local b = alerts.new { baseline_min_samples = 1 }
  feed(b, "allreduce", 8, { 10 })
  b:interval_end(0)
  lu.assertEquals(b:threshold("allreduce", 8), 30)
end

function TestLatency:test_sizes_above_latency_max_bytes_are_not_checked()
  local a = alerts.new { latency_threshold_us = 100, latency_max_bytes = 65536 }
  lu.assertEquals(#feed(a, "allreduce", 1048576, { 500, 500, 500 }), 0)
  lu.assertNil(a:threshold("allreduce", 1048576))
  lu.assertEquals(#feed(a, "allreduce", 65536, { 500, 500, 500 }), 1)
end

-- ---------------------------------------------------------------------------------------------
TestUtilisation = {}

-- One interval of measurements { {op, bytes, busbw}, ... }; returns the alerts of its end.
local function interval(a, i, ms)
  for _, m in ipairs(ms) do
    lu.assertEquals(#a:observe { op = m[1], bytes = m[2], busbw = m[3] }, 0)
  end
  return a:interval_end(i)
end

function TestUtilisation:test_sustained_low_utilisation_fires()
  local a = alerts.new { util_min = 0.6 }
  lu.assertEquals(#interval(a, 0, { { "allreduce", 1048576, 10 }, { "allreduce", 1048576, 9 },
                                    { "allgather", 1048576, 5 }, { "allgather", 1048576, 5 } }), 0)
  local out = interval(a, 1, { { "allreduce", 1048576, 5 }, { "allgather", 1048576, 2.5 },
                               { "allreduce", 1048576, 4 }, { "allgather", 1048576, 2.9 } })
  lu.assertEquals(kinds(out), { "utilisation" })
  local al = out[1]
  lu.assertEquals(al.severity, "warn")
  lu.assertEquals(al.subject, "job")
  lu.assertEquals(al.evidence.interval, 1)
  lu.assertEquals(al.evidence.measurements, 4)
  lu.assertAlmostEquals(al.evidence.max_utilisation, 0.58, 1e-12)
  lu.assertEquals(al.evidence.worst, { op = "allreduce", bytes = 1048576, utilisation = 0.4, busbw_reference = 10 })
  lu.assertEquals(al.evidence.reference, "best")
  lu.assertStrContains(al.message, "below 60%")
end

function TestUtilisation:test_a_single_dip_does_not_fire()
  local a = alerts.new { util_min = 0.6 }
  interval(a, 0, { { "allreduce", 1048576, 10 }, { "allreduce", 1048576, 10 }, { "allreduce", 1048576, 10 } })
  -- one low measurement in an interval of good ones
  lu.assertEquals(#interval(a, 1, { { "allreduce", 1048576, 9 }, { "allreduce", 1048576, 2 },
                                    { "allreduce", 1048576, 9 }, { "allreduce", 1048576, 8 } }), 0)
  -- low everywhere but one: not a whole interval
  lu.assertEquals(#interval(a, 2, { { "allreduce", 1048576, 2 }, { "allreduce", 1048576, 2 },
                                    { "allreduce", 1048576, 7 }, { "allreduce", 1048576, 2 } }), 0)
  lu.assertEquals(a:summary().by_kind.utilisation, 0)
end

function TestUtilisation:test_too_few_measurements_do_not_fire()
  local a = alerts.new { util_min = 0.6, util_min_samples = 3 }
  interval(a, 0, { { "allreduce", 1048576, 10 } })
  lu.assertEquals(#interval(a, 1, { { "allreduce", 1048576, 1 }, { "allreduce", 1048576, 1 } }), 0)
  lu.assertEquals(#interval(a, 2, { { "allreduce", 1048576, 1 }, { "allreduce", 1048576, 1 },
                                    { "allreduce", 1048576, 1 } }), 1)
end

function TestUtilisation:test_fires_again_in_each_low_interval()
  local a = alerts.new {}
  interval(a, 0, { { "allreduce", 1048576, 10 } })
  local low = { { "allreduce", 1048576, 1 }, { "allreduce", 1048576, 1 }, { "allreduce", 1048576, 1 } }
  lu.assertEquals(#interval(a, 1, low), 1)
  lu.assertEquals(#interval(a, 2, low), 1)
  lu.assertEquals(#interval(a, 3, { { "allreduce", 1048576, 10 } }), 0)
  lu.assertEquals(a:summary().by_kind.utilisation, 2)
end

function TestUtilisation:test_reference_baseline_from_the_caller()
  -- a baseline of 100 GB/s: even the best measurement of the run is far below it
  local a = alerts.new { reference = function(op, bytes) if op == "allreduce" then return 100 end end }
  local out = interval(a, 0, { { "allreduce", 1048576, 50 }, { "allreduce", 1048576, 55 },
                               { "allreduce", 1048576, 40 } })
  lu.assertEquals(kinds(out), { "utilisation" })
  lu.assertEquals(out[1].subject, { op = "allreduce" })
  lu.assertEquals(out[1].evidence.reference, "baseline")
  lu.assertAlmostEquals(out[1].evidence.max_utilisation, 0.55, 1e-12)
  lu.assertEquals(a:reference("allreduce", 1048576), 100)
  -- ops without a baseline fall back to the best seen
  lu.assertEquals(#interval(a, 1, { { "allgather", 1048576, 50 }, { "allgather", 1048576, 55 },
                                    { "allgather", 1048576, 40 } }), 0)
  lu.assertEquals(a:reference("allgather", 1048576), 55)
  -- an op with a baseline is judged on its own: good measurements of other ops do not hide it
  out = interval(a, 2, { { "allreduce", 1048576, 50 }, { "allgather", 1048576, 55 }, { "allreduce", 1048576, 50 },
                         { "allgather", 1048576, 54 }, { "allreduce", 1048576, 50 } })
  lu.assertEquals(kinds(out), { "utilisation" })
  lu.assertEquals(out[1].subject, { op = "allreduce" })
  lu.assertEquals(out[1].evidence.measurements, 3)
end

function TestUtilisation:test_best_seen_is_judged_over_the_whole_job()
  local a = alerts.new {}
  interval(a, 0, { { "allreduce", 1048576, 10 }, { "allgather", 1048576, 10 } })
  -- allreduce low all interval long, allgather fine: not the whole job
  lu.assertEquals(#interval(a, 1, { { "allreduce", 1048576, 1 }, { "allgather", 1048576, 9 },
                                    { "allreduce", 1048576, 1 }, { "allreduce", 1048576, 1 } }), 0)
end

function TestUtilisation:test_small_sizes_do_not_count()
  local a = alerts.new { util_min_bytes = 262144 }
  interval(a, 0, { { "allreduce", 1024, 10 }, { "allreduce", 1048576, 10 } })
  lu.assertEquals(#interval(a, 1, { { "allreduce", 1024, 1 }, { "allreduce", 1024, 1 },
                                    { "allreduce", 1024, 1 }, { "allreduce", 1048576, 9 } }), 0)
end

-- ---------------------------------------------------------------------------------------------
TestErrorRate = {}

-- n measurements of which `bad` have wrong elements.
local function errors(a, n, bad)
  for k = 1, n do
    a:observe { op = "allreduce", bytes = 1024, latency_us = 10, busbw = 1, wrong = k <= bad and 3 or 0 }
  end
end

function TestErrorRate:test_above_the_maximum_fires_an_error()
  local a = alerts.new { error_rate_max = 0.05 }
  errors(a, 100, 6)
  local out = a:finish()
  lu.assertEquals(kinds(out), { "error_rate" })
  lu.assertEquals(out[1].severity, "error")
  lu.assertEquals(out[1].subject, "job")
  lu.assertEquals(out[1].evidence.errors, 6)
  lu.assertEquals(out[1].evidence.measurements, 100)
  lu.assertAlmostEquals(out[1].evidence.error_rate, 0.06, 1e-12)
  lu.assertStrContains(out[1].message, "6 of 100 measurements failed")
  -- once
  lu.assertEquals(#a:finish(), 0)
  lu.assertEquals(a:summary().by_kind.error_rate, 1)
end

function TestErrorRate:test_at_or_below_the_maximum_does_not()
  local a = alerts.new { error_rate_max = 0.05 }
  errors(a, 100, 5)                      -- exactly 5 %: not above
  lu.assertEquals(#a:finish(), 0)
  local s = a:summary()
  lu.assertEquals(s.errors, 5)
  lu.assertEquals(s.measurements, 100)
  lu.assertAlmostEquals(s.error_rate, 0.05, 1e-12)
  local b = alerts.new {}
  errors(b, 100, 1)
  lu.assertEquals(#b:finish(), 0)
end

function TestErrorRate:test_subject_names_the_wrong_ranks()
  local a = alerts.new {}
  a:observe { op = "allreduce", bytes = 8, wrong = 2, wrong_ranks = { 3, 1 } }
  a:observe { op = "allgather", bytes = 8, wrong = 1, wrong_ranks = { 1 } }
  a:observe { op = "allgather", bytes = 8, wrong = 0, wrong_ranks = {} }
  local out = a:finish()
  lu.assertEquals(#out, 1)
  lu.assertEquals(out[1].subject, { ranks = { 1, 3 } })
  lu.assertEquals(out[1].evidence.errors, 2)
  lu.assertEquals(out[1].evidence.measurements, 3)
end

function TestErrorRate:test_error_flag_counts_and_no_measurements_is_no_error()
  local a = alerts.new {}
  a:observe { op = "allreduce", bytes = 8, error = true }
  lu.assertEquals(kinds(a:finish()), { "error_rate" })
  lu.assertEquals(#alerts.new {}:finish(), 0)
end

-- ---------------------------------------------------------------------------------------------
TestNew = {}

function TestNew:test_bad_arguments()
  lu.assertStrContains(error_of(alerts.new, { nosuch = 1 }), "unknown field 'nosuch'")
  lu.assertStrContains(error_of(alerts.new, { util_min = "x" }), "util_min must be a number")
  lu.assertStrContains(error_of(alerts.new, { consecutive = 0 }), "consecutive must be at least 1")
  lu.assertStrContains(error_of(alerts.new, { reference = 3 }), "reference must be a function")
  local a = alerts.new {}
  lu.assertStrContains(error_of(a.observe, a, { bytes = 8 }), "measurement")
end

function TestNew:test_alerts_are_valid_findings()
  -- what the soak recipe passes to ctx.report:finding must be plain data
  local a = alerts.new { latency_threshold_us = 1 }
  local out = feed(a, "allreduce", 8, { 2, 2, 2 })
  lu.assertEquals(#out, 1)
  local ok = pcall(cs.json.encode, { severity = out[1].severity, subject = out[1].subject,
                                     message = out[1].message, evidence = out[1].evidence })
  lu.assertTrue(ok)
  lu.assertEquals(cs.alerts, alerts)       -- also reachable as cs.alerts
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestLatency", TestLatency },
    { "TestUtilisation", TestUtilisation },
    { "TestErrorRate", TestErrorRate },
    { "TestNew", TestNew },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
