-- The main job: is the fabric healthy, and if not, which rank, host, link or setting is to
-- blame, with the evidence and what to do. The flow of scorecard.md:
--   topology -> environment -> bandwidth sweep -> pattern -> localisation -> scorecard
-- Exit 0 when healthy; 3 when an error-severity finding or --fail-below says so; 4 on wrong
-- data; 5 when a rank never arrives (the watchdog).
local cs = require "commscript"

local TIERS = {
  quick = { budget = 60, ops = { "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall" },
            min = 8, max = 4194304, factor = 2, iters = 20, warmup = 3, pair_bytes = 262144, repeats = 3 },
  standard = { budget = 600, ops = { "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall",
                                     "gather", "scatter", "sendrecv" },
               min = 8, max = 67108864, factor = 2, iters = 20, warmup = 5, pair_bytes = 1048576, repeats = 3 },
  long = { budget = 3600, ops = { "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall",
                                  "gather", "scatter", "sendrecv" },
           min = 8, max = 268435456, factor = 2, iters = 50, warmup = 5, pair_bytes = 4194304, repeats = 5 },
}

local recipe = cs.recipe {
  name = "full_diag",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "topology, environment, bandwidth, rank x rank pattern, localisation and a scorecard",
  options = {
    tier = { default = "quick", help = "how thorough (time budget: quick ~1 min, standard ~10, long ~60)",
             choices = { "quick", "standard", "long" } },
    max = { default = "0", help = "largest sweep size (0: the tier's)", type = "size" },
    dtype = { default = "float32", help = "element type of the sweep", choices = cs.dtypes },
  },
}

local function median(list) return cs.diagnose.median(list) end

-- Findings produced identically on every rank are reported once (every rank calls
-- ctx.report:finding, only rank 0 writes): keep them deterministic.
local function report_all(ctx, findings, counts)
  for _, f in ipairs(findings) do
    ctx.report:finding(f)
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end
end

function recipe.run(ctx)
  local tier = TIERS[ctx.opt.tier]
  local t0 = cs.now()
  local counts = {}
  local all_findings = {}
  local function add(findings)
    for _, f in ipairs(findings) do all_findings[#all_findings + 1] = f end
    report_all(ctx, findings, counts)
  end
  local function stage(name)
    ctx.log("== %s (%.1f s)", name, cs.now() - t0)
  end
  local function over_budget() return cs.now() - t0 > tier.budget end
  -- Configuration is checked before measuring: a bad [scorecard] is bad input (exit 1).
  local ok, err = pcall(cs.scorecard.compute, {}, ctx.config.scorecard or {})
  if not ok then cs.raise(cs.exit.bad_input, "[scorecard]: " .. tostring(err), 0) end
  -- Site rules are loaded first: a broken rule file is bad input, refused before measuring.
  local rules = {}
  for _, r in ipairs(cs.rules.builtin) do rules[#rules + 1] = r end
  local site = (ctx.config.rules or {}).files
  if site then
    for _, r in ipairs(cs.rules.load(type(site) == "table" and site or { site })) do rules[#rules + 1] = r end
  end
  local hosts = ctx.comm:allgather_value(ctx.host)
  local nhosts = {}
  for _, h in ipairs(hosts) do nhosts[h] = true end
  local host_count = 0
  for _ in pairs(nhosts) do host_count = host_count + 1 end
  ctx.log("# commscript full_diag %s: tier %s, %d ranks on %d host(s), backend %s", recipe.version, ctx.opt.tier,
    ctx.size, host_count, ctx.backend)

  -- 1. topology
  stage("topology")
  local oversubscribed = {}  -- host -> true when it runs more ranks than it has CPUs
  if cs.topo then
    local t = cs.topo.collect(ctx)
    for name, h in pairs(t.hosts or {}) do
      if type(h) == "table" and h.local_size and h.cpu_online_count and h.local_size > h.cpu_online_count then
        oversubscribed[name] = true
      end
    end
    ctx.report:set("topology", t)
    -- Environment differences between ranks are the env audit's (next stage) when it is there.
    add(cs.topo.check(t, { env_prefixes = cs.env and {} or nil }))
    ctx.log("%s", cs.topo.render(t))
  else
    local per_host = {}
    for r, h in ipairs(hosts) do
      per_host[h] = per_host[h] or {}
      table.insert(per_host[h], r - 1)
    end
    ctx.report:set("topology", { hosts = per_host })
  end

  -- 2. environment
  stage("environment")
  if cs.env then
    -- Every rank audits its own environment and NCCL config files; the same finding on several
    -- ranks becomes one naming them, and variables that differ between ranks are added.
    local e = cs.env.collect(ctx, {})
    add(e.findings)
    ctx.log("environment: %d variable(s) audited on rank 0, %d finding(s)", e.audited or 0, #e.findings)
  end

  -- 3. bandwidth sweep
  stage("bandwidth sweep")
  local max = ctx.opt.max > 0 and ctx.opt.max or tier.max
  local sizes = cs.sweep.sizes { min = tier.min, max = max, factor = tier.factor }
  local sweep, results_n, wrong_results, cvs = {}, 0, 0, {}
  local straggler_votes, straggler_sizes = {}, 0
  local budget_noted = false
  for _, op in ipairs(tier.ops) do
    sweep[op] = {}
    ctx.log("#\n# %s", op)
    ctx.log(cs.bwtable.header())
    for _, bytes in ipairs(sizes) do
      -- Every rank must skip the same sizes: rank 0's clock decides.
      if ctx.comm:broadcast_value(over_budget(), 0) then
        if not budget_noted then
          budget_noted = true
          add { { severity = "info", subject = { stage = "bandwidth sweep" },
                  message = ("sweep cut short at %s of %s: the %s tier's %d s budget is spent"):format(
                    cs.format_size(bytes), op, ctx.opt.tier, tier.budget),
                  evidence = { budget_s = tier.budget, elapsed_s = cs.now() - t0 }, remedy = "use a longer --tier" } }
        end
        break
      end
      if cs.count_for_bytes(op, bytes, ctx.opt.dtype, ctx.size) > 0 then
        local r = ctx.comm:bench { op = op, bytes = bytes, dtype = ctx.opt.dtype, iters = tier.iters,
                                   warmup = tier.warmup }
        r.placement, r.kind = "out-of-place", "sweep"
        ctx.report:result(r)
        sweep[op][#sweep[op] + 1] = r
        results_n = results_n + 1
        if (r.wrong or 0) > 0 then wrong_results = wrong_results + 1 end
        cvs[#cvs + 1] = r.cv
        ctx.log(cs.bwtable.row(r, nil))
        -- Arrival: a rank that is late waits the least. Vote over the small all-reduces.
        if op == "allreduce" and bytes <= 65536 then
          straggler_sizes = straggler_sizes + 1
          for _, s in ipairs(cs.diagnose.stragglers(r.rank_mean_us)) do
            local v = straggler_votes[s.rank] or { n = 0, lateness = {}, median = {} }
            v.n = v.n + 1
            v.lateness[#v.lateness + 1] = s.lateness
            v.median[#v.median + 1] = s.median
            straggler_votes[s.rank] = v
          end
        end
      end
    end
  end
  local stragglers = {}
  for rank, v in pairs(straggler_votes) do
    if straggler_sizes >= 3 and v.n >= math.ceil(2 * straggler_sizes / 3) then
      stragglers[#stragglers + 1] = { rank = rank, lateness = median(v.lateness), median = median(v.median),
                                      score = median(v.lateness) / median(v.median), op = "allreduce",
                                      sizes = v.n .. "/" .. straggler_sizes }
    end
  end
  table.sort(stragglers, function(a, b) return a.rank < b.rank end)

  -- 4. pattern: the rank x rank matrix
  local matrix, loc = nil, { hosts = {}, ranks = {}, links = {} }
  if ctx.size >= 2 and not over_budget() then
    stage("pattern (rank x rank)")
    matrix = cs.p2p.matrix(ctx, { bytes = tier.pair_bytes, window = 4, iters = 3, repeats = 1, lat_iters = 50 })
    ctx.report:set("matrix", cs.p2p.matrix_report(matrix, tier.pair_bytes))
    -- 5. localisation (from exchange times; suspects re-tested alone)
    stage("localisation")
    local args = { op = "sendrecv", bytes = tier.pair_bytes, iters = 10, repeats = tier.repeats }
    local pairs_t = cs.p2p.round_robin(ctx, args)
    for _, p in ipairs(pairs_t) do
      ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2], hosts = { hosts[p[1] + 1], hosts[p[2] + 1] },
                          bytes = tier.pair_bytes, min_us = p[3] }
    end
    if ctx.size >= 4 or host_count >= 3 then loc = cs.p2p.localise(ctx, pairs_t, hosts, args) end
  elseif ctx.size >= 2 then
    add { { severity = "info", subject = { stage = "pattern" }, message = "pattern and localisation skipped: the time budget is spent",
            evidence = { budget_s = tier.budget, elapsed_s = cs.now() - t0 }, remedy = "use a longer --tier" } }
  end

  -- 6. scorecard
  stage("scorecard")
  local cfg = ctx.config.scorecard or {}
  local ar = sweep.allreduce or {}
  local big, small = ar[#ar], ar[1]
  local reference, source
  if cfg.bandwidth_reference_gbps then
    reference, source = cfg.bandwidth_reference_gbps, "config [scorecard] bandwidth_reference_gbps"
  elseif type(ctx.baseline) == "table" and big then
    for _, r in ipairs(ctx.baseline.results or {}) do
      if r.op == "allreduce" and r.bytes == big.bytes and r.placement == "out-of-place" then
        -- at the p50 time, like the regression rule: means are at the mercy of one bad iteration
        local bw = (r.p50_us and r.p50_us > 0 and r.time_us) and r.busbw * r.time_us / r.p50_us or r.busbw
        reference, source = bw, "baseline " .. tostring((ctx.baseline.run or {}).start) .. " (busbw at its p50 time)"
      end
    end
  end
  if not reference and host_count == 1 then
    reference = ctx.comm:broadcast_value(cs.copy_bandwidth(), 0)
    source = "host memory-copy bandwidth (the ceiling of shared-memory transport)"
  end
  local single = host_count == 1
  local lat_target = cfg.latency_target_us or (single and 10 or 100)
  local p2p_target = cfg.p2p_latency_target_us or (single and 2 or 50)
  local lat_values, rank_bw = {}, {}
  if matrix then
    for a = 1, ctx.size do
      local row = {}
      for b = 1, ctx.size do
        if matrix.lat[a][b] then lat_values[#lat_values + 1] = matrix.lat[a][b] end
        if matrix.bw[a][b] then row[#row + 1] = matrix.bw[a][b] end
      end
      rank_bw[a] = median(row)
    end
  end
  local worst, med_bw, worst_is = nil, median(rank_bw), nil
  for a, v in ipairs(rank_bw) do
    if not worst or v < worst then worst, worst_is = v, "rank " .. (a - 1) end
  end
  local spread
  if big then
    local s = cs.stats.summary(big.rank_mean_us)
    spread = s.cv
  end
  local card = cs.scorecard.compute({
    bandwidth = big and reference and { busbw = big.busbw, reference = reference, source = source, op = "allreduce", bytes = big.bytes },
    latency = small and { collective_us = small.p50_us, collective_target_us = lat_target,
                          p2p_us = median(lat_values), p2p_target_us = #lat_values > 0 and p2p_target or nil,
                          source = cfg.latency_target_us and "config" or (single and "default for one host (shared memory)" or "default for several hosts") },
    balance = worst and { worst = worst, median = med_bw, worst_is = worst_is, spread = spread,
                          what = "median bandwidth of each rank's pairs (GB/s)" },
    stability = { cv = median(cvs), operations = results_n, wrong = wrong_results, errors = 0, timeouts = 0 },
  }, cfg)
  ctx.report:set("scorecard", card)

  -- 7. rules
  add(cs.rules.evaluate({ size = ctx.size, rank_hosts = hosts, oversubscribed = oversubscribed,
                          sweep = sweep, stragglers = stragglers,
                          localisation = loc, scorecard = card, baseline = ctx.baseline,
                          thresholds = ctx.config.thresholds or {} }, rules))

  -- summary
  ctx.log("#\n# findings")
  if #all_findings == 0 then ctx.log("  none: healthy") end
  for _, f in ipairs(all_findings) do
    ctx.log("  [%s] %s", f.severity, f.message)
    if f.remedy and f.remedy ~= "" then ctx.log("         -> %s", f.remedy) end
  end
  ctx.log("#\n# %s", cs.scorecard.render(card))
  ctx.log("# full_diag finished in %.1f s", cs.now() - t0)
end

return recipe
