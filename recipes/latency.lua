-- Point-to-point latency and bandwidth between pairs of ranks, defined as osu_latency and osu_bw
-- (OMB 7.4) define them, one pair at a time:
--   latency:   `warmup` untimed round trips, then `iters` round trips timed as one loop; one-way
--              latency = loop time / (2 x iters). 10000 iterations and 100 warm-up up to 8 KiB,
--              1000 and 10 above (OSU's LAT_LOOP_* / LAT_SKIP_*, LARGE_MESSAGE_SIZE 8192).
--   bandwidth: per iteration a window of 64 messages, then a 1-byte acknowledgement; `bw_iters`
--              iterations timed as one loop after `bw_warmup`: 100 and 10 up to 8 KiB, 20 and 2
--              above (BW_LOOP_* / BW_SKIP_*); MB/s = bytes x window x iters / 1e6 / seconds.
--   sizes:     0 B (latency only) to 4 MiB by powers of two (OSU's pt2pt range).
-- p50/p99/max come from a separate pass of `samples` round trips each timed on its own, so
-- their clock reads do not reach the latency column (docs/timing.md).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "latency",
  version = "2.0.2",
  requires = ">=0.1, <1.0",
  summary = "point-to-point latency and bandwidth between rank pairs (osu_latency / osu_bw)",
  options = {
    min = { default = "0", help = "smallest message size (osu_latency: 0)", type = "size" },
    max = { default = "4M", help = "largest message size (OSU pt2pt: 4M)", type = "size" },
    factor = { 2, "multiplicative step between sizes", type = "number", min = 1.0001 },
    large = { default = "8K", help = "sizes above this use the *_large counts (OSU LARGE_MESSAGE_SIZE)", type = "size" },
    iters = { 10000, "timed ping-pong round trips per size up to --large", min = 1 },
    iters_large = { 1000, "timed ping-pong round trips per size above --large", min = 1 },
    warmup = { 100, "untimed round trips per size up to --large", min = 0 },
    warmup_large = { 10, "untimed round trips per size above --large", min = 0 },
    samples = { 1000, "round trips of the separate per-iteration pass (p50/p99/max); at most the iterations", min = 1 },
    window = { 64, "messages in flight per bandwidth iteration (osu_bw's window)", min = 1 },
    bw_iters = { 100, "timed bandwidth windows per size up to --large", min = 1 },
    bw_iters_large = { 20, "timed bandwidth windows per size above --large", min = 1 },
    bw_warmup = { 10, "untimed bandwidth windows per size up to --large", min = 0 },
    bw_warmup_large = { 2, "untimed bandwidth windows per size above --large", min = 0 },
    bw = { true, "also measure streaming bandwidth (--no-bw: latency only)" },
    pairs = { default = "zero", help = "zero: rank 0 with every other rank; all: every pair of ranks",
              choices = { "zero", "all" } },
  },
}

-- The pairs {a, b} (a < b, 0-based ranks) to measure, in order.
local function make_pairs(mode, n)
  local out = {}
  if mode == "all" then
    for a = 0, n - 2 do
      for b = a + 1, n - 1 do out[#out + 1] = { a, b } end
    end
  else
    for b = 1, n - 1 do out[#out + 1] = { 0, b } end
  end
  return out
end


-- OSU's counts for one size: (iters, warmup, bw_iters, bw_warmup).
local function counts(o, bytes)
  if bytes > o.large then return o.iters_large, o.warmup_large, o.bw_iters_large, o.bw_warmup_large end
  return o.iters, o.warmup, o.bw_iters, o.bw_warmup
end

-- Runs on the two ranks of the pair: every size, ping-pong then (if enabled) streaming.
local function measure_pair(ctx, sizes, peer, sender)
  local o, rows = ctx.opt, {}
  for _, bytes in ipairs(sizes) do
    local iters, warmup, bw_iters, bw_warmup = counts(o, bytes)
    local pp = ctx.comm:pingpong { peer = peer, bytes = bytes, iters = iters, warmup = warmup,
                                   samples = math.min(o.samples, iters) }
    local row = { bytes = bytes, latency_us = pp.latency_us, samples = pp.samples, mean_us = pp.mean_us,
                  min_us = pp.min_us, p50_us = pp.p50_us, p99_us = pp.p99_us, max_us = pp.max_us, cv = pp.cv,
                  iters = iters, warmup = warmup }
    if o.bw and bytes > 0 then
      row.gbs = ctx.comm:stream { peer = peer, sender = sender, bytes = bytes, window = o.window,
                                  iters = bw_iters, warmup = bw_warmup }
      row.bw_iters, row.bw_warmup = bw_iters, bw_warmup
    end
    rows[#rows + 1] = row
  end
  return rows
end

local HEAD = "%-10s %14s %10s %10s %10s %18s"
local ROW = "%-10d %14.2f %10.2f %10.2f %10.2f %18s"

function recipe.run(ctx)
  local o = ctx.opt
  if ctx.size < 2 then
    cs.raise(cs.exit.bad_input, ("latency measures between pairs of ranks and needs at least 2 (this job has %d): "
      .. "run it under mpirun -np 2 or more"):format(ctx.size), 0)
  end
  if o.min > o.max then
    cs.raise(cs.exit.bad_input, ("--min %s is larger than --max %s"):format(cs.format_size(o.min), cs.format_size(o.max)), 0)
  end
  local hosts = cs.sweep.check_memory(ctx, 2 * o.max, "--max " .. cs.format_size(o.max))
  local sizes = cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }
  local pairs_list = make_pairs(o.pairs, ctx.size)
  local progress = cs.progress.new { total = #pairs_list, label = "latency", rank = ctx.rank }

  ctx.log("# commscript latency %s: %s, backend %s, pairs %s (%d), iters %d/%d, warmup %d/%d (up to/above %s), "
    .. "samples %d, window %d, bw-iters %d/%d, bw-warmup %d/%d",
    recipe.version, cs.text.plural(ctx.size, "rank"), ctx.backend, o.pairs, #pairs_list, o.iters, o.iters_large, o.warmup, o.warmup_large,
    cs.format_size(o.large), o.samples, o.window, o.bw_iters, o.bw_iters_large, o.bw_warmup, o.bw_warmup_large)
  ctx.log("# latency: the lower rank's ping-pong loop time / (2 x iters) (osu_latency); p50/p99/max: a separate "
    .. "pass, half of each round trip; bandwidth: as the sender (the lower rank) measured it, MB/s = 1e6 B/s (osu_bw)")

  for _, pair in ipairs(pairs_list) do
    local a, b = pair[1], pair[2]
    ctx.comm:barrier()  -- one pair at a time: everyone waits for the previous pair to finish
    local mine = {}
    if ctx.rank == a then mine = measure_pair(ctx, sizes, b, true)
    elseif ctx.rank == b then mine = measure_pair(ctx, sizes, a, false) end
    -- Collective (every rank calls it): rank 0 learns both sides of the pair. The ranks outside
    -- the pair wait here while it measures every size: their deadline covers the pair's whole
    -- run (each of the pair's own operations keeps the normal deadline, so a stuck pair is still
    -- named on time), else a short --timeout would call the idle ranks hung.
    local idle = ctx.rank ~= a and ctx.rank ~= b
    local prev = idle and ctx.comm:set_timeout(0) or nil
    if idle and prev > 0 then ctx.comm:set_timeout(prev * (4 * #sizes + 2)) elseif idle then ctx.comm:set_timeout(0) end
    local all = ctx.comm:allgather_value({ rows = mine })
    if idle then ctx.comm:set_timeout(prev) end
    local ra, rb = all[a + 1].rows or {}, all[b + 1].rows or {}

    if ctx.rank == 0 then
      ctx.log("#\n# pair %d <-> %d (%s <-> %s)", a, b, hosts[a + 1], hosts[b + 1])
      ctx.log(HEAD, "# Size", "Latency (us)", "p50", "p99", "max", "Bandwidth (MB/s)")
      local best_lat, best_bw, best_bw_bytes = math.huge, 0, 0
      for i, bytes in ipairs(sizes) do
        local s, r = ra[i], rb[i]
        if not s or s.bytes ~= bytes then
          cs.raise(cs.exit.internal, ("latency: pair %d-%d returned no measurement for %d bytes"):format(a, b, bytes), 0)
        end
        local mbps = s.gbs and s.gbs * 1000 or nil
        ctx.log(ROW, bytes, s.latency_us, s.p50_us, s.p99_us, s.max_us, mbps and ("%.2f"):format(mbps) or "-")
        if s.latency_us < best_lat then best_lat = s.latency_us end
        if mbps and mbps > best_bw then best_bw, best_bw_bytes = mbps, bytes end
        ctx.report:result {
          kind = "p2p",
          timing = "loop",
          pair = { a, b },
          hosts = { hosts[a + 1], hosts[b + 1] },
          bytes = bytes,
          latency_us = s.latency_us,
          samples = s.samples,
          iter_mean_us = s.mean_us,
          min_us = s.min_us,
          p50_us = s.p50_us,
          p99_us = s.p99_us,
          max_us = s.max_us,
          cv = s.cv,
          peer_latency_us = r and r.latency_us or nil,
          bw_MBps = mbps,
          bw_GBps = s.gbs,
          receiver_bw_GBps = r and r.gbs or nil,
          iters = s.iters,
          warmup = s.warmup,
          window = o.bw and s.gbs and o.window or nil,
          bw_iters = s.bw_iters,
          bw_warmup = s.bw_warmup,
        }
      end
      if o.bw and best_bw > 0 then
        ctx.log("# pair %d <-> %d: lowest latency %.2f us, peak bandwidth %.2f MB/s at %s",
          a, b, best_lat, best_bw, cs.format_size(best_bw_bytes))
      else
        ctx.log("# pair %d <-> %d: lowest latency %.2f us", a, b, best_lat)
      end
    end
    progress:step(("pair %d-%d"):format(a, b))
  end
end

return recipe
