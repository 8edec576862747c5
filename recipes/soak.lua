-- Soak: mixed collectives for a while, measured with comm:bench and checked, with a summary line
-- per interval on rank 0 and alerts (cs.alerts) fired as findings:
--   latency over its threshold 3 times in a row (same op+size)      -> warn
--   bandwidth utilisation below --util-min for a whole interval      -> warn
--   error rate (measurements with wrong elements) above the maximum  -> error (exit 3; exit 4
--                                                                      when elements were wrong)
-- The alert logic is cs.alerts (stdlib/cs/alerts.lua); every rank feeds it the same numbers (bench
-- results are the same on every rank, the clock is rank 0's, broadcast), so every rank reports
-- the same findings.
--   latency      the p50 of a measurement's iterations (slowest rank per iteration), for sizes up
--                to --latency-max-bytes; threshold --latency-threshold-us, or 3 x the p50 of
--                that op+size's values in the first interval (with at least 3 values)
--   utilisation  busbw / reference for sizes from --util-min-bytes: the config's baseline
--                ([thresholds.<op>] busbw = GB/s, or [thresholds.<op>.busbw_by_size] "1M" = GB/s),
--                else the best busbw of that op+size seen so far in the run
--   errors       measurements with wrong > 0 (the runner already makes those exit 4, so the error
--                finding comes with exit 4). Timeouts are not survivable: an operation past
--                --timeout ends the whole job with exit 5, so they never count as errors here.
-- With --metrics FILE / --metrics-listen ADDRESS:PORT the numbers go to Prometheus at the end of
-- each interval (cs.metrics; docs/monitoring.md), with the alerts' state for the same three rules
-- in examples/prometheus/commscript.rules.yml.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "soak",
  version = "1.2.0",
  requires = ">=0.1, <1.0",
  summary = "mixed collectives for a duration; per-interval summaries; latency/utilisation/error alerts",
  options = {
    duration = { 10, "seconds to run", type = "number", min = 0 },
    interval = { 2, "seconds between summaries (and utilisation checks)", type = "number", min = 0.01 },
    ops = { default = "allreduce,allgather,broadcast,alltoall", help = "collectives to cycle over",
            type = "list", choices = cs.collectives },
    min = { default = "1K", help = "smallest message size", type = "size" },
    max = { default = "1M", help = "largest message size", type = "size" },
    factor = { 4, "multiplicative step between sizes", type = "number", min = 1.0001 },
    iters = { 5, "timed iterations per measurement", min = 1 },
    warmup = { 1, "untimed iterations per measurement", min = 0 },
    latency_threshold_us = { 0, "latency alert threshold in us; 0: 3 x the p50 of the first interval's values of each op+size",
                             type = "number", min = 0 },
    latency_max_bytes = { default = "64K", help = "latency alerts for sizes up to this (larger ones are bandwidth-bound)",
                          type = "size" },
    util_min = { 0.6, "utilisation alert level (busbw / [thresholds] baseline, else / best busbw of that op+size)", type = "number", min = 0, max = 1 },
    util_min_bytes = { default = "256K", help = "utilisation alerts for sizes from this up (smaller ones are latency-bound)",
                       type = "size" },
    error_rate_max = { 0.05, "error alert when more than this fraction of measurements is wrong",
                       type = "number", min = 0, max = 1 },
    check = { true, "check every result for wrong elements" },
  },
}

-- A baseline busbw from the config, when it has one: [thresholds.<op>] busbw = GB/s (every size),
-- or [thresholds.<op>.busbw_by_size] "1M" = GB/s (one size).
local function config_reference(config)
  local th = type(config) == "table" and config.thresholds
  if type(th) ~= "table" then return nil end
  local any = false
  for _, v in pairs(th) do if type(v) == "table" then any = true end end
  if not any then return nil end
  return function(op, bytes)
    local t = th[op]
    if type(t) ~= "table" then return nil end
    if type(t.busbw_by_size) == "table" then
      for k, v in pairs(t.busbw_by_size) do
        if cs.parse_size(k) == bytes and type(v) == "number" then return v end
      end
    end
    if type(t.busbw) == "number" then return t.busbw end
    return nil
  end
end

local US_PER_S, US_PER_MS = 1e6, 1e3
local MS_FROM_US = 10 * US_PER_MS  -- times from 10 ms up are printed in ms, from 1 s up in s

local function fmt_us(us)
  if us >= US_PER_S then return ("%.2fs"):format(us / US_PER_S) end
  if us >= MS_FROM_US then return ("%.1fms"):format(us / US_PER_MS) end
  return ("%.1fus"):format(us)
end

-- The (op, size) pairs to cycle over, in order: every op at one size, then the next size.
local function soak_steps(o, dtype, size)
  local steps = {}
  for _, bytes in ipairs(cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }) do
    for _, op in ipairs(o.ops) do
      if cs.count_for_bytes(op, bytes, dtype, size) > 0 then steps[#steps + 1] = { op = op, bytes = bytes } end
    end
  end
  if #steps == 0 then
    cs.raise(cs.exit.bad_input, ("no operation of --ops fits in --max %s on %d ranks"):format(cs.format_size(o.max), size), 0)
  end
  return steps
end

-- Counts measurement r into the interval's summary (cur) and the run's totals.
local function tally(cur, total, r)
  cur.ops, cur.calls = cur.ops + 1, cur.calls + r.iters + r.warmup
  cur.wrong = cur.wrong + (r.wrong or 0)
  total.measurements, total.calls = total.measurements + 1, total.calls + r.iters + r.warmup
  total.wrong = total.wrong + (r.wrong or 0)
  for _, wr in ipairs(r.wrong_ranks or {}) do total.wrong_ranks[wr] = true end
  local b = cur.by_op[r.op]
  if not b then b = { p50 = {}, p99 = {}, busbw = {}, bw_bytes = 0 }; cur.by_op[r.op] = b end
  b.p50[#b.p50 + 1], b.p99[#b.p99 + 1] = r.p50_us, r.p99_us
  -- busbw of the summary: at the largest size of the op measured in the interval
  if r.bytes > b.bw_bytes then b.busbw, b.bw_bytes = {}, r.bytes end
  if r.bytes == b.bw_bytes then b.busbw[#b.busbw + 1] = r.busbw end
end

-- The finding for wrong elements that stayed under the error-rate alert's threshold.
local function wrong_below_rate(total, sum, o)
  local ranks = {}
  for r in pairs(total.wrong_ranks) do ranks[#ranks + 1] = r end
  table.sort(ranks)
  return { {
    severity = "warn", subject = #ranks > 0 and { ranks = ranks } or "job",
    message = ("%d of %d measurements had wrong elements (%.1f%%, not above %.1f%%)"):format(
      sum.errors, sum.measurements, 100 * sum.error_rate, 100 * o.error_rate_max),
    evidence = { errors = sum.errors, measurements = sum.measurements, wrong = total.wrong },
    remedy = "data corruption: re-run on the ranks named in wrong_ranks alone",
  } }
end

function recipe.run(ctx)
  local o, comm = ctx.opt, ctx.comm
  if o.min > o.max then
    cs.raise(cs.exit.bad_input, ("--min %s is larger than --max %s"):format(cs.format_size(o.min), cs.format_size(o.max)), 0)
  end
  local dtype = "float32"
  local steps = soak_steps(o, dtype, ctx.size)

  local alerts = cs.alerts.new {
    latency_threshold_us = o.latency_threshold_us,
    latency_max_bytes = o.latency_max_bytes,
    util_min_bytes = o.util_min_bytes,
    util_min = o.util_min,
    error_rate_max = o.error_rate_max,
    reference = config_reference(ctx.config),
  }

  local found = cs.findings.collector(ctx)
  local fired_list = found.list
  local function report(list)
    found:add(list)
    cs.findings.print(ctx, list, { prefix = "# ALERT ", remedy = false })
  end

  -- Per interval, for the summary line.
  local cur = { ops = 0, calls = 0, wrong = 0, by_op = {} }
  local total = { measurements = 0, calls = 0, wrong = 0, wrong_ranks = {} }
  local function summarise(i, t_end)
    local parts = {}
    for _, op in ipairs(o.ops) do
      local b = cur.by_op[op]
      if b then
        local p50 = cs.stats.median(b.p50)
        local p99 = cs.stats.percentile(b.p99, 99)
        parts[#parts + 1] = ("%s p50 %s p99 %s busbw %.2f GB/s@%s"):format(op, fmt_us(p50), fmt_us(p99),
          cs.stats.median(b.busbw), cs.format_size(b.bw_bytes))
      end
    end
    ctx.log("[soak] interval %d (t=%.1fs): %d measurements (%d calls) | %s | wrong %d | alerts %d",
      i, t_end, cur.ops, cur.calls, #parts > 0 and table.concat(parts, " | ") or "-", cur.wrong, #fired_list)
    cur = { ops = 0, calls = 0, wrong = 0, by_op = {} }
  end

  ctx.log("# commscript soak %s: %s, backend %s, %gs (summary every %gs), %d op+size pairs, iters %d, check %s",
    recipe.version, cs.text.plural(ctx.size, "rank"), ctx.backend, o.duration, o.interval, #steps, o.iters, tostring(o.check))

  comm:barrier()
  local t0 = cs.now()   -- rank 0's clock decides; the others follow its broadcasts
  -- Intervals 0 .. last cover the duration (the last one may be partial). A measurement belongs
  -- to the interval in which it started.
  local last = math.ceil(o.duration / o.interval) - 1
  local interval, step = 0, 0
  local function publish()   -- rank 0, with --metrics or --metrics-listen; a no-op otherwise
    local n = cs.metrics.family("commscript_soak_intervals_total", "Soak intervals completed", "counter")
    local fams = alerts:metrics()
    fams[#fams + 1] = cs.metrics.add(n, {}, interval)
    cs.metrics.publish(fams)
  end
  local function end_interval()
    report(alerts:interval_end(interval))
    summarise(interval, math.min((interval + 1) * o.interval, o.duration))
    interval = interval + 1
    publish()
  end
  while true do
    -- One decision per measurement, taken by rank 0 and broadcast: every rank runs exactly the
    -- same sequence of collectives and stops after the same one.
    local ctl = comm:broadcast_value(ctx.rank == 0 and { t = cs.now() - t0 } or nil, 0)
    local t = ctl.t
    if t >= o.duration then break end
    -- interval(s) that ended (one may have passed with nothing measured, during a long measurement)
    while math.floor(t / o.interval) > interval do end_interval() end

    step = step % #steps + 1
    local s = steps[step]
    local r = comm:bench { op = s.op, bytes = s.bytes, dtype = dtype, iters = o.iters, warmup = o.warmup,
                           check = o.check }
    r.kind, r.t, r.interval = "soak", t, interval
    ctx.report:result(r)
    report(alerts:observe { op = r.op, bytes = r.bytes, latency_us = r.p50_us, busbw = r.busbw, wrong = r.wrong,
                           wrong_ranks = r.wrong_ranks })

    tally(cur, total, r)
  end
  while interval <= last do end_interval() end   -- the rest, the last (partial) one included
  local intervals = interval
  report(alerts:finish())

  local sum = alerts:summary()
  if total.wrong > 0 and sum.by_kind.error_rate == 0 then report(wrong_below_rate(total, sum, o)) end
  publish()   -- the error-rate alert of finish(); the engine publishes the final values at the end
  ctx.report:set("soak", {
    duration_s = o.duration, interval_s = o.interval, measurements = sum.measurements, calls = total.calls,
    wrong = total.wrong, errors = sum.errors, error_rate = sum.error_rate, alerts = sum.alerts,
    alerts_by_kind = sum.by_kind, latency_thresholds_us = sum.thresholds,
  })
  ctx.log("# soak done: %d measurements (%d calls) in %d interval(s), wrong %d, error rate %.1f%%, alerts %d (latency %d, utilisation %d, error rate %d)",
    sum.measurements, total.calls, intervals, total.wrong, 100 * sum.error_rate, sum.alerts,
    sum.by_kind.latency, sum.by_kind.utilisation, sum.by_kind.error_rate)
end

return recipe
