-- cs.alerts: soak's alerts (docs/reference.md, soak) as pure functions over a stream of
-- measurements, so that a long-running recipe (recipes/soak.lua) can fire them as findings and
-- tests can drive them with made-up numbers. No communication, no clock, no report: the caller
-- feeds measurements and interval boundaries and reports what comes back.
--
--   local alerts = require "cs.alerts"          -- or cs.alerts
--   local a = alerts.new {
--     latency_threshold_us = 0,   -- fixed threshold (us) for every op+size; 0: derived per op+size
--     latency_factor = 3,         -- derived threshold = factor x p50 of the latencies of the first
--                                 -- interval in which that op+size was measured
--     baseline_min_samples = 3,   -- ... with at least this many values (else the next intervals'
--                                 -- values are added until there are)
--     consecutive = 3,            -- latency alert after this many over-threshold values in a row
--     latency_max_bytes = math.huge, -- only measurements of at most this many bytes are checked
--                                 -- for latency (large messages are bandwidth-bound)
--     util_min = 0.6,             -- utilisation (busbw / reference busbw) below this ...
--     util_min_samples = 3,       -- ... for every one of at least this many measurements of an
--                                 -- interval (a whole interval: "sustained") raises an alert
--     util_min_bytes = 0,         -- only measurements of at least this many bytes count for it
--                                 -- (small messages are latency-bound)
--     reference = nil,            -- function(op, bytes) -> busbw (GB/s) or nil: a baseline, e.g.
--                                 -- from the config's [thresholds]; nil: the best busbw seen for
--                                 -- that op+size so far in the run
--     error_rate_max = 0.05,      -- error alert when more than this fraction of the measurements
--                                 -- failed (wrong > 0, or error = true)
--   }
--   a:observe { op =, bytes =, latency_us =, busbw =, wrong =, wrong_ranks =, error = }
--                       -> list of new alerts
--   a:interval_end(i)   -> list of new alerts (utilisation of interval i; derives thresholds)
--   a:finish()          -> list of new alerts (error rate over the run; call once, at the end)
--   a:summary()         -> { measurements, errors, error_rate, alerts, by_kind, thresholds }
--   a:threshold(op, bytes) -> the latency threshold (us) of op+size, or nil while not derived
--   a:metrics()         -> cs.metrics families of the alerts' state for a Prometheus alerting rule
--                          (examples/prometheus/commscript.rules.yml); call at the end of each
--                          interval. Per op+size with a threshold: the threshold, and the longest
--                          run of consecutive values over it since the last call (a run that
--                          began earlier counts whole); per utilisation group of the interval just
--                          ended: its best utilisation and its number of measurements.
--
-- Measurements belong to the interval in progress: observe() them in order, then interval_end(i)
-- when the interval is over (also for the last, partial one).
--
-- An alert is a table ready for ctx.report:finding (extra field `kind`):
--   { kind = "latency" | "utilisation" | "error_rate", severity = "warn" | "error",
--     subject = { op =, bytes = } | "job", message =, evidence = {...}, remedy = }
--   latency      warn, when `consecutive` values in a row are over the threshold (a value at or
--                under it starts the count again); then not again for that op+size until
--                `consecutive` values in a row were at or under it (one alert per episode);
--                evidence: the values, the threshold
--   utilisation  warn, per interval in which every measurement of a group (at least
--                util_min_samples) was below util_min. The op+sizes judged against the best seen
--                form one group, subject "job" (a run's best is a noisy reference: only a drop
--                everywhere counts); each op with a baseline its own, subject { op = }.
--                evidence: interval, median/max utilisation, the worst op+size
--   error_rate   error, at finish(), when errors / measurements > error_rate_max; subject
--                { ranks = {...} } (the wrong_ranks seen) or "job"
-- Timeouts never reach this module: an operation past its deadline ends the whole job (exit 5).
local M = {}

local DEFAULTS = {
  latency_threshold_us = 0, latency_factor = 3, consecutive = 3, latency_max_bytes = math.huge,
  baseline_min_samples = 3,
  util_min = 0.6, util_min_samples = 3, util_min_bytes = 0,
  error_rate_max = 0.05,
}

local median = require("cs.stats").median

local function key_of(op, bytes) return op .. "/" .. tostring(bytes) end

local size_text = require("commscript.native").format_size  -- 65536 -> "64K", the engine's

local Alerts = {}
Alerts.__index = Alerts

function M.new(t)
  t = t or {}
  local cfg = {}
  for k, v in pairs(DEFAULTS) do cfg[k] = v end
  for k, v in pairs(t) do
    if DEFAULTS[k] == nil and k ~= "reference" then
      error(("alerts.new: unknown field '%s'"):format(tostring(k)), 2)
    end
    cfg[k] = v
  end
  for k in pairs(DEFAULTS) do
    if type(cfg[k]) ~= "number" or cfg[k] < 0 then error(("alerts.new: %s must be a number >= 0"):format(k), 2) end
  end
  if cfg.consecutive < 1 then error("alerts.new: consecutive must be at least 1", 2) end
  if cfg.reference ~= nil and type(cfg.reference) ~= "function" then
    error("alerts.new: reference must be a function(op, bytes) -> busbw", 2)
  end
  return setmetatable({
    cfg = cfg,
    keys = {},          -- key -> { op, bytes, threshold, baseline = {}, streak = {}, best }
    order = {},         -- keys in first-seen order
    interval = {},      -- measurements of the interval in progress: { key, busbw }
    measurements = 0, errors = 0, bad_ranks = {},
    fired = {}, by_kind = { latency = 0, utilisation = 0, error_rate = 0 },
    finished = false,
  }, Alerts)
end

function Alerts:_key(op, bytes)
  local k = key_of(op, bytes)
  local s = self.keys[k]
  if not s then
    s = { op = op, bytes = bytes, baseline = {}, streak = {}, best = nil }
    if self.cfg.latency_threshold_us > 0 and bytes <= self.cfg.latency_max_bytes then
      s.threshold = self.cfg.latency_threshold_us
    end
    self.keys[k] = s
    self.order[#self.order + 1] = k
  end
  return s
end

function Alerts:_fire(list, alert)
  self.fired[#self.fired + 1] = alert
  self.by_kind[alert.kind] = (self.by_kind[alert.kind] or 0) + 1
  list[#list + 1] = alert
end

function Alerts:threshold(op, bytes)
  local s = self.keys[key_of(op, bytes)]
  if s then return s.threshold end
  if self.cfg.latency_threshold_us > 0 and bytes <= self.cfg.latency_max_bytes then
    return self.cfg.latency_threshold_us
  end
  return nil
end

-- m: { op =, bytes =, latency_us =, busbw =, wrong =, error = }. Returns the alerts it fires.
function Alerts:observe(m)
  if type(m) ~= "table" or type(m.op) ~= "string" or type(m.bytes) ~= "number" then
    error("alerts:observe: measurement { op = string, bytes = number, ... } expected", 2)
  end
  local out = {}
  local s = self:_key(m.op, m.bytes)
  self.measurements = self.measurements + 1
  if (type(m.wrong) == "number" and m.wrong > 0) or m.error == true then
    self.errors = self.errors + 1
    if type(m.wrong_ranks) == "table" then
      for _, r in ipairs(m.wrong_ranks) do self.bad_ranks[r] = true end
    end
  end

  local lat = m.latency_us
  if type(lat) == "number" and m.bytes <= self.cfg.latency_max_bytes then
    if s.threshold then   -- consecutive values over the threshold, for metrics()
      s.over = lat > s.threshold and (s.over or 0) + 1 or 0
      s.over_max = math.max(s.over_max or 0, s.over)
    end
    if not s.threshold then
      s.baseline[#s.baseline + 1] = lat     -- fixed at the end of this interval
    elseif s.alerting then
      -- after an alert, the op+size is quiet again only after `consecutive` values in a row at
      -- or under the threshold (one alert per episode, not one per flap)
      if lat > s.threshold then s.good = 0 else s.good = s.good + 1 end
      if s.good >= self.cfg.consecutive then s.alerting, s.good, s.streak = false, 0, {} end
    elseif lat > s.threshold then
      s.streak[#s.streak + 1] = lat
      if #s.streak == self.cfg.consecutive then
        local values, texts = {}, {}
        for i, v in ipairs(s.streak) do values[i], texts[i] = v, ("%.1f"):format(v) end
        s.alerting, s.good, s.streak = true, 0, {}
        self:_fire(out, {
          kind = "latency", severity = "warn",
          subject = { op = m.op, bytes = m.bytes },
          message = ("%s %s: latency over %.1f us %d times in a row (%s us)"):format(
            m.op, size_text(m.bytes), s.threshold, #values, table.concat(texts, ", ")),
          evidence = { values_us = values, threshold_us = s.threshold, consecutive = self.cfg.consecutive,
                       derived = self.cfg.latency_threshold_us <= 0, baseline_p50_us = s.baseline_p50 },
          remedy = "a rank or link became slow: look for the slowest_rank of these results, a noisy " ..
                   "neighbour or a throttled link; re-run latency/bw_sweep on the ranks involved",
        })
      end
    else
      s.streak = {}
    end
  end

  local bw = m.busbw
  if type(bw) == "number" then
    if not s.best or bw > s.best then s.best = bw end
    if m.bytes >= self.cfg.util_min_bytes then
      self.interval[#self.interval + 1] = { key = key_of(m.op, m.bytes), busbw = bw }
    end
  end
  return out
end

-- The reference busbw of a key: the caller's baseline, else the best seen so far.
function Alerts:reference(op, bytes)
  if self.cfg.reference then
    local r = self.cfg.reference(op, bytes)
    if type(r) == "number" and r > 0 then return r, "baseline" end
  end
  local s = self.keys[key_of(op, bytes)]
  return s and s.best, "best"
end

-- Ends interval i: derives the latency thresholds still missing and checks utilisation.
function Alerts:interval_end(i)
  local out = {}
  for _, k in ipairs(self.order) do
    local s = self.keys[k]
    if not s.threshold and #s.baseline > 0 and #s.baseline >= self.cfg.baseline_min_samples then
      s.baseline_p50 = median(s.baseline)
      s.threshold = self.cfg.latency_factor * s.baseline_p50
    end
  end

  -- Groups: the op+sizes judged against the best seen form one group (the whole job: the best
  -- of a run is a noisy reference, only a drop everywhere is sustained); each op with a
  -- baseline forms its own group (subject { op = }).
  local groups, order = {}, {}
  for _, m in ipairs(self.interval) do
    local s = self.keys[m.key]
    local ref, kind = self:reference(s.op, s.bytes)
    if ref and ref > 0 then
      local g = kind == "baseline" and s.op or "*"
      if not groups[g] then
        groups[g] = { utils = {}, low = 0, worst = math.huge, reference = kind }
        order[#order + 1] = g
      end
      local G, u = groups[g], m.busbw / ref
      G.utils[#G.utils + 1] = u
      if u < self.cfg.util_min then G.low = G.low + 1 end
      if u < G.worst then G.worst, G.worst_key, G.worst_ref = u, m.key, ref end
    end
  end
  self.util_groups = {}   -- for metrics(): the interval's groups, each with its best utilisation
  for _, g in ipairs(order) do
    local G = groups[g]
    local best = 0
    for _, u in ipairs(G.utils) do if u > best then best = u end end
    self.util_groups[#self.util_groups + 1] = { op = g ~= "*" and g or nil, reference = G.reference,
                                                max = best, n = #G.utils }
    if #G.utils >= math.max(1, self.cfg.util_min_samples) and G.low == #G.utils then
      local maxu = 0
      for _, u in ipairs(G.utils) do if u > maxu then maxu = u end end
      local ws = self.keys[G.worst_key]
      self:_fire(out, {
        kind = "utilisation", severity = "warn", subject = g == "*" and "job" or { op = g },
        message = ("interval %s: %s bandwidth utilisation below %.0f%% for the whole interval (median %.0f%%, best %.0f%% over %d measurements, against %s)")
          :format(tostring(i), g == "*" and "the job's" or g, 100 * self.cfg.util_min, 100 * median(G.utils),
                  100 * maxu, #G.utils, g == "*" and "the best busbw of each op+size" or "the baseline"),
        evidence = { interval = i, measurements = #G.utils, util_min = self.cfg.util_min, reference = G.reference,
                     median_utilisation = median(G.utils), max_utilisation = maxu,
                     worst = { op = ws.op, bytes = ws.bytes, utilisation = G.worst, busbw_reference = G.worst_ref } },
        remedy = "the bus bandwidth stayed low for a whole interval: look for a slow rank or link " ..
                 "(slowest_rank in the results), contention from other jobs, or throttling",
      })
    end
  end
  self.interval = {}
  return out
end

-- Ends the run: the error rate over all measurements.
function Alerts:finish()
  local out = {}
  if self.finished then return out end
  self.finished = true
  local rate = self.measurements > 0 and self.errors / self.measurements or 0
  if rate > self.cfg.error_rate_max then
    local ranks = {}
    for r in pairs(self.bad_ranks) do ranks[#ranks + 1] = r end
    table.sort(ranks)
    self:_fire(out, {
      kind = "error_rate", severity = "error", subject = #ranks > 0 and { ranks = ranks } or "job",
      message = ("%d of %d measurements failed (%.1f%%, above %.1f%%)"):format(
        self.errors, self.measurements, 100 * rate, 100 * self.cfg.error_rate_max),
      evidence = { errors = self.errors, measurements = self.measurements, error_rate = rate,
                   error_rate_max = self.cfg.error_rate_max, ranks = #ranks > 0 and ranks or nil },
      remedy = "wrong results: re-run on the ranks named in wrong_ranks alone, check their memory and links",
    })
  end
  return out
end

-- Prometheus families of the alerts' state (cs.metrics), for the rules file's alerts.
function Alerts:metrics()
  local fam, add = require("cs.metrics").family, require("cs.metrics").add
  local thr = fam("commscript_latency_threshold_seconds",
    "Latency alert threshold of this collective and size (soak: --latency-threshold-us, or 3 x the p50 of its first interval)")
  local over = fam("commscript_latency_over_threshold_consecutive",
    "Longest run of consecutive measurements (p50) over the latency threshold since the last interval; the soak alert fires at " ..
    tostring(self.cfg.consecutive))
  for _, k in ipairs(self.order) do
    local s = self.keys[k]
    if s.threshold then
      local labels = { collective = s.op, message_size = ("%d"):format(s.bytes) }
      add(thr, labels, s.threshold / 1e6)
      add(over, labels, s.over_max or 0)
      s.over_max = s.over or 0   -- a run still going on counts whole in the next interval
    end
  end
  local umax = fam("commscript_bandwidth_utilisation_max_ratio",
    "Best bus bandwidth utilisation (busbw / reference) among the last interval's measurements of a group; all were below it")
  local un = fam("commscript_bandwidth_utilisation_measurements", "Measurements of the last interval's utilisation group")
  for _, g in ipairs(self.util_groups or {}) do
    local labels = { reference = g.reference, collective = g.op }
    add(umax, labels, g.max)
    add(un, labels, g.n)
  end
  return { thr, over, umax, un }
end

function Alerts:summary()
  local thresholds = {}
  for _, k in ipairs(self.order) do
    local s = self.keys[k]
    if s.threshold then thresholds[k] = s.threshold end
  end
  return {
    measurements = self.measurements, errors = self.errors,
    error_rate = self.measurements > 0 and self.errors / self.measurements or 0,
    alerts = #self.fired,
    by_kind = { latency = self.by_kind.latency, utilisation = self.by_kind.utilisation,
                error_rate = self.by_kind.error_rate },
    thresholds = thresholds,
  }
end

return M
