-- The analysis stages of full_diag at scale, on a synthetic result set (scripts/scale_model.sh
-- runs it; docs/scale.md). Runs on the self backend (one process): it makes up what
-- full_diag's measuring stages would have gathered on rank 0 for `ranks` ranks on `hosts`
-- hosts, with one slow host, one slow rank and one slow link planted (--plant all; or one of
-- them at a seeded place, or none), every sample noisy (--cv, --spikes, --spike), then runs the
-- same stdlib analysis full_diag runs (straggler votes, cs.diagnose.localise: the localisation
-- cs.p2p.localise runs, its re-test rounds answered by the model with fresh noisy samples,
-- scorecard, rules) and writes the same report sections, so that the engine writes report.json
-- and report.html at the end as after a real run.
-- The last line it logs is "SCALE {json}": per-stage seconds, the planted and the named.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "scale_model",
  version = "1.0.1",
  summary = "full_diag's analysis on a synthetic result set of many ranks (one slow host, rank and link planted)",
  options = {
    ranks = { default = 1024, help = "ranks of the synthetic job", min = 16, max = 65536 },
    hosts = { default = 128, help = "hosts (ranks are spread evenly, contiguous per host)", min = 4, max = 65536 },
    plan = { default = "auto", help = "pattern plan: full (every pair), sampled (intra-host pairs and every host pair once), auto (full up to 1024 ranks)",
             choices = { "auto", "full", "sampled" } },
    seed = { default = 1, help = "noise seed (and, with --plant other than all, where the fault is)" },
    plant = { default = "all", help = "what to plant: all (a slow host, rank and link at fixed places), or one of host, rank, link at a place the seed picks, or none",
              choices = { "all", "host", "rank", "link", "none" } },
    factor = { default = 0, type = "number", min = 0, help = "the planted fault's factor on pair times (0: host 3, rank 3, link 6)" },
    cv = { default = 0.1, type = "number", min = 0, help = "per-sample noise of a pair's time: lognormal, this CV" },
    spikes = { default = 0.02, type = "number", min = 0, max = 1, help = "probability that a sample is a spike" },
    spike = { default = 3, type = "number", min = 1, help = "a spike's factor on the sample" },
    results = { default = "yes", choices = { "yes", "no" },
                help = "write one result per pair as full_diag does while measuring (no: skip them, for the truth harness's many runs; not analysis)" },
  },
}

local PAIR_BYTES = 262144 -- the quick tier's pair size
local BASE_US = { intra = 25, inter = 100 } -- one message of PAIR_BYTES
local LAT_US = { intra = 1, inter = 5 }
local SLOW = { host = 3, rank = 3, link = 6 } -- planted factors on pair times (--factor overrides)
-- Noise (--cv, --spikes, --spike; defaults from namespace-host runs, docs/scale.md): every sample
-- of a pair's time, in the pattern and in each re-test, is the model's time x exp(cv x z) (z
-- standard normal) and, with probability `spikes`, x `spike` (another job's burst, a
-- descheduled rank).
local SWEEP_OPS = { "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall" }

-- Wichmann-Hill (three small multiplicative generators, summed mod 1; period ~7e12). The LCG
-- mod 2^31 this model used before drew correlated values at a fixed stride: a pair standing at
-- the same place of every re-test round got noise that was not independent (1024 ranks, seed
-- 25: a good pair at 1.6x its references over 15 rounds).
local function rng(seed)
  local a, b, c = seed % 30268 + 1, seed * 7 % 30306 + 1, seed * 13 % 30322 + 1
  return function()
    a, b, c = 171 * a % 30269, 172 * b % 30307, 170 * c % 30323
    return (a / 30269 + b / 30307 + c / 30323) % 1
  end
end

-- The synthetic job: hosts, planted culprits, the model of a pair's time.
local function job(n, h, seed, o)
  local rank_hosts, ranks_of, names = {}, {}, {}
  for i = 1, h do names[i] = ("node%05d"):format(i - 1); ranks_of[names[i]] = {} end
  for r = 0, n - 1 do
    local hi = math.floor(r * h / n) + 1
    rank_hosts[r + 1] = names[hi]
    table.insert(ranks_of[names[hi]], r)
  end
  local host_index = {}
  for i, name in ipairs(names) do host_index[name] = i - 1 end
  local j = { n = n, h = h, rank_hosts = rank_hosts, ranks_of = ranks_of, names = names, host_index = host_index }
  -- Planted: a host a third of the way in, a rank two thirds in (on another host), and a link
  -- between two other hosts, chosen below among the measured pairs.
  local u = rng(seed)
  for _ = 1, 3 do u() end
  j.plant = o.plant
  if o.plant == "all" then
    j.slow_host = names[math.floor(h / 3) + 1]
    j.slow_rank = ranks_of[names[math.floor(2 * h / 3) + 1]][1]
  elseif o.plant == "host" then
    j.slow_host = names[math.floor(u() * h) + 1]
  elseif o.plant == "rank" then
    j.slow_rank = math.floor(u() * n)
  end
  local f_host, f_rank, f_link = SLOW.host, SLOW.rank, SLOW.link
  if o.factor > 0 then f_host, f_rank, f_link = o.factor, o.factor, o.factor end
  function j.factor(a, b)
    local f = 1
    if rank_hosts[a + 1] == j.slow_host or rank_hosts[b + 1] == j.slow_host then f = f * f_host end
    if a == j.slow_rank or b == j.slow_rank then f = f * f_rank end
    if j.link and ((a == j.link[1] and b == j.link[2]) or (a == j.link[2] and b == j.link[1])) then f = f * f_link end
    return f
  end
  local spare  -- Box-Muller's second normal
  local function normal()
    if spare then local z = spare; spare = nil; return z end
    local r, t = math.sqrt(-2 * math.log(1 - u())), 2 * math.pi * u()
    spare = r * math.sin(t)
    return r * math.cos(t)
  end
  local function noise()
    local x = math.exp(o.cv * normal())
    if o.spikes > 0 and u() < o.spikes then x = x * o.spike end
    return x
  end
  function j.kind(a, b) return rank_hosts[a + 1] == rank_hosts[b + 1] and "intra" or "inter" end
  function j.pair_us(a, b) return BASE_US[j.kind(a, b)] * j.factor(a, b) * noise() end
  function j.lat_us(a, b) return LAT_US[j.kind(a, b)] * j.factor(a, b) * noise() end
  j.u = u
  return j
end

-- The pairs the pattern stage measures: every pair (n-1 rounds), or the sampled plan: every
-- intra-host pair and one pair per host pair, its ranks rotating through each host's ranks.
local function plan_pairs(j, plan)
  local list = {}
  if plan == "full" then
    for a = 0, j.n - 2 do
      for b = a + 1, j.n - 1 do list[#list + 1] = { a, b } end
    end
    return list
  end
  for _, name in ipairs(j.names) do
    local rs = j.ranks_of[name]
    for x = 1, #rs do for y = x + 1, #rs do list[#list + 1] = { rs[x], rs[y] } end end
  end
  for x = 1, j.h do
    local rx = j.ranks_of[j.names[x]]
    for y = x + 1, j.h do
      local ry = j.ranks_of[j.names[y]]
      list[#list + 1] = { rx[(y - 1) % #rx + 1], ry[(x - 1) % #ry + 1] }
    end
  end
  return list
end

-- The link to plant: a measured pair between two hosts that are neither the slow host nor the
-- slow rank's, and whose ranks are not the slow rank.
local function choose_link(j, list)
  local bad = {}
  if j.slow_host then bad[j.slow_host] = true end
  if j.slow_rank then bad[j.rank_hosts[j.slow_rank + 1]] = true end
  local want = math.floor(#list * (j.plant == "link" and j.u() or 0.6))
  for k = want, #list do
    local a, b = list[k][1], list[k][2]
    local ha, hb = j.rank_hosts[a + 1], j.rank_hosts[b + 1]
    if ha ~= hb and not bad[ha] and not bad[hb] then return { a, b } end
  end
  error("scale_model: no pair to plant a slow link on")
end

-- A bench result of the sweep, shaped as comm:bench's (the fields the analysis reads).
local function sweep_result(j, op, bytes)
  local t = 10 + bytes / 5e3 -- us: latency plus 5 GB/s
  local rank_mean = {}
  for r = 1, j.n do rank_mean[r] = t * (1 + 0.05 * j.u()) end
  local busbw = bytes / t / 1e3 * cs.busbw_factor(op, j.n)
  return { op = op, bytes = bytes, dtype = "float32", iters = 20, time_us = t, p50_us = t, min_us = t * 0.98,
           max_us = t * 1.1, algbw = bytes / t / 1e3, busbw = busbw, cv = 0.03, wrong = 0, rank_mean_us = rank_mean,
           placement = "out-of-place", kind = "sweep" }
end

-- What full_diag's measuring stages would hand rank 0: the sweep of SWEEP_OPS (and the small
-- allreduce times the straggler vote reads) and the pattern's matrix over `list` (its pairs get
-- their time as p[3]). Returns measured, votes.
local function synthetic_measurements(j, list, n)
  local measured = { sweep = {}, cvs = {}, operations = 0, wrong = 0 }
  local votes = {}
  for _, op in ipairs(SWEEP_OPS) do
    measured.sweep[op] = {}
    local bytes = 8
    while bytes <= 4194304 do
      local r = sweep_result(j, op, bytes)
      table.insert(measured.sweep[op], r)
      table.insert(measured.cvs, r.cv)
      measured.operations = measured.operations + 1
      if op == "allreduce" and bytes <= 65536 then votes[#votes + 1] = r.rank_mean_us end
      bytes = bytes * 2
    end
  end
  -- The pattern: per pair its time (larger is worse), bandwidth both ways and latency.
  local bw, lat = {}, {}
  for i = 1, n do bw[i], lat[i] = {}, {} end
  for k, p in ipairs(list) do
    local a, b = p[1], p[2]
    -- full_diag's pair value: the best of the tier's repeats (3), each a noisy sample
    local us = math.min(j.pair_us(a, b), j.pair_us(a, b), j.pair_us(a, b))
    p[3] = us
    local gbps = PAIR_BYTES / us / 1e3
    bw[a + 1][b + 1], bw[b + 1][a + 1] = gbps, gbps * (1 + 0.02 * j.u())
    local l = j.lat_us(a, b)
    lat[a + 1][b + 1], lat[b + 1][a + 1] = l, l
    list[k] = p
  end
  measured.matrix = { bw = bw, lat = lat, pairs = list, n = n }
  return measured, votes
end

local A = cs.array -- lists in JSON even when empty

-- Who was named, by the findings the rules made.
local function named_by(findings)
  local named = { hosts = A {}, ranks = A {}, links = A {}, stragglers = A {}, other = A {} }
  for _, f in ipairs(findings) do
    local s = f.subject or {}
    if f.rule == "slow_host" then named.hosts[#named.hosts + 1] = s.host
    elseif f.rule == "slow_rank" then named.ranks[#named.ranks + 1] = s.rank
    elseif f.rule == "slow_link" then named.links[#named.links + 1] = { s.pair[1], s.pair[2] }
    elseif f.rule == "straggler" then named.stragglers[#named.stragglers + 1] = s.rank
    elseif f.severity ~= "info" then named.other[#named.other + 1] = f.rule end
  end
  return named
end

-- What was planted, in named_by's shape.
local function planted_in(j)
  return { hosts = A { j.slow_host }, ranks = A { j.slow_rank }, links = A { j.link and { j.link[1], j.link[2] } },
           stragglers = A {}, other = A {} }
end

-- The localisation's verdicts on the planted (why one was missed).
local function tested_on_planted(loc, j)
  local on_planted = A {}
  for _, t in ipairs(loc.tested) do
    if (t.host and t.host == j.slow_host) or (t.rank and t.rank == j.slow_rank)
      or (t.pair and j.link and t.pair[1] == math.min(j.link[1], j.link[2]) and t.pair[2] == math.max(j.link[1], j.link[2])) then
      on_planted[#on_planted + 1] = t
    end
  end
  return on_planted
end

function recipe.run(ctx)
  local n, h = ctx.opt.ranks, ctx.opt.hosts
  if h > n then cs.raise(cs.exit.bad_input, ("--hosts %d is more than --ranks %d"):format(h, n)) end
  local plan = ctx.opt.plan
  if plan == "auto" then plan = n <= 1024 and "full" or "sampled" end
  local times, t0 = {}, cs.now()
  local cpu = {}  -- the process's CPU seconds per stage (os.clock): what the shared machine's load does not inflate
  local function stage(name, f)
    local t, c = cs.now(), os.clock()
    local r = { f() }
    times[name], cpu[name] = cs.now() - t, os.clock() - c
    return unpack(r)
  end

  -- The synthetic measurements (not analysis: what the measuring stages hand rank 0).
  local j, list, measured, votes
  local vote = cs.diagnose.straggler_vote { op = "allreduce" }
  stage("generate_s", function()
    j = job(n, h, ctx.opt.seed, ctx.opt)
    list = plan_pairs(j, plan)
    if ctx.opt.plant == "all" or ctx.opt.plant == "link" then j.link = choose_link(j, list) end
    measured, votes = synthetic_measurements(j, list, n)
  end)

  -- The analysis full_diag runs on rank 0's data.
  local stragglers = stage("stragglers_s", function()
    for _, v in ipairs(votes) do vote:add(v) end
    return vote:result()
  end)
  local retests = 0
  local loc = stage("localisation_s", function()
    -- the one localisation full_diag runs (cs.p2p.localise runs it on rank 0), its re-tests
    -- answered by the model: fresh noisy samples
    return cs.diagnose.localise(list, j.rank_hosts, {}, function(batch)
      local out = {}
      for i, p in ipairs(batch) do out[i] = j.pair_us(p[1], p[2]) end
      retests = retests + #batch
      return out
    end)
  end)
  local fake = { config = { scorecard = { bandwidth_reference_gbps = 5 } }, nhosts = h, size = n, comm = ctx.comm }
  local card = stage("scorecard_s", function()
    return cs.scorecard.compute(cs.scorecard.inputs(fake, measured), fake.config.scorecard)
  end)
  local findings = stage("rules_s", function()
    local own = cs.diagnose.findings(loc)
    local f = cs.rules.evaluate({ size = n, rank_hosts = j.rank_hosts, oversubscribed = {}, sweep = measured.sweep,
                               stragglers = stragglers, localisation = loc, scorecard = card, thresholds = {} },
                             cs.rules.builtin)
    for _, x in ipairs(own) do f[#f + 1] = x end
    return f
  end)
  -- The results full_diag reports as it measures (sweep points, one per pair): in a real run
  -- they are written during the measuring stages, so they are timed apart (results_s), not
  -- counted as analysis.
  stage("results_s", function()
    if ctx.opt.results == "no" then return end
    for _, op in ipairs(SWEEP_OPS) do for _, r in ipairs(measured.sweep[op]) do ctx.report:result(r) end end
    for _, p in ipairs(list) do
      ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2],
                          hosts = { j.rank_hosts[p[1] + 1], j.rank_hosts[p[2] + 1] }, bytes = PAIR_BYTES, min_us = p[3] }
    end
  end)
  -- The sections full_diag writes after measuring: topology (its shape: cs.topo), matrix,
  -- scorecard, findings.
  stage("report_sections_s", function()
    local hosts, order = {}, {}
    for i, name in ipairs(j.names) do
      hosts[name] = { name = name, ranks = j.ranks_of[name], local_size = #j.ranks_of[name], first_rank = j.ranks_of[name][1] }
      order[i] = name
    end
    ctx.report:set("topology", { hosts = hosts, host_order = order, size = n, synthetic = true })
    ctx.report:set("matrix", cs.p2p.matrix_report(measured.matrix, PAIR_BYTES))
    ctx.report:set("scorecard", card)
    for _, f in ipairs(findings) do ctx.report:finding(f) end
  end)

  local named, planted = named_by(findings), planted_in(j)
  local function same(x, y) return cs.json.encode(x) == cs.json.encode(y) end
  local exact = same(named, planted)
  local analysis, analysis_cpu = 0, 0
  for _, k in ipairs { "stragglers_s", "localisation_s", "scorecard_s", "rules_s", "report_sections_s" } do
    analysis, analysis_cpu = analysis + times[k], analysis_cpu + cpu[k]
  end
  times.cpu = cpu
  local on_planted = tested_on_planted(loc, j)
  for k, v in pairs({ ranks = n, hosts = h, plan = plan, pairs = #list, retests = retests, noisy = loc.noisy and loc.noisy.cv or false,
                      tested_planted = on_planted, references = loc.references,
                      under_measured = #loc.under_measured, plant = ctx.opt.plant, seed = ctx.opt.seed,
                      suspects = loc.suspects, named = named, planted = planted, exact = exact,
                      analysis_in_recipe_s = analysis, analysis_in_recipe_cpu_s = analysis_cpu,
                      recipe_s = cs.now() - t0, process_cpu_s = os.clock() }) do
    times[k] = v
  end
  ctx.log("SCALE %s", cs.json.encode(times))
  if not exact then
    ctx.log("scale_model: named %s, planted %s", cs.json.encode(named), cs.json.encode(planted))
  end
end

return recipe
