-- LuaUnit tests of cs.metrics (the text a scraper reads, written by the engine's writer) and of
-- cs.alerts' metrics() (the state the Prometheus rules in examples/prometheus/ alert on).
-- Run: commscript --backend self --trusted tests/lua/test_metrics.lua
local cs = require "commscript"
local lu = require "luaunit"
local m = require "cs.metrics"
local alerts = require "cs.alerts"

local recipe = cs.recipe {
  name = "test_metrics",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.metrics and cs.alerts:metrics()",
}

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err)
end

TestText = {}

function TestText:test_help_type_and_escaped_label_values()
  local f = m.family("commscript_x_total", "a help", "counter")
  m.add(f, { path = 'C:\\dir "q"\nnext', n = 3 }, 7)
  lu.assertEquals(m.text { f }, '# HELP commscript_x_total a help\n# TYPE commscript_x_total counter\n'
    .. 'commscript_x_total{n="3",path="C:\\\\dir \\"q\\"\\nnext"} 7\n')
end

function TestText:test_a_family_without_samples_and_gauge_by_default()
  lu.assertEquals(m.text { m.family("up", "h") }, "# HELP up h\n# TYPE up gauge\n")
  lu.assertEquals(m.text {}, "")
end

function TestText:test_invalid_names_are_refused()
  lu.assertStrContains(error_of(m.text, { m.family("bad-name", "") }), "not a valid metric name")
  lu.assertStrContains(error_of(m.text, { m.family("9lives", "") }), "not a valid metric name")
  lu.assertStrContains(error_of(m.text, { m.add(m.family("ok", ""), { ["a b"] = "x" }, 1) }), "not a valid label name")
  lu.assertStrContains(error_of(m.text, { m.add(m.family("ok", ""), { __x = "x" }, 1) }), "not a valid label name")
  lu.assertStrContains(error_of(m.text, { m.family("requests", "", "counter") }), "must end in _total")
  lu.assertStrContains(error_of(m.text, { m.family("a", "", "summary") }), "type 'summary'")
  lu.assertStrContains(error_of(m.text, { m.add(m.family("a", ""), {}, "7") }), "value = number")
end

function TestText:test_publish_without_metrics_options_does_nothing()
  lu.assertFalse(m.publish { m.family("a", "") })
  lu.assertEquals(cs.metrics, m)   -- also reachable as cs.metrics
end

TestAlertMetrics = {}

local function values(fams, name)
  local out = {}
  for _, f in ipairs(fams) do
    if f.name == name then
      for _, s in ipairs(f.samples) do
        local parts = {}
        for _, k in ipairs { "collective", "message_size", "reference" } do
          if s.labels[k] then parts[#parts + 1] = s.labels[k] end
        end
        out[table.concat(parts, "/")] = s.value
      end
    end
  end
  return out
end

function TestAlertMetrics:test_consecutive_over_threshold_is_the_longest_run_of_the_interval()
  local a = alerts.new { latency_threshold_us = 100 }
  for _, v in ipairs { 150, 150, 150, 50, 150 } do a:observe { op = "allreduce", bytes = 1024, latency_us = v } end
  a:interval_end(0)
  local f = a:metrics()
  lu.assertEquals(values(f, "commscript_latency_over_threshold_consecutive"), { ["allreduce/1024"] = 3 })
  lu.assertEquals(values(f, "commscript_latency_threshold_seconds"), { ["allreduce/1024"] = 100e-6 })
  -- the run still going on (one value) counts whole in the next interval
  a:observe { op = "allreduce", bytes = 1024, latency_us = 150 }
  a:interval_end(1)
  lu.assertEquals(values(a:metrics(), "commscript_latency_over_threshold_consecutive"), { ["allreduce/1024"] = 2 })
  a:observe { op = "allreduce", bytes = 1024, latency_us = 10 }
  a:interval_end(2)
  lu.assertEquals(values(a:metrics(), "commscript_latency_over_threshold_consecutive"), { ["allreduce/1024"] = 2 })
  lu.assertEquals(values(a:metrics(), "commscript_latency_over_threshold_consecutive"), { ["allreduce/1024"] = 0 })
end

function TestAlertMetrics:test_utilisation_groups_of_the_last_interval()
  local a = alerts.new { util_min = 0.6 }
  for _, bw in ipairs { 10, 10, 10 } do a:observe { op = "allreduce", bytes = 1048576, busbw = bw } end
  a:interval_end(0)
  for _, bw in ipairs { 5, 4, 5.5 } do a:observe { op = "allreduce", bytes = 1048576, busbw = bw } end
  lu.assertEquals(#a:interval_end(1), 1)   -- cs.alerts' own utilisation alert
  local f = a:metrics()
  lu.assertEquals(values(f, "commscript_bandwidth_utilisation_max_ratio"), { best = 0.55 })
  lu.assertEquals(values(f, "commscript_bandwidth_utilisation_measurements"), { best = 3 })
  a:interval_end(2)   -- nothing measured: no group
  lu.assertEquals(values(a:metrics(), "commscript_bandwidth_utilisation_max_ratio"), {})
  lu.assertStrContains(m.text(a:metrics()), "# TYPE commscript_bandwidth_utilisation_max_ratio gauge")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestText", TestText },
    { "TestAlertMetrics", TestAlertMetrics },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
