-- The main job: is the fabric healthy, and if not, which rank, host, link or setting is to
-- blame, with the evidence and what to do (docs/full_diag-and-scorecard.md). The flow:
--   topology -> environment -> cpu -> bandwidth sweep -> pattern -> localisation -> scorecard
-- The helpers are stdlib functions (docs/stdlib.md): cs.diagnose.straggler_vote,
-- cs.scorecard.inputs, cs.rules.from_config, cs.findings, cs.p2p (plans, matrix, localise),
-- cs.stages (what each stage cost: report key "cost", docs/scale-cost.md).
-- Scale: per-rank data (topology, environment, pair measurements) is gathered to rank 0, which
-- analyses; what every rank needs (the pattern plan, the re-tests, the verdict, the scorecard)
-- is broadcast. Pairs measure on the world, no communicator is made per round.
-- Budget: a probe round estimates the pattern's cost; the sweep ends early enough for it (at
-- most SHARE.pattern_max of the budget is kept for it), the pattern by SHARE.pattern;
-- localisation's host-level re-tests always run, the rest while the budget lasts.
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

local topo_gpu = require "cs.topo.gpu"
local gpu = require "cs.gpu"

local recipe = cs.recipe {
  name = "full_diag",
  version = "1.7.4",
  requires = ">=0.1, <1.0",
  summary = "topology, environment, bandwidth, rank x rank pattern, localisation and a scorecard",
  options = {
    tier = { default = "quick", help = "how thorough (time budget: quick ~1 min, standard ~10, long ~60)",
             choices = { "quick", "standard", "long" } },
    max = { default = "0", help = "largest sweep size (0: the tier's)", type = "size" },
    dtype = { default = "float32", help = "element type of the sweep", choices = cs.dtypes },
    budget = { default = 0, type = "number", min = 0, help = "time budget in seconds (0: the tier's)" },
    watch = { default = 8, type = "number", min = 0,
              help = "seconds of the watch after localisation: every host alone, in turn (3+ hosts, up to 64 ranks; 0: none)" },
    copy_bytes = { default = "32M", type = "size",
                   help = "bytes per host<->GPU and GPU<->GPU copy of the link check (--backend nccl)" },
  },
}

-- The rank x rank matrix (cs.p2p.matrix): messages in flight per pair (window), latency round
-- trips per pair. What decides "slow" is sustained (docs/scale.md, "The statistic that
-- decides"): each pair streams both ways, SUSTAINED.drain bytes untimed first (a shaper's token
-- bucket up to that size is emptied: a bucket that holds a message or a few hid a 30x slow host
-- from the best single exchange), then SUSTAINED.timed bytes timed. Localisation's pair value is
-- the slower direction's time per message; its re-tests stream the same way, in the direction
-- the matrix found slower (half the bytes of both).
local MATRIX = { window = 4, repeats = 1, repeats_one_host = 3, lat_iters = 50 }
-- A full pattern shorter than PASSES.span_s runs again (at most PASSES.max passes in all, within
-- the pattern's share of the budget), so that it spans a few seconds: a link that flaps every 2 s
-- was off for the whole 2 s pattern of 4 hosts and nothing saw it. Each pair direction's rate is
-- the median over the passes; cs.evidence counts slow directions over all of them. The cap is
-- the span's, not the passes': at 4 passes, 4 hosts' passes of 0.5 s spanned 2 s, inside one
-- phase of a link flapping every 2-3 s (4 of 4 such runs named nobody). 10 s: two periods of a
-- link on and off for 2.5 s each; at 6 s one on phase of 2.4 s slowed 3 directions of 18, under
-- cs.evidence's SPIKE.min. 16 s since 1.5.6: two periods of the slowest flap the harness plants
-- (on 4 s, off 4 s); at 10 s a flap receiving at 55 Mbit (seed 58, 4 x 1) spent 46-51 % of its
-- time in slow directions over 10-12 passes (4 runs), near the 45 % that names it: missed once.
-- At most budget_share of the budget either: a budget of 20 s (e2e_truth_netns) spent 16 s on
-- passes, the re-tests were cut, and a rank starved by a 5 % quota went unnamed under load.
local PASSES = { span_s = 16, max = 16, budget_share = 0.4 }
local SUSTAINED = { drain = 4194304, timed = 1048576 }
-- The detour probe's seconds per sample (cs.detour: SAMPLES of them, every rank at once): at
-- least two periods of a CFS quota (100 ms by default), so that a throttled rank's share is seen
-- whole (0.1 s samples left a 9 % quota 1.4x under the fleet in some samples).
local DETOUR_SECONDS = { quick = 0.25, standard = 0.3, long = 0.5 }
-- Straggler votes are taken over the all-reduces up to this size (arrival dominates there).
local STRAGGLER_MAX_BYTES = 65536
-- The budget's shares (rank 0's clock): the pattern ends by SHARE.pattern of it, leaving the
-- rest to localisation (its re-tests are repeated measurements: a statistical verdict); the
-- sweep ends where the pattern's estimated time (its first round, measured before the sweep,
-- x PROBE_FACTOR per round, x the full plan's other rounds), at most SHARE.pattern_max of the
-- budget, would still fit, and on several hosts never later than SHARE.sweep_max of the budget:
-- a cheap pattern leaves the sweep most of it, a slow fabric caps the sweep so that the pattern
-- and localisation run, but the sweep gets SHARE.sweep_min of the budget after the probe
-- whatever the pattern would take (it adapts its plan to what is left). (The probe was a
-- pair_bench round x 3: a pattern round took 3-6x that on namespace hosts, 9-35x at 16 ranks, so
-- the sweep took the pattern's time.)
local SHARE = { pattern = 0.7, pattern_max = 0.55, sweep_min = 0.2, sweep_max = { quick = 0.5, standard = 0.6, long = 0.7 } }
local PROBE_FACTOR = 1.25
-- When the rest of the sweep would not fit its share, a collective's sweep stops early once its
-- last sizes are bandwidth-bound (cs.sweep.bandwidth_bound): larger sizes would only repeat that
-- bandwidth, and the time is the pattern's and localisation's.

-- The bandwidth sweep: every op at every size until the sweep's share of the budget is spent
-- (rank 0's clock decides, so every rank skips the same sizes; a size whose bench would not end
-- before the deadline, judged by the size before it, is not started), each op stopping early
-- once bandwidth-bound. Returns per-op results, the stragglers voted over the small
-- all-reduces, and the counts the scorecard's stability part needs.
local function bandwidth_sweep(ctx, tier, elapsed, found, st)
  local sizes = cs.sweep.sizes { min = tier.min, max = ctx.opt.max > 0 and ctx.opt.max or tier.max, factor = tier.factor }
  local m = { sweep = {}, cvs = {}, operations = 0, wrong = 0 }
  local vote = cs.diagnose.straggler_vote { op = "allreduce" }
  local deadline = tier.sweep_deadline
  local stopped = {}
  for oi, op in ipairs(tier.ops) do
    m.sweep[op] = {}
    ctx.log("#\n# %s", op)
    ctx.log(cs.bwtable.header())
    local last_s, op_s = 0, 0
    for i, bytes in ipairs(sizes) do
      local d = false
      if ctx.rank == 0 then
        -- What the rest would take: this op's remaining sizes at twice the time per doubling
        -- (bandwidth-bound), the ops after it as long as this one so far.
        local k = #sizes - i + 1
        local rest = last_s * (2 ^ (k + 1) - 2) + (op_s + last_s * (2 ^ (k + 1) - 2)) * (#tier.ops - oi)
        d = { cut = elapsed() + 2 * last_s > deadline,
              bound = elapsed() + rest > deadline and cs.sweep.bandwidth_bound(m.sweep[op]) }
      end
      d = ctx.comm:broadcast_value(d, 0)
      if d.cut then
        found:add { { severity = "info", subject = { stage = "bandwidth sweep" },
                      message = ("sweep cut short at %s of %s: its share of the %s tier's %g s budget (until %.3g s) is spent"):format(
                        cs.format_size(bytes), op, ctx.opt.tier, tier.budget, deadline),
                      evidence = { budget_s = tier.budget, sweep_budget_s = deadline, elapsed_s = elapsed() },
                      remedy = "use a longer --tier" } }
        st:info("cut", { op = op, bytes = bytes })
        st:info("stopped_early", stopped)
        return m, vote:result()
      end
      if d.bound then
        stopped[op] = bytes
        ctx.log("# %s: bandwidth-bound and consistent below %s, larger sizes skipped", op, cs.format_size(bytes))
        break
      end
      if cs.count_for_bytes(op, bytes, ctx.opt.dtype, ctx.size) > 0 then
        local t = cs.now()
        local r = ctx.comm:bench { op = op, bytes = bytes, dtype = ctx.opt.dtype, iters = tier.iters, warmup = tier.warmup }
        last_s = cs.now() - t
        op_s = op_s + last_s
        st:count("collectives", 1)
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
  st:info("stopped_early", stopped)
  return m, vote:result()
end

-- The rank x rank matrix (its plan fitted to what is left of the pattern's share), then
-- localisation from its pair times (suspects re-tested alone; the host-level re-tests always).
local function matrix_args(tier, st, nhosts)
  local per_iter = tier.pair_bytes * MATRIX.window
  -- one host: no shaper between its ranks, but ranks sharing CPUs make one stream's time vary
  -- 30x (4 ranks on 2 CPUs, shared memory): the best of MATRIX.repeats_one_host
  local repeats = nhosts == 1 and MATRIX.repeats_one_host or MATRIX.repeats
  return { bytes = tier.pair_bytes, window = MATRIX.window, repeats = repeats, lat_iters = MATRIX.lat_iters, stages = st,
           warmup = math.ceil(SUSTAINED.drain / per_iter), iters = math.ceil(SUSTAINED.timed / per_iter) }
end

-- the full pattern again while it spans under PASSES.span_s (and budget_share of the budget)
-- and another pass fits the pattern's share (rank 0 decides), each pass's rounds in another
-- order (cs.pairs.reordered), merged (cs.p2p.merge_passes)
local function more_passes(ctx, tier, margs, first, t0)
  if ctx.nhosts < 3 then return first end  -- one or two hosts: nothing to tell a flapping host by
  local list, began = { first }, cs.now()
  local span = first.plan.round_s and first.plan.round_s * first.plan.rounds_run or 0
  while true do
    local again = false
    if ctx.rank == 0 and first.plan.kind == "full" and not first.plan.cut and #list < PASSES.max then
      local per = span / #list
      again = span < math.min(PASSES.span_s, PASSES.budget_share * tier.budget) and per > 0
        and cs.now() + per < t0 + SHARE.pattern * tier.budget
    end
    if not ctx.comm:broadcast_value(again, 0) then break end
    local m = cs.p2p.matrix(ctx, { bytes = margs.bytes, window = margs.window, repeats = margs.repeats, lat_iters = margs.lat_iters,
                                   warmup = margs.warmup, iters = margs.iters,
                                   plan = cs.pairs.reordered(cs.p2p.full_plan(ctx.size), #list + 1) })
    list[#list + 1], span = m, span + (cs.now() - began)
    began = cs.now()
  end
  if ctx.rank ~= 0 then return first end
  local merged = cs.p2p.merge_passes(list, tier.pair_bytes)
  merged.plan.passes = #list
  return merged
end

local function pattern_and_localisation(ctx, tier, elapsed, t0, st, stragglers)
  st:begin("pattern")
  local left = SHARE.pattern * tier.budget - elapsed()
  local margs = matrix_args(tier, st, ctx.nhosts)
  margs.budget_s, margs.deadline, margs.first = math.max(left, 0), t0 + SHARE.pattern * tier.budget, tier.first_round
  if left <= 0 then
    -- nothing left of the pattern's share: the host-level plan still runs (a slow host is named)
    margs.plan, margs.light = cs.p2p.host_plan(ctx.hosts), true
  end
  local matrix = more_passes(ctx, tier, margs, cs.p2p.matrix(ctx, margs), t0)
  if left <= 0 then
    matrix.plan.kind, matrix.plan.light = "hosts", true
    matrix.plan.reason = "the pattern's share of the budget was spent before it began"
  end
  st:info("plan", matrix.plan)
  ctx.log("pattern: %s plan, %d of %s (every pair: %d)%s", matrix.plan.kind, matrix.plan.rounds_run,
    cs.text.plural(matrix.plan.rounds_planned, "round"), matrix.plan.rounds_full,
    matrix.plan.kind == "full" and "" or (": " .. tostring(matrix.plan.reason)))
  if ctx.rank == 0 then
    local rep = cs.p2p.matrix_report(matrix, tier.pair_bytes)
    rep.plan = matrix.plan
    ctx.report:set("matrix", rep)
    -- one result per pair, unless the matrix section is sparse: its pairs then hold the same
    -- values (the pair value is the slower direction's), and 2 M results at 16 384 ranks were
    -- 280 MB of report.json (docs/scale.md)
    for _, p in ipairs(cs.p2p.sparse(matrix) and {} or matrix.pairs) do
      ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2], hosts = { ctx.hosts[p[1] + 1], ctx.hosts[p[2] + 1] },
                          bytes = tier.pair_bytes, min_us = p[3] }
    end
  end
  st:begin("localisation")
  local loc = { hosts = {}, ranks = {}, links = {} }
  -- the matrix's own evidence (rank 0's): rows or columns far off, the ranks the sweep waited
  -- for and the worst rank are re-tested whatever the screen says, and never end in silence
  -- the rounds' clocks up to the size whose passes the report keeps (per host and round: O(h n) at most)
  local clocks = ctx.size <= cs.p2p.PASSES_MAX_RANKS and matrix.clocks or nil
  local ev = ctx.rank == 0 and cs.evidence.off(matrix.bw, ctx.hosts, nil, matrix.passes, clocks) or nil
  if ctx.size >= 4 or ctx.nhosts >= 3 then
    local la = matrix_args(tier, st, ctx.nhosts)
    la.stream, la.deadline, la.force = true, t0 + tier.budget, ev and cs.evidence.force(ev, stragglers)
    la.bw = ctx.rank == 0 and matrix.bw or nil  -- re-tests stream the way the matrix found slower,
    la.ways = ev and cs.evidence.ways(ev, ctx.hosts)  -- or the way the evidence found an end slow
    local clock
    loc, clock = cs.p2p.localise(ctx, matrix.pairs, ctx.hosts, la)
    st:info("retests", loc.retests)
    if ctx.rank == 0 then  -- the verdict's measurements: what noise it decided under, and when
      ctx.report:set("localisation", { references = loc.references, suspects = loc.suspects, retests = loc.retests,
                                       under_measured = loc.under_measured, undecided = loc.undecided, tested = loc.tested,
                                       noisy = loc.noisy or false, forced = la.force,
                                       spikes = ev and ev.spikes, clock = cs.p2p.retests_report(clock, ctx.size) })
    end
  end
  if ev then
    cs.evidence.annotate(loc, ev, ctx.hosts)
    loc.unconfirmed = cs.evidence.unconfirmed(ev, loc, ctx.hosts, tier.pair_bytes)
    loc.pattern_spikes = ev.spikes  -- the watch's second source (cs.evidence.watch: its warning says when they agree)
  end
  return matrix, loc
end

-- The watch (cs.watch, cs.evidence.watch): every host's samples alone, in turn, for --watch
-- seconds after localisation, whatever is left of the budget (as the host re-tests' first
-- rounds: in the twenty-third stop's 105 namespace runs, 54 had under 4 s of it left then, 26 of
-- the 30 on 8 x 2 ranks, where the pattern hides a flap most); none with under 3 hosts or over
-- WATCH.max_ranks ranks. Its warning joins loc.unconfirmed (rank 0).
local function watch_stage(ctx, tier, st, loc)
  local W, secs = cs.evidence.WATCH, ctx.opt.watch
  local skipped = secs <= 0 and "--watch 0" or ctx.nhosts < 3 and "under 3 hosts"
    or ctx.size > W.max_ranks and ("over %d ranks (the pattern's passes decide)"):format(W.max_ranks)
  if skipped then
    if ctx.rank == 0 then ctx.report:set("watch", { skipped = skipped }) end
    return
  end
  st:begin("watch")
  local m = matrix_args(tier, st, ctx.nhosts)
  local function keep(samples, cycles) ctx.report:set("watch", cs.watch.report(samples, cycles, secs, ctx.size)) end
  local samples, cycles = cs.watch.run(ctx, { bytes = m.bytes, window = m.window, iters = m.iters, warmup = m.warmup,
                                              seconds = secs, each = keep })
  ctx.log("watch: %d cycles of every host alone in %.0f s", cycles, secs)
  if ctx.rank == 0 then
    keep(samples, cycles)
    loc.unconfirmed = loc.unconfirmed or {}
    for _, f in ipairs(cs.evidence.watch.judge(samples, ctx.hosts, loc)) do loc.unconfirmed[#loc.unconfirmed + 1] = f end
  end
end

-- The GPU links of every host (docs/full_diag-and-scorecard.md, "GPU nodes"): NVLinks down, GPUs
-- and NICs on another NUMA node than the ranks that use them (from the topology), and on a GPU
-- job the copies of gpu_copy_bw's method, measured by the lowest rank of each host one GPU at a
-- time (host<->GPU pinned against each GPU's PCIe link, GPU->GPU against NVLink). Returns the
-- copies by host to judge the links by (rank 0; nil elsewhere, and on the GPU stand-in, whose
-- copies run at the host's memcpy speed: they are measured and reported, not judged). Collective.
local COPY = { loops = 4, samples = 3 }
local FAKE_COPY_BYTES = 262144
local function link_checks(ctx, topology, found)
  local copies
  local nccl = ((ctx.report:get("commscript") or {}).backends or {}).nccl or {}
  if ctx.backend == "nccl" then
    local first = true
    for r = 1, ctx.rank do
      if ctx.hosts[r] == ctx.host then first = false end
    end
    local mine = false
    if first and gpu.device_count() > 0 then
      local local_size = 0
      for _, h in ipairs(ctx.hosts) do if h == ctx.host then local_size = local_size + 1 end end
      -- small copies on the stand-in (tests/fake_gpu): an 8-GPU host moves 128 kinds of copy x 13
      local bytes = nccl.fake and math.min(ctx.opt.copy_bytes, FAKE_COPY_BYTES) or ctx.opt.copy_bytes
      mine = gpu.copy_bandwidth { bytes = bytes, loops = COPY.loops, samples = COPY.samples, peer = local_size >= 2 }
    end
    local all = ctx.comm:gather_value(mine, 0)
    if ctx.rank == 0 then
      copies = {}
      for _, c in ipairs(all) do if c then copies[c.host] = c end end
    end
  end
  if ctx.rank == 0 then
    found:add(topo_gpu.check_links(topology, { gpus_used = ctx.backend == "nccl" }))
    if copies then
      local hosts = {}
      for _, c in pairs(copies) do hosts[#hosts + 1] = c end
      ctx.report:set("gpu_links", { copies = hosts, expect = topo_gpu.EXPECT, judged = not nccl.fake })
      if nccl.fake then
        ctx.log("links: GPU stand-in: its copies run at the host's memcpy speed; measured, not judged against the links")
        copies = nil
      else
        found:add(topo_gpu.check_copies(topology, copies))
        for _, l in ipairs(topo_gpu.copy_lines(topology, copies)) do ctx.log("links: %s", l) end
      end
    end
  end
  return copies
end

-- the tier's settings, with --budget (when given) for its budget
local function tier_of(ctx)
  local tier = TIERS[ctx.opt.tier]
  if ctx.opt.budget > 0 then
    local t = {}
    for k, v in pairs(tier) do t[k] = v end
    t.budget = ctx.opt.budget
    tier = t
  end
  return tier
end

-- 3. a probe: the pattern's first round, measured as the pattern measures it (and kept: the
-- pattern does not measure it again), says what the pattern's other rounds will cost, hence how
-- much of the budget the sweep may take. Returns tier with sweep_deadline (seconds from the
-- start) and first_round. Collective.
local function probe(ctx, tier, elapsed, st)
  local first, probe_s = nil, 0
  if ctx.size >= 2 then
    first = cs.p2p.first_round(ctx, matrix_args(tier, nil, ctx.nhosts))
    probe_s = first.round_s
  end
  local rounds = ctx.size >= 2 and cs.pairs.rounds_of(ctx.size) - 1 or 0
  local reserve = math.min(probe_s * PROBE_FACTOR * rounds, SHARE.pattern_max * tier.budget)
    + (1 - SHARE.pattern) * tier.budget
  -- the cap where hosts are to be told apart (one host: the probe prices the pattern well)
  local sweep_deadline = math.min(math.max(tier.budget - reserve - elapsed(), SHARE.sweep_min * tier.budget) + elapsed(),
    ctx.nhosts > 1 and SHARE.sweep_max[ctx.opt.tier] * tier.budget or math.huge)
  tier = setmetatable({ sweep_deadline = sweep_deadline, first_round = first }, { __index = tier })
  st:info("probe_s", probe_s)
  st:info("sweep_deadline_s", tier.sweep_deadline)
  return tier
end

-- the GPU path's reference, rank 0's (it holds the topology and the copies), on every rank
-- (report.json gpu_links.reference). The stand-in (tests/fake_gpu) moves data at the host's
-- memcpy speed: its busbw says nothing of a GPU path, so the part is left out there, saying so.
-- Collective.
local function gpu_path_reference(ctx, topology, copies)
  local ref = false
  if ctx.rank == 0 then
    local r, why = topo_gpu.reference(topology, copies)
    ref = r or { why = why }
    local links = ctx.report:get("gpu_links") or {}
    links.reference = ref
    ctx.report:set("gpu_links", links)
    local nccl = ((ctx.report:get("commscript") or {}).backends or {}).nccl or {}
    if nccl.fake then
      ref = { why = "GPU stand-in (tests/fake_gpu): its busbw is the host's memcpy speed, not the GPU path's ("
        .. (r and r.source or tostring(why)) .. ")" }
    end
  end
  return ctx.comm:broadcast_value(ref, 0)
end

-- what each stage cost: report key "cost" and a log line (rank 0)
local function report_cost(ctx, st)
  local cost = st:finish()
  if ctx.rank == 0 then
    ctx.report:set("cost", cost)
    local parts = {}
    for _, s in ipairs(cost.stages) do parts[#parts + 1] = ("%s %.2f"):format(s.name, s.seconds) end
    ctx.log("# stages (s): %s", table.concat(parts, ", "))
  end
end

function recipe.run(ctx)
  local tier = tier_of(ctx)
  local t0 = cs.now()
  local function elapsed() return cs.now() - t0 end
  local st = cs.stages.new(ctx)
  local function stage(name)
    ctx.log("== %s (%.1f s)", name, elapsed())
    st:begin(name)
  end
  local found = cs.findings.collector(ctx)
  -- Configuration is checked before measuring: a bad [scorecard] or rule file is bad input (exit 1).
  cs.scorecard.check_config(ctx.config.scorecard)
  local rules = cs.rules.from_config(ctx.config)
  ctx.log("# commscript full_diag %s: tier %s, %s on %s, backend %s", recipe.version, ctx.opt.tier,
    cs.text.plural(ctx.size, "rank"), cs.text.plural(ctx.nhosts, "host"), ctx.backend)

  -- 1. topology, gathered to rank 0, which checks it (differences in the environment are the
  -- next stage's). Findings are rank 0's: the job's exit code is the worst rank's.
  stage("topology")
  local topology = cs.topo.collect(ctx, { root = 0 })
  if ctx.rank == 0 then
    ctx.report:set("topology", topology)
    found:add(cs.topo.check(topology, { env_prefixes = {} }))
    ctx.log("%s", cs.topo.render(topology))
  end

  -- 1b. the GPU links (a GPU host's PCIe links are checked with the topology)
  stage("links")
  local copies = link_checks(ctx, topology, found)

  -- 2. environment: every rank audits its own, rank 0 merges (the same finding on several
  -- ranks becomes one)
  stage("environment")
  local e = cs.env.collect(ctx, { nics = topology and (topology.hosts[ctx.host] or {}).nics, root = 0 })
  found:add(e.findings)
  ctx.log("environment: %s audited on rank 0, %s", cs.text.plural(e.audited or 0, "variable"),
    cs.text.plural(#e.findings, "finding"))

  -- 2b. CPU: does every rank run when it asks to (cs.detour: a rank starved by a CPU quota or
  -- stopped from outside slows every collective for everyone alike, so the sweep cannot tell)
  stage("cpu")
  local shares, gaps, long = cs.detour.measure(ctx, { seconds = DETOUR_SECONDS[ctx.opt.tier] })
  local starved
  if ctx.rank == 0 then
    starved = cs.detour.judge(shares, ctx.hosts, { gaps = gaps, stops = long, seconds = DETOUR_SECONDS[ctx.opt.tier] })
    ctx.report:set("cpu", { shares = shares, gaps = gaps, long = long, starved = starved, seconds = DETOUR_SECONDS[ctx.opt.tier] })
    found:add(cs.detour.findings(starved))
    ctx.log("cpu: %s starved of CPU", cs.text.plural(#starved, "rank"))
  end

  -- 3. a probe: the pattern's first round says what the pattern will cost, hence how much of
  -- the budget the sweep may take
  stage("probe")
  tier = probe(ctx, tier, elapsed, st)

  -- 4. bandwidth sweep
  stage("bandwidth sweep")
  local measured, stragglers = bandwidth_sweep(ctx, tier, elapsed, found, st)

  -- 5. pattern and 6. localisation: they always run (their plans shrink to what is left)
  local loc = { hosts = {}, ranks = {}, links = {} }
  if ctx.size >= 2 then
    ctx.log("== pattern and localisation (%.1f s)", elapsed())
    local matrix
    matrix, loc = pattern_and_localisation(ctx, tier, elapsed, t0, st, stragglers)
    watch_stage(ctx, tier, st, loc)
    if ctx.rank == 0 then measured.matrix = matrix end
  end

  -- 7. scorecard: rank 0's (it holds the matrix), broadcast so every rank's --fail-below agrees
  stage("scorecard")
  if ctx.backend == "nccl" then measured.gpu_path = gpu_path_reference(ctx, topology, copies) end
  local inputs = cs.scorecard.inputs(ctx, measured)  -- collective (a broadcast of the memcpy reference)
  local card = false
  if ctx.rank == 0 then card = cs.scorecard.compute(inputs, ctx.config.scorecard or {}) end
  card = ctx.comm:broadcast_value(card, 0)
  ctx.report:set("scorecard", card)

  -- 8. rules, on rank 0 (the topology is there)
  stage("rules")
  if ctx.rank == 0 then
    found:add(cs.detour.explain(loc, starved, ctx.hosts))  -- a starved rank's pairs are not a link's fault
    found:add(cs.diagnose.findings(loc))  -- what localisation could not say: too noisy, under-measured, undecided
    -- what the matrix showed and the re-tests did not confirm (info on a host with more ranks than CPUs)
    found:add(cs.evidence.shared_cpus(loc.unconfirmed, cs.topo.oversubscribed(topology)))
    found:add(cs.rules.evaluate({ size = ctx.size, rank_hosts = ctx.hosts, oversubscribed = cs.topo.oversubscribed(topology),
                                  sweep = measured.sweep, stragglers = stragglers, localisation = loc, scorecard = card,
                                  baseline = ctx.baseline, thresholds = ctx.config.thresholds or {} }, rules))
    if measured.gpu_path then found:add(topo_gpu.check_utilisation(card)) end
  end

  cs.findings.print(ctx, found.list, { heading = "#\n# findings", empty = "none: healthy" })
  ctx.log("#\n# %s", cs.scorecard.render(card))
  report_cost(ctx, st)
  ctx.log("# full_diag finished in %.1f s", elapsed())
end

return recipe
