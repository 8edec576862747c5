-- The main job: is the fabric healthy, and if not, which rank, host, link or setting is to
-- blame, with the evidence and what to do (docs/full_diag-and-scorecard.md). The flow:
--   topology -> environment -> bandwidth sweep -> pattern -> localisation -> scorecard
-- The helpers are stdlib functions (docs/stdlib.md): cs.diagnose.straggler_vote,
-- cs.scorecard.inputs, cs.rules.from_config, cs.findings.
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
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "topology, environment, bandwidth, rank x rank pattern, localisation and a scorecard",
  options = {
    tier = { default = "quick", help = "how thorough (time budget: quick ~1 min, standard ~10, long ~60)",
             choices = { "quick", "standard", "long" } },
    max = { default = "0", help = "largest sweep size (0: the tier's)", type = "size" },
    dtype = { default = "float32", help = "element type of the sweep", choices = cs.dtypes },
  },
}

-- The rank x rank matrix and the localisation re-tests (cs.p2p): messages in flight per pair,
-- timed exchanges per pair, latency round trips per pair, localisation iterations.
local MATRIX = { window = 4, iters = 3, repeats = 1, lat_iters = 50 }
local LOCALISE_ITERS = 10
-- Straggler votes are taken over the all-reduces up to this size (arrival dominates there).
local STRAGGLER_MAX_BYTES = 65536

-- The bandwidth sweep: every op at every size while the tier's budget lasts (rank 0's clock
-- decides, so every rank skips the same sizes). Returns per-op results, the stragglers voted
-- over the small all-reduces, and the counts the scorecard's stability part needs.
local function bandwidth_sweep(ctx, tier, elapsed, found)
  local sizes = cs.sweep.sizes { min = tier.min, max = ctx.opt.max > 0 and ctx.opt.max or tier.max, factor = tier.factor }
  local m = { sweep = {}, cvs = {}, operations = 0, wrong = 0 }
  local vote = cs.diagnose.straggler_vote { op = "allreduce" }
  for _, op in ipairs(tier.ops) do
    m.sweep[op] = {}
    ctx.log("#\n# %s", op)
    ctx.log(cs.bwtable.header())
    for _, bytes in ipairs(sizes) do
      if ctx.comm:broadcast_value(elapsed() > tier.budget, 0) then
        found:add { { severity = "info", subject = { stage = "bandwidth sweep" },
                      message = ("sweep cut short at %s of %s: the %s tier's %d s budget is spent"):format(
                        cs.format_size(bytes), op, ctx.opt.tier, tier.budget),
                      evidence = { budget_s = tier.budget, elapsed_s = elapsed() }, remedy = "use a longer --tier" } }
        return m, vote:result()
      end
      if cs.count_for_bytes(op, bytes, ctx.opt.dtype, ctx.size) > 0 then
        local r = ctx.comm:bench { op = op, bytes = bytes, dtype = ctx.opt.dtype, iters = tier.iters, warmup = tier.warmup }
        r.placement, r.kind = "out-of-place", "sweep"
        ctx.report:result(r)
        ctx.log(cs.bwtable.row(r, nil))
        table.insert(m.sweep[op], r)
        table.insert(m.cvs, r.cv)
        m.operations = m.operations + 1
        if (r.wrong or 0) > 0 then m.wrong = m.wrong + 1 end
        -- Arrival: a rank that is late waits the least.
        if op == "allreduce" and bytes <= STRAGGLER_MAX_BYTES then vote:add(r.rank_mean_us) end
      end
    end
  end
  return m, vote:result()
end

-- The rank x rank matrix, then localisation from exchange times (suspects re-tested alone).
local function pattern_and_localisation(ctx, tier, stage)
  stage("pattern (rank x rank)")
  local matrix = cs.p2p.matrix(ctx, { bytes = tier.pair_bytes, window = MATRIX.window, iters = MATRIX.iters,
                                      repeats = MATRIX.repeats, lat_iters = MATRIX.lat_iters })
  ctx.report:set("matrix", cs.p2p.matrix_report(matrix, tier.pair_bytes))
  stage("localisation")
  local args = { op = "sendrecv", bytes = tier.pair_bytes, iters = LOCALISE_ITERS, repeats = tier.repeats }
  local pairs_t = cs.p2p.round_robin(ctx, args)
  for _, p in ipairs(pairs_t) do
    ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2], hosts = { ctx.hosts[p[1] + 1], ctx.hosts[p[2] + 1] },
                        bytes = tier.pair_bytes, min_us = p[3] }
  end
  local loc = { hosts = {}, ranks = {}, links = {} }
  if ctx.size >= 4 or ctx.nhosts >= 3 then loc = cs.p2p.localise(ctx, pairs_t, ctx.hosts, args) end
  return matrix, loc
end

function recipe.run(ctx)
  local tier = TIERS[ctx.opt.tier]
  local t0 = cs.now()
  local function elapsed() return cs.now() - t0 end
  local function stage(name) ctx.log("== %s (%.1f s)", name, elapsed()) end
  local found = cs.findings.collector(ctx)
  -- Configuration is checked before measuring: a bad [scorecard] or rule file is bad input (exit 1).
  cs.scorecard.check_config(ctx.config.scorecard)
  local rules = cs.rules.from_config(ctx.config)
  ctx.log("# commscript full_diag %s: tier %s, %d ranks on %d host(s), backend %s", recipe.version, ctx.opt.tier,
    ctx.size, ctx.nhosts, ctx.backend)

  -- 1. topology (differences in the environment are the next stage's)
  stage("topology")
  local topology = cs.topo.collect(ctx)
  ctx.report:set("topology", topology)
  found:add(cs.topo.check(topology, { env_prefixes = {} }))
  ctx.log("%s", cs.topo.render(topology))

  -- 2. environment: every rank audits its own; the same finding on several ranks becomes one
  stage("environment")
  local e = cs.env.collect(ctx, { nics = (topology.hosts[ctx.host] or {}).nics })
  found:add(e.findings)
  ctx.log("environment: %d variable(s) audited on rank 0, %d finding(s)", e.audited or 0, #e.findings)

  -- 3. bandwidth sweep
  stage("bandwidth sweep")
  local measured, stragglers = bandwidth_sweep(ctx, tier, elapsed, found)

  -- 4. pattern and 5. localisation, while the budget lasts (rank 0's clock decides for every rank)
  local loc = { hosts = {}, ranks = {}, links = {} }
  local in_budget = ctx.comm:broadcast_value(elapsed() <= tier.budget, 0)
  if ctx.size >= 2 and in_budget then
    measured.matrix, loc = pattern_and_localisation(ctx, tier, stage)
  elseif ctx.size >= 2 then
    found:add { { severity = "info", subject = { stage = "pattern" },
                  message = "pattern and localisation skipped: the time budget is spent",
                  evidence = { budget_s = tier.budget, elapsed_s = elapsed() }, remedy = "use a longer --tier" } }
  end

  -- 6. scorecard
  stage("scorecard")
  local card = cs.scorecard.compute(cs.scorecard.inputs(ctx, measured), ctx.config.scorecard or {})
  ctx.report:set("scorecard", card)

  -- 7. rules
  found:add(cs.rules.evaluate({ size = ctx.size, rank_hosts = ctx.hosts, oversubscribed = cs.topo.oversubscribed(topology),
                                sweep = measured.sweep, stragglers = stragglers, localisation = loc, scorecard = card,
                                baseline = ctx.baseline, thresholds = ctx.config.thresholds or {} }, rules))

  cs.findings.print(ctx, found.list, { heading = "#\n# findings", empty = "none: healthy" })
  ctx.log("#\n# %s", cs.scorecard.render(card))
  ctx.log("# full_diag finished in %.1f s", elapsed())
end

return recipe
