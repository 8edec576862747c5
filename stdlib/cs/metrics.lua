-- cs.metrics: a recipe's own Prometheus metrics beside the ones every run has (docs/monitoring.md).
-- With --metrics FILE or --metrics-listen ADDRESS:PORT, rank 0 publishes the run's numbers
-- (results, findings, scorecard, run: the engine reads them from the report as it stands) plus
-- the families given here; the last ones given are published again with the final values at
-- the run's end. Without those options publish() does nothing (and returns false); every rank
-- may call it.
--
--   local m = cs.metrics
--   local f = m.family("commscript_soak_intervals_total", "intervals completed", "counter")
--   m.add(f, { collective = "allreduce" }, 3)      -- labels (string or number values), value
--   m.publish { f }                                 -- -> true on rank 0 when published
--   m.text { f }                                    -- -> the text (HELP, TYPE, samples)
--
-- Names follow Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*; a counter ends in _total; base
-- units: seconds, bytes); label values are escaped (\ " newline) by the engine's writer. A
-- malformed family raises (exit 2).
local native = require "commscript.native"

local M = {}

-- A family: name, help text, type ("gauge" (default), "counter" or "untyped").
function M.family(name, help, kind)
  return { name = name, help = help or "", type = kind or "gauge", samples = native.array {} }
end

-- Adds a sample to family f.
function M.add(f, labels, value)
  f.samples[#f.samples + 1] = { labels = labels or {}, value = value }
  return f
end

function M.text(families) return native.metrics_text(families) end

function M.publish(families) return native.metrics_publish(families or {}) end

return M
