-- The analysis stages of full_diag at scale, on a synthetic result set (scripts/scale_model.sh
-- runs it; docs/scale.md). Runs on the self backend (one process): it makes up what
-- full_diag's measuring stages would have gathered on rank 0 for `ranks` ranks on `hosts`
-- hosts, with faults planted as the namespace harness plants them (--plant; docs/scale.md, "The
-- scale model with users' fault shapes"), every sample noisy (--cv, --spikes, --spike), then
-- runs the same stdlib analysis full_diag runs (straggler votes, cs.evidence on the matrix,
-- cs.diagnose.localise with its forced suspects: the localisation cs.p2p.localise runs, its
-- re-test rounds answered by the model with fresh samples on the model's clock, scorecard,
-- rules, not_confirmed findings) and writes the same report sections, so that the engine writes
-- report.json and report.html at the end as after a real run.
-- The model of a measurement (full_diag 1.4: sustained streams): each pair streams both ways,
-- DRAIN bytes untimed, then TIMED bytes timed; bw[a][b] is what a sent to b (GB/s), the pair
-- value the time one PAIR_BYTES message takes at the slower direction (cs.p2p's fill_matrix),
-- and each re-test measures the same way, alone. A fault slows directions (a factor on a
-- direction's time): a host's NIC (its pairs with other hosts; sending, receiving or both,
-- behind a token bucket), a path between two hosts, a rank (all its pairs), a rank starved of
-- CPU (late in every collective), a host fault that flaps on and off. The model's clock starts
-- at the pattern and advances by each pattern round's and each re-test's modelled time
-- (ROUND_FIXED_S + the stream at the slower pair's rate; measured on namespace hosts); an
-- intermittent fault is on or off by that clock.
-- The last line it logs is "SCALE {json}": per-stage seconds, the planted and the named, the
-- score (correct, innocent), the projected time to the verdict.
local cs = require "commscript"
local localise = require("cs.diagnose.localise").localise  -- localisation's driver, any measure function

local recipe = cs.recipe {
  name = "scale_model",
  version = "2.0.0",
  summary = "full_diag's analysis on a synthetic result set of many ranks (faults shaped as the namespace harness's)",
  options = {
    ranks = { default = 1024, help = "ranks of the synthetic job", min = 16, max = 65536 },
    hosts = { default = 128, help = "hosts (ranks are spread evenly, contiguous per host)", min = 4, max = 65536 },
    plan = { default = "auto", help = "pattern plan: full (every pair), sampled (full_diag's reduced plan: cs.p2p.sampled_plan's host rounds on rails, then the intra-host pairs, the cycles --budget leaves), auto (full up to 1024 ranks)",
             choices = { "auto", "full", "sampled" } },
    seed = { default = 1, help = "noise seed (and, with --plant other than all, where the fault is)" },
    plant = { default = "all", help = "what to plant: all (a slow host, rank and rank-pair link at fixed places: the ctest's), bucket (host: a host's NIC behind a token bucket, --dir), two (two such hosts), link (the path between two hosts), flap (a bucket on --on-s, off --off-s), stutter (rank: a rank slow in all its pairs), cpu (a rank late in every collective, its streams x --cpu-stream), none",
              choices = { "all", "bucket", "host", "two", "link", "flap", "stutter", "rank", "cpu", "none" } },
    factor = { default = 0, type = "number", min = 0, help = "the planted fault's factor on a faulty direction's time (0: host 3, rank 3, link 6); cpu: how much longer the others wait in a small collective" },
    dir = { default = "both", choices = { "send", "recv", "both" }, help = "bucket, two, flap: the direction the host is slow in" },
    burst = { default = 65536, type = "number", min = 0, help = "bucket, two, flap: the token bucket's bytes" },
    on_s = { default = 2, type = "number", min = 0.01, help = "flap: seconds on" },
    off_s = { default = 2, type = "number", min = 0.01, help = "flap: seconds off" },
    cpu_stream = { default = 1, type = "number", min = 1, help = "cpu: the starved rank's factor on its streams" },
    round_s = { default = 1.0, type = "number", min = 0, help = "a healthy pattern round's seconds (namespace hosts, 1 Gbit: the median of healthy runs, one rank per host)" },
    retest_s = { default = 0.42, type = "number", min = 0, help = "a re-test's seconds, one pair alone (namespace hosts: the median over runs of localisation's seconds per pair re-tested)" },
    pre_s = { default = 12, type = "number", min = 0, help = "seconds before the pattern (topology, probe, sweep)" },
    budget = { default = 0, type = "number", min = 0,
               help = "full_diag's --budget in seconds on the model's clock (0: none, the plan uncut): the pattern stops at PATTERN_SHARE of it, the re-tests at all of it (their first rounds excepted), as full_diag's deadlines do" },
    cv = { default = 0.1, type = "number", min = 0, help = "per-sample noise of a direction's time: lognormal, this CV" },
    spikes = { default = 0.02, type = "number", min = 0, max = 1, help = "probability that a sample is a spike" },
    spike = { default = 3, type = "number", min = 1, help = "a spike's factor on the sample" },
    results = { default = "yes", choices = { "yes", "no" },
                help = "write the results full_diag writes while measuring (no: skip them, for the truth harness's many runs; not analysis)" },
  },
}

local PAIR_BYTES = 262144 -- the quick tier's pair size
local BASE_US = { intra = 25, inter = 100 } -- one message of PAIR_BYTES at a healthy direction's rate
local LAT_US = { intra = 1, inter = 5 }
local SLOW = { host = 3, rank = 3, link = 6 } -- --plant all's factors (--factor overrides)
-- full_diag's streams (its SUSTAINED): DRAIN untimed, then TIMED timed, each way. A token bucket
-- of B bytes at rate R (the line's rate / factor) is empty after the drain when B <= DRAIN (every
-- bucket the namespace harness plants: 16 KB - 4 MB): the timed part then runs at R. A larger
-- bucket passes min(TIMED, B - DRAIN) of the timed bytes at the line's rate (its refill during
-- the drain neglected: the bucket is seen a little faster than it is).
local DRAIN, TIMED = 4194304, 2097152
-- The clock (seconds): a pair's streams take STREAM_S at the line's rate (both ways, DRAIN +
-- TIMED each, at 1 Gbit: namespace hosts), x each direction's factor; a pattern round takes
-- (round_s - STREAM_S) + its slowest pair's streams, a re-test (retest_s - STREAM_S) + its pair's.
local STREAM_S = 2 * (DRAIN + TIMED) * 8 / 1e9
-- Noise (--cv, --spikes, --spike; defaults from namespace-host runs, docs/scale.md): every sample
-- of a direction's time, in the pattern and in each re-test, is the model's time x exp(cv x z)
-- (z standard normal) and, with probability `spikes`, x `spike` (another job's burst, a
-- descheduled rank).
local SWEEP_OPS = { "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall" }
-- full_diag's deadline for the pattern: this share of its budget from the start (its SHARE.pattern)
local PATTERN_SHARE = 0.7

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

-- A bucket's factor on the timed part of a stream (see DRAIN, TIMED): f when it is empty.
local function bucket_factor(f, burst)
  local through = math.min(TIMED, math.max(0, burst - DRAIN))
  return ((TIMED - through) * f + through) / TIMED
end

-- The planted faults (j.faults): { what = "host", host, dir, f, flap = {on, off, phase} },
-- { what = "path", hosts = {x, y}, f }, { what = "rank", rank, f }, { what = "pair", a, b, f },
-- { what = "late", rank, f }, chosen by --plant at places the seed picks (all: fixed places).
local function plant_faults(j, o, u)
  local h, n, names = j.h, j.n, j.names
  local f = o.factor
  local function host_fault(name)
    return { what = "host", host = name, dir = o.dir, f = bucket_factor(f > 0 and f or SLOW.host, o.burst) }
  end
  local p, faults = o.plant, {}
  if p == "all" then
    faults[1] = { what = "host", host = names[math.floor(h / 3) + 1], dir = "both", f = f > 0 and f or SLOW.host }
    faults[2] = { what = "rank", rank = j.ranks_of[names[math.floor(2 * h / 3) + 1]][1], f = f > 0 and f or SLOW.rank }
    faults[3] = { what = "pair", f = f > 0 and f or SLOW.link }  -- its pair: choose_link, among the measured
  elseif p == "bucket" or p == "host" or p == "flap" then
    faults[1] = host_fault(names[math.floor(u() * h) + 1])
    if p == "flap" then faults[1].flap = { on = o.on_s, off = o.off_s, phase = u() * (o.on_s + o.off_s) } end
  elseif p == "two" then
    local x = math.floor(u() * h)
    local y = (x + 1 + math.floor(u() * (h - 1))) % h
    faults[1], faults[2] = host_fault(names[math.min(x, y) + 1]), host_fault(names[math.max(x, y) + 1])
  elseif p == "link" then
    local x = math.floor(u() * h)
    local y = (x + 1 + math.floor(u() * (h - 1))) % h
    faults[1] = { what = "path", hosts = { names[math.min(x, y) + 1], names[math.max(x, y) + 1] }, f = f > 0 and f or SLOW.link }
  elseif p == "stutter" or p == "rank" then
    faults[1] = { what = "rank", rank = math.floor(u() * n), f = f > 0 and f or SLOW.rank }
  elseif p == "cpu" then
    faults[1] = { what = "late", rank = math.floor(u() * n), f = f > 0 and f or 10, stream = o.cpu_stream }
  end
  return faults
end

-- A fault's factors on a -> b (sending) at time t: 1 when it does not touch that direction.
local function on_at(x, t)
  if not x.flap then return true end
  return (t + x.flap.phase) % (x.flap.on + x.flap.off) < x.flap.on
end
local function fault_factor(j, x, a, b, t)
  local ha, hb = j.rank_hosts[a + 1], j.rank_hosts[b + 1]
  if x.what == "host" then
    if ha == hb or not on_at(x, t) then return 1 end
    if (ha == x.host and x.dir ~= "recv") or (hb == x.host and x.dir ~= "send") then return x.f end
  elseif x.what == "path" then
    if (ha == x.hosts[1] and hb == x.hosts[2]) or (ha == x.hosts[2] and hb == x.hosts[1]) then return x.f end
  elseif x.what == "rank" then
    if a == x.rank or b == x.rank then return x.f end
  elseif x.what == "pair" then
    if x.a and ((a == x.a and b == x.b) or (a == x.b and b == x.a)) then return x.f end
  elseif x.what == "late" then
    if a == x.rank or b == x.rank then return x.stream end
  end
  return 1
end

-- The synthetic job: hosts, planted faults, the model of a direction's rate.
local function job(n, h, seed, o)
  local rank_hosts, ranks_of, names = {}, {}, {}
  for i = 1, h do names[i] = ("node%05d"):format(i - 1); ranks_of[names[i]] = {} end
  for r = 0, n - 1 do
    local hi = math.floor(r * h / n) + 1
    rank_hosts[r + 1] = names[hi]
    table.insert(ranks_of[names[hi]], r)
  end
  local j = { n = n, h = h, rank_hosts = rank_hosts, ranks_of = ranks_of, names = names, clock = 0 }
  local u = rng(seed)
  for _ = 1, 3 do u() end
  j.plant = o.plant
  j.faults = plant_faults(j, o, u)
  -- the factor on a -> b's time at time t: the slowest fault on that direction (a path is as slow
  -- as its slowest point)
  function j.factor(a, b, t)
    local f = 1
    for _, x in ipairs(j.faults) do f = math.max(f, fault_factor(j, x, a, b, t)) end
    return f
  end
  local spare  -- Box-Muller's second normal
  local function normal()
    if spare then local z = spare; spare = nil; return z end
    local r, th = math.sqrt(-2 * math.log(1 - u())), 2 * math.pi * u()
    spare = r * math.sin(th)
    return r * math.cos(th)
  end
  local function noise()
    local x = math.exp(o.cv * normal())
    if o.spikes > 0 and u() < o.spikes then x = x * o.spike end
    return x
  end
  function j.kind(a, b) return rank_hosts[a + 1] == rank_hosts[b + 1] and "intra" or "inter" end
  -- one streamed measurement of the pair at the clock: GB/s a -> b, GB/s b -> a, the pair value
  -- (us per message at the slower direction), the seconds it took (factors' mean x STREAM_S)
  function j.stream(a, b)
    local fab, fba = j.factor(a, b, j.clock), j.factor(b, a, j.clock)
    local us = BASE_US[j.kind(a, b)]
    local ab, ba = PAIR_BYTES / (us * fab * noise()) / 1e3, PAIR_BYTES / (us * fba * noise()) / 1e3
    return ab, ba, PAIR_BYTES / math.min(ab, ba) / 1e3, STREAM_S * (fab + fba) / 2
  end
  function j.lat_us(a, b) return LAT_US[j.kind(a, b)] * noise() end
  j.u = u
  return j
end

-- The rounds the pattern stage measures: the full round robin, or the reduced plan full_diag
-- switches to (cs.p2p.matrix): the sampled plan's host rounds first (on rails when every host has
-- 2 or more ranks), then the intra-host pairs, as many cycles as the budget's pattern share
-- leaves (cs.p2p.sampled_cycles at round_s; one without a budget), or the host plan when not one
-- fits. cs.p2p's plans, so the clock advances round by round as full_diag's does.
local function plan_rounds(j, plan, o)
  if plan == "full" then return cs.p2p.full_plan(j.n) end
  local cycles = 1
  if o.budget > 0 then cycles = cs.p2p.sampled_cycles(j.rank_hosts, PATTERN_SHARE * o.budget - o.pre_s, o.round_s) end
  if cycles == 0 then return cs.p2p.host_plan(j.rank_hosts) end
  return cs.p2p.sampled_plan(j.rank_hosts, { cycles = cycles, inter_first = true })
end

-- --plant all's link: a measured pair between two hosts that are neither the slow host nor the
-- slow rank's, and whose ranks are not the slow rank (60 % into the rounds' pairs).
local function choose_link(j, rounds)
  local bad = {}
  for _, x in ipairs(j.faults) do
    if x.host then bad[x.host] = true end
    if x.rank then bad[j.rank_hosts[x.rank + 1]] = true end
  end
  local list = {}
  for _, round in ipairs(rounds) do for _, p in ipairs(round) do list[#list + 1] = p end end
  table.sort(list, function(x, y) return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2]) end)
  for k = math.floor(#list * 0.6), #list do
    local a, b = list[k][1], list[k][2]
    local ha, hb = j.rank_hosts[a + 1], j.rank_hosts[b + 1]
    if ha ~= hb and not bad[ha] and not bad[hb] then return a, b end
  end
  error("scale_model: no pair to plant a slow link on")
end

-- A bench result of the sweep, shaped as comm:bench's (the fields the analysis reads). A rank
-- starved of CPU (a "late" fault) arrives late: the others wait for it (f x the time), it waits
-- the least (the time alone).
local function sweep_result(j, op, bytes)
  local t = 10 + bytes / 5e3 -- us: latency plus 5 GB/s
  local late
  for _, x in ipairs(j.faults) do if x.what == "late" then late = x end end
  local wait = late and late.f or 1
  local rank_mean = {}
  for r = 1, j.n do rank_mean[r] = t * wait * (1 + 0.05 * j.u()) end
  if late then rank_mean[late.rank + 1] = t * (1 + 0.05 * j.u()) end
  local busbw = bytes / (t * wait) / 1e3 * cs.busbw_factor(op, j.n)
  return { op = op, bytes = bytes, dtype = "float32", iters = 20, time_us = t * wait, p50_us = t * wait, min_us = t * wait * 0.98,
           max_us = t * wait * 1.1, algbw = bytes / (t * wait) / 1e3, busbw = busbw, cv = 0.03, wrong = 0, rank_mean_us = rank_mean,
           placement = "out-of-place", kind = "sweep" }
end

-- What full_diag's measuring stages would hand rank 0: the sweep of SWEEP_OPS (and the small
-- allreduce times the straggler vote reads) and the pattern's matrix, round by round on the
-- model's clock. Returns measured, votes, the pattern's seconds.
local function synthetic_measurements(j, rounds, n, o)
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
  -- The pattern: per pair both directions streamed (bw, row = sender), latency, the pair value.
  local bw, lat, list = {}, {}, {}
  for i = 1, n do bw[i], lat[i] = {}, {} end
  local fixed = math.max(o.round_s - STREAM_S, 0)
  local t0 = j.clock
  local run = 0
  for _, round in ipairs(rounds) do
    if o.budget > 0 and o.pre_s + j.clock >= PATTERN_SHARE * o.budget then break end
    run = run + 1
    local slowest = 0
    for _, p in ipairs(round) do
      local a, b = p[1], p[2]
      local ab, ba, us, s = j.stream(a, b)
      bw[a + 1][b + 1], bw[b + 1][a + 1] = ab, ba
      local l = j.lat_us(a, b)
      lat[a + 1][b + 1], lat[b + 1][a + 1] = l, l
      list[#list + 1] = { a, b, us }
      if s > slowest then slowest = s end
    end
    j.clock = j.clock + fixed + slowest
  end
  measured.matrix = { bw = bw, lat = lat, pairs = list, n = n }
  return measured, votes, j.clock - t0, run
end

local A = cs.array -- lists in JSON even when empty

-- Who was named, by the findings the rules made (as scripts/truth_harness.py's named_of reads a
-- namespace run's report).
local function named_by(findings)
  local named = { hosts = A {}, ranks = A {}, links = A {}, stragglers = A {}, unconfirmed = A {}, other = A {}, noisy = false }
  for _, f in ipairs(findings) do
    local s = f.subject or {}
    if f.rule == "slow_host" then named.hosts[#named.hosts + 1] = s.host
    elseif f.rule == "slow_rank" then named.ranks[#named.ranks + 1] = s.rank
    elseif f.rule == "slow_link" then named.links[#named.links + 1] = { s.pair[1], s.pair[2] }
    elseif f.rule == "straggler" then named.stragglers[#named.stragglers + 1] = s.rank
    elseif f.rule == "localisation_noisy" then named.noisy = f.message
    elseif f.rule == "not_confirmed" then
      named.unconfirmed[#named.unconfirmed + 1] = s.rank ~= nil and { rank = s.rank } or { host = s.host }
    elseif f.severity ~= "info" and (s.rank ~= nil or s.host or s.pair) then named.other[#named.other + 1] = f.rule end
  end
  return named
end

-- What was planted: hosts, ranks, links (rank pairs; a path between two hosts as their names).
local function planted_in(j)
  local p = { kind = j.plant, hosts = A {}, ranks = A {}, links = A {} }
  for _, x in ipairs(j.faults) do
    if x.what == "host" then p.hosts[#p.hosts + 1] = x.host
    elseif x.what == "rank" or x.what == "late" then p.ranks[#p.ranks + 1] = x.rank
    elseif x.what == "path" then p.links[#p.links + 1] = { x.hosts[1], x.hosts[2] }
    elseif x.what == "pair" then p.links[#p.links + 1] = { math.min(x.a, x.b), math.max(x.a, x.b) } end
  end
  return p
end

-- The score, as scripts/truth_harness.py's score() for a namespace run: correct when every
-- planted fault is named (a host fault by its host, a rank fault by its rank; either for a host
-- of one rank; a flapping host also by a not_confirmed warning; a path by a link between its two
-- hosts, a rank pair by itself), innocent: everyone else named (hosts, ranks, links,
-- not_confirmed, stragglers not on a faulty host, other findings with a rank, host or pair).
local function score(j, named)
  local ok_h, ok_r, sets = {}, {}, {}
  local function one_rank(h) return #j.ranks_of[h] == 1 end
  for _, x in ipairs(j.faults) do
    local set = { h = {}, r = {}, flap = x.flap ~= nil, x = x }
    if x.what == "host" then
      set.h[x.host] = true
      if one_rank(x.host) then set.r[j.ranks_of[x.host][1]] = true end
    elseif x.what == "rank" or x.what == "late" then
      set.r[x.rank] = true
      local h = j.rank_hosts[x.rank + 1]
      if one_rank(h) then set.h[h] = true end
    end
    for k in pairs(set.h) do ok_h[k] = true end
    for k in pairs(set.r) do ok_r[k] = true end
    sets[#sets + 1] = set
  end
  local function link_of(x, a, b)
    local ha, hb = j.rank_hosts[a + 1], j.rank_hosts[b + 1]
    if x.what == "path" then return (ha == x.hosts[1] and hb == x.hosts[2]) or (ha == x.hosts[2] and hb == x.hosts[1]) end
    return x.what == "pair" and math.min(a, b) == math.min(x.a, x.b) and math.max(a, b) == math.max(x.a, x.b)
  end
  local correct = #sets > 0
  for _, set in ipairs(sets) do
    local found = false
    for _, h in ipairs(named.hosts) do found = found or set.h[h] == true end
    for _, r in ipairs(named.ranks) do found = found or set.r[r] == true end
    for _, l in ipairs(named.links) do found = found or link_of(set.x, l[1], l[2]) end
    if set.flap then
      for _, u in ipairs(named.unconfirmed) do found = found or (u.host and set.h[u.host]) or (u.rank and set.r[u.rank]) or false end
    end
    correct = correct and found
  end
  local innocent = A {}
  for _, h in ipairs(named.hosts) do if not ok_h[h] then innocent[#innocent + 1] = "host " .. h end end
  for _, r in ipairs(named.ranks) do if not ok_r[r] then innocent[#innocent + 1] = "rank " .. r end end
  for _, u in ipairs(named.unconfirmed) do
    if (u.host and not ok_h[u.host]) or (u.rank and not ok_r[u.rank]) then
      innocent[#innocent + 1] = "not confirmed " .. (u.host or ("rank " .. u.rank))
    end
  end
  for _, r in ipairs(named.stragglers) do
    if not ok_r[r] and not ok_h[j.rank_hosts[r + 1]] then innocent[#innocent + 1] = "straggler " .. r end
  end
  for _, l in ipairs(named.links) do
    local any = false
    for _, x in ipairs(j.faults) do any = any or link_of(x, l[1], l[2]) end
    if not any then innocent[#innocent + 1] = ("link %d-%d"):format(l[1], l[2]) end
  end
  for _, o in ipairs(named.other) do innocent[#innocent + 1] = "finding " .. o end
  return correct, innocent
end

-- The localisation's verdicts on the planted (why one was missed).
local function tested_on_planted(loc, j)
  local on_planted = A {}
  for _, t in ipairs(loc.tested) do
    local hit = false
    for _, x in ipairs(j.faults) do
      hit = hit or (t.host ~= nil and t.host == x.host) or (t.rank ~= nil and t.rank == x.rank)
        or (t.pair ~= nil and (x.what == "path" or x.what == "pair") and
            (function() local ha, hb = j.rank_hosts[t.pair[1] + 1], j.rank_hosts[t.pair[2] + 1]
              if x.what == "pair" then return t.pair[1] == math.min(x.a, x.b) and t.pair[2] == math.max(x.a, x.b) end
              return (ha == x.hosts[1] and hb == x.hosts[2]) or (ha == x.hosts[2] and hb == x.hosts[1]) end)())
    end
    if hit then on_planted[#on_planted + 1] = t end
  end
  return on_planted
end

-- The re-tests, answered by the model on its clock: each pair alone (a re-test's fixed cost and
-- its streams), or a rescreen round's pairs at once (a pattern round's). Counts into rt.
local function retest_model(j, o, rt)
  local fixed_alone, fixed_round = math.max(o.retest_s - STREAM_S, 0), math.max(o.round_s - STREAM_S, 0)
  return function(batch, must, together)
    -- full_diag's re-tests stop at its deadline, except the rounds localise says the budget must not cut
    if o.budget > 0 and not must and o.pre_s + j.clock >= o.budget then return nil end
    local out, slowest = {}, 0
    for i, p in ipairs(batch) do
      local _, _, us, s = j.stream(p[1], p[2])
      out[i] = us
      if together then slowest = math.max(slowest, s) else j.clock = j.clock + fixed_alone + s end
    end
    if together then j.clock = j.clock + fixed_round + slowest end
    rt.rounds, rt.pairs = rt.rounds + 1, rt.pairs + #batch
    if together then rt.rescreen_rounds = rt.rescreen_rounds + 1 else rt.alone = rt.alone + #batch end
    return out
  end
end

-- full_diag's localisation stage on the model: the matrix's evidence (cs.evidence) forces its
-- suspects, cs.diagnose.localise decides with re-tests on the model, and what the evidence showed
-- and the verdict did not name becomes not_confirmed findings.
local function localisation(j, o, measured, stragglers, rt)
  local ev = cs.evidence.off(measured.matrix.bw, j.rank_hosts)
  local force = cs.evidence.force(ev, stragglers)
  local loc = localise(measured.matrix.pairs, j.rank_hosts, { force = force }, retest_model(j, o, rt))
  cs.evidence.annotate(loc, ev, j.rank_hosts)
  loc.unconfirmed = cs.evidence.unconfirmed(ev, loc, j.rank_hosts, PAIR_BYTES)
  loc.forced = force
  return loc
end

-- The results full_diag reports as it measures: sweep points, and one per pair unless the
-- matrix section is sparse (full_diag 1.4: its pairs hold them).
local function write_results(ctx, j, measured)
  for _, op in ipairs(SWEEP_OPS) do for _, r in ipairs(measured.sweep[op]) do ctx.report:result(r) end end
  if cs.p2p.sparse(measured.matrix) then return end
  for _, p in ipairs(measured.matrix.pairs) do
    ctx.report:result { kind = "pair", op = "sendrecv", a = p[1], b = p[2],
                        hosts = { j.rank_hosts[p[1] + 1], j.rank_hosts[p[2] + 1] }, bytes = PAIR_BYTES, min_us = p[3] }
  end
end

-- The sections full_diag writes after measuring: topology (its shape: cs.topo), matrix,
-- localisation, scorecard, findings.
local function write_sections(ctx, j, measured, plan, loc, card, findings)
  local hosts, order = {}, {}
  for i, name in ipairs(j.names) do
    hosts[name] = { name = name, ranks = j.ranks_of[name], local_size = #j.ranks_of[name], first_rank = j.ranks_of[name][1] }
    order[i] = name
  end
  ctx.report:set("topology", { hosts = hosts, host_order = order, size = j.n, synthetic = true })
  local rep = cs.p2p.matrix_report(measured.matrix, PAIR_BYTES)
  rep.plan = plan
  ctx.report:set("matrix", rep)
  ctx.report:set("localisation", { references = loc.references, suspects = loc.suspects, retests = loc.retests,
                                   under_measured = loc.under_measured, undecided = loc.undecided, tested = loc.tested,
                                   noisy = loc.noisy or false, forced = loc.forced })
  ctx.report:set("scorecard", card)
  for _, f in ipairs(findings) do ctx.report:finding(f) end
end

function recipe.run(ctx)
  local o = ctx.opt
  local n, h = o.ranks, o.hosts
  if h > n then cs.raise(cs.exit.bad_input, ("--hosts %d is more than --ranks %d"):format(h, n)) end
  local plan = o.plan
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
  local j, rounds, measured, votes, pattern_s, rounds_run
  local vote = cs.diagnose.straggler_vote { op = "allreduce" }
  stage("generate_s", function()
    j = job(n, h, o.seed, o)
    rounds = plan_rounds(j, plan, o)
    for _, x in ipairs(j.faults) do if x.what == "pair" then x.a, x.b = choose_link(j, rounds) end end
    measured, votes, pattern_s, rounds_run = synthetic_measurements(j, rounds, n, o)
  end)

  -- The analysis full_diag runs on rank 0's data.
  local stragglers = stage("stragglers_s", function()
    for _, v in ipairs(votes) do vote:add(v) end
    return vote:result()
  end)
  local rt = { rounds = 0, pairs = 0, rescreen_rounds = 0, alone = 0 }
  local retest_t0 = j.clock
  local loc = stage("localisation_s", function() return localisation(j, o, measured, stragglers, rt) end)
  local fake = { config = { scorecard = { bandwidth_reference_gbps = 5 } }, nhosts = h, size = n, comm = ctx.comm }
  local card = stage("scorecard_s", function()
    return cs.scorecard.compute(cs.scorecard.inputs(fake, measured), fake.config.scorecard)
  end)
  local findings = stage("rules_s", function()
    local f = cs.diagnose.findings(loc)
    for _, x in ipairs(loc.unconfirmed) do f[#f + 1] = x end
    local more = cs.rules.evaluate({ size = n, rank_hosts = j.rank_hosts, oversubscribed = {}, sweep = measured.sweep,
                                     stragglers = stragglers, localisation = loc, scorecard = card, thresholds = {} },
                                   cs.rules.builtin)
    for _, x in ipairs(more) do f[#f + 1] = x end
    return f
  end)
  -- in a real run written during the measuring stages: timed apart (results_s), not analysis
  stage("results_s", function() if o.results == "yes" then write_results(ctx, j, measured) end end)
  local plan_info = { kind = plan, rounds_run = rounds_run, rounds_planned = #rounds, cut = rounds_run < #rounds, modelled_s = pattern_s }
  stage("report_sections_s", function() write_sections(ctx, j, measured, plan_info, loc, card, findings) end)

  local named, planted = named_by(findings), planted_in(j)
  local correct, innocent = score(j, named)
  local exact = (correct or #j.faults == 0) and #innocent == 0
  local analysis, analysis_cpu = 0, 0
  for _, k in ipairs { "stragglers_s", "localisation_s", "scorecard_s", "rules_s", "report_sections_s" } do
    analysis, analysis_cpu = analysis + times[k], analysis_cpu + cpu[k]
  end
  times.cpu = cpu
  local retest_s = j.clock - retest_t0
  -- full_diag's time to its verdict, projected: before the pattern, the pattern's rounds and the
  -- re-tests on the model's clock (round_s, retest_s: measured on namespace hosts)
  local projection = { pre_s = o.pre_s, pattern_rounds = rounds_run, pattern_rounds_planned = #rounds, budget = o.budget,
                       pattern_s = pattern_s, retest_rounds = rt.rounds,
                       rescreen_rounds = rt.rescreen_rounds, retests = rt.pairs, retests_alone = rt.alone, retest_s = retest_s,
                       verdict_s = o.pre_s + pattern_s + retest_s, round_s = o.round_s, retest_pair_s = o.retest_s }
  for k, v in pairs({ ranks = n, hosts = h, plan = plan, pairs = #measured.matrix.pairs, retests = rt.pairs,
                      noisy = loc.noisy and loc.noisy.cv or false, tested_planted = tested_on_planted(loc, j),
                      references = loc.references, under_measured = #loc.under_measured, plant = o.plant, seed = o.seed,
                      suspects = loc.suspects, forced = loc.forced, named = named, planted = planted, correct = correct,
                      innocent = innocent, exact = exact, projection = projection,
                      analysis_in_recipe_s = analysis, analysis_in_recipe_cpu_s = analysis_cpu,
                      recipe_s = cs.now() - t0, process_cpu_s = os.clock() }) do
    times[k] = v
  end
  ctx.log("SCALE %s", cs.json.encode(times))
  if not exact then
    ctx.log("scale_model: named %s, planted %s, innocent %s", cs.json.encode(named), cs.json.encode(planted), cs.json.encode(innocent))
  end
end

return recipe
