-- Point-to-point measurement patterns over a communicator. Every function here is collective:
-- all ranks of ctx.comm call it with the same arguments. Pairs measure on ctx.comm itself
-- (matched send/recv between the two ranks, comm:pair_bench / pingpong / stream): no
-- communicator is created per round or per re-test. Per-rank results go to rank 0 only
-- (gather_value); what every rank needs (the plan, the localisation's verdict) is broadcast.
--
-- Plans (pure functions, cs.pairs', kept here by name): full_plan, sampled_plan, host_plan,
-- plan_rounds, sampled_cycles.
--
-- first_round(ctx, args) -> { mine, round_s }: the full plan's round 1 as matrix measures it.
-- round_robin(ctx, args) -> on rank 0 a list of { a, b, value } for every pair of the plan
--   (args.plan, default full_plan), repeated args.repeats times (default 1) keeping the smallest
--   value (noise only adds time); {} on the other ranks.
-- pair(ctx, a, b, args) -> value on every rank: the pair alone, every other rank idle.
-- confirm(ctx, suspects, good, args, factor) -> list of confirmed suspects (rank 0's lists
--   decide): each suspect is re-measured alone against a known-good partner and kept only when
--   it is still more than `factor` times the time of two known-good ranks measured the same way.
-- args: { bytes =, iters =, warmup =, field = "min_us" }: a pair's value is `field` of
--   comm:pair_bench (a sendrecv of args.bytes between the two ranks, args.iters iterations each
--   timed alone); min_us by default (noise only adds time). args.op is accepted for the older
--   interface and must be "sendrecv".
local pairs_mod = require "cs.pairs"
local stats = require "cs.stats"
local native = require "commscript.native"
local M = {}

local rounds_of = pairs_mod.rounds_of

-- the plans are cs.pairs' (pair schedules); cs.p2p keeps their names (recipes call them here)
for _, k in ipairs { "full_plan", "sampled_plan", "host_plan", "plan_rounds", "sampled_cycles" } do M[k] = pairs_mod[k] end

local function check_op(args)
  if args.op ~= nil and args.op ~= "sendrecv" then
    error(("cs.p2p: pairs measure sendrecv, not %s"):format(tostring(args.op)), 3)
  end
end

-- Both directions of a pair streamed in turn (the lower rank sends first): this rank's view of
-- the GB/s it sent and the GB/s it received. args: bytes (256K), window (8), iters (5), warmup (1).
-- A warm-up of window x bytes x warmup drains a shaper's bucket up to that size before the timed
-- iterations, so a token bucket that holds a message or a few cannot hide its rate.
local function stream_both(comm, me, peer, args)
  local sent, recv
  for first = 1, 0, -1 do
    local sender = (first == 1) == (me < peer)
    local g = comm:stream { peer = peer, sender = sender, bytes = args.bytes or 262144, window = args.window or 8,
                            iters = args.iters or 5, warmup = args.warmup or 1 }
    if sender then sent = g else recv = g end
  end
  return sent, recv
end

-- A pair's sustained value (localisation's statistic, docs/scale.md): the time one message of
-- args.bytes takes at the slower direction's streaming rate, in us (larger is worse).
local function stream_value(comm, me, peer, args)
  local sent, recv = stream_both(comm, me, peer, args)
  return (args.bytes or 262144) / math.min(sent, recv) / 1e3
end
M.stream_value = stream_value

-- One direction of a pair streamed (from `sender`): the time one message of args.bytes takes at
-- that rate, in us, as this rank measured it.
local function stream_from(comm, me, peer, sender, args)
  local g = comm:stream { peer = peer, sender = me == sender, bytes = args.bytes or 262144, window = args.window or 8,
                          iters = args.iters or 5, warmup = args.warmup or 1 }
  return (args.bytes or 262144) / g / 1e3
end
M.stream_from = stream_from

-- the direction a re-test of {a, b} streams: the slower one in the matrix bw (rank 0's), nil
-- (both) where the matrix has not both
local function slower_from(bw, a, b)
  local ab, ba = bw and bw[a + 1] and bw[a + 1][b + 1], bw and bw[b + 1] and bw[b + 1][a + 1]
  if not (ab and ba) then return nil end
  return ab <= ba and a or b
end

-- retest_from(bw, ways, a, b) -> the rank a re-test of {a, b} streams from: the way the run's
-- evidence found an end slow (ways: cs.evidence.ways; "receiving" streams into it, "sending" out
-- of it), when the ends agree; else the matrix's slower way (nil: both ways)
function M.retest_from(bw, ways, a, b)
  local pick
  for _, e in ipairs { { a, b }, { b, a } } do
    local w = ways and ways[e[1]]
    local from = (w == "sending" and e[1]) or (w == "receiving" and e[2]) or nil
    if from ~= nil then
      if pick ~= nil and pick ~= from then return slower_from(bw, a, b) end
      pick = from
    end
  end
  if pick ~= nil then return pick end
  return slower_from(bw, a, b)
end

-- matrix_way(bw, r) -> "receiving" when rank r's median receive in the matrix bw (GB/s, row =
-- sender) is below its median send, "sending" when above, nil when bw has neither or they tie
function M.matrix_way(bw, r)
  local row, sends, recvs = bw and bw[r + 1], {}, {}
  if not bw then return nil end
  for i, x in pairs(bw) do
    if i ~= r + 1 then
      local v = x[r + 1]
      if type(v) == "number" then recvs[#recvs + 1] = v end
      local u = row and row[i]
      if type(u) == "number" then sends[#sends + 1] = u end
    end
  end
  if #sends == 0 or #recvs == 0 then return nil end
  local s, v = stats.median(sends), stats.median(recvs)
  if v < s then return "receiving" elseif s < v then return "sending" end
  return nil
end

-- batch_from(bw, ways, batch [, memo]) -> per pair of a re-test batch the rank it streams from
-- (false: both ways):
--   * a link's end pair (p.like = {end, a, b}: cs.diagnose's link re-test) streams the way its
--     link {a, b} does: out of the end that sends on the link, into the end that receives; both
--     ways when the link does;
--   * a pair of a host's or a rank's re-test (p.way_of = the suspect rank, p.at = the rank of the
--     pair in its place: itself, or its mate) streams the way that suspect is slow: ways (the
--     evidence), else the matrix's slower way of all the suspect's pairs (matrix_way). Each pair
--     the way of its own matrix entries instead, one sample each, went the wrong way where a
--     shaper's bucket had let that entry through (truth harness seed 2315, h0 receiving at
--     113 Mbit behind a 4 MB bucket: its host re-test streamed 0-2 into 0 at 7.3x and 0-7 out
--     of 0 at 1.0x, and h0 was left unconfirmed);
--   * any other pair: retest_from's way.
-- memo: a table the caller keeps between batches (the matrix ways of the suspects).
function M.batch_from(bw, ways, batch, memo)
  local from = {}
  memo = memo or {}
  for i, p in ipairs(batch) do
    local like, subject = p.like, p.way_of
    local f
    if like then
      local e, link_from = like[1], M.retest_from(bw, ways, like[2], like[3])
      local other = p[1] == e and p[2] or p[1]
      f = (link_from == e and e) or (link_from ~= nil and other) or false
    elseif subject then
      local w = ways and ways[subject]
      if w == nil then
        if memo[subject] == nil then memo[subject] = M.matrix_way(bw, subject) or false end
        w = memo[subject] or nil
      end
      local at = p.at or subject
      local other = p[1] == at and p[2] or p[1]
      f = (w == "sending" and at) or (w == "receiving" and other) or nil
    end
    if f == nil then f = M.retest_from(bw, ways, p[1], p[2]) or false end
    from[i] = f
  end
  return from
end

local function pair_value(comm, peer, args, from)
  if args.stream and from then return stream_from(comm, comm:rank(), peer, from, args) end
  if args.stream then return stream_value(comm, comm:rank(), peer, args) end
  local best
  for _ = 1, args.repeats_inner or 1 do
    local r = comm:pair_bench { peer = peer, bytes = args.bytes, iters = args.iters or 10, warmup = args.warmup or 2 }
    local v = r[args.field or "min_us"]
    if not best or v < best then best = v end
  end
  return best
end

function M.round_robin(ctx, args)
  check_op(args)
  local plan = args.plan or M.full_plan(ctx.size)
  local mine = {}  -- { partner, value } of the pairs where this rank is the lower one
  for _ = 1, args.repeats or 1 do
    for _, round in ipairs(plan) do
      local partner = pairs_mod.partner(round, ctx.rank)
      if partner then
        local v = pair_value(ctx.comm, partner, args)
        if ctx.rank < partner then mine[#mine + 1] = { partner, v } end
      end
      ctx.comm:barrier()  -- rounds do not overlap; idle ranks wait here, yielding the CPU
    end
  end
  local all = ctx.comm:gather_value(mine, 0)
  if ctx.rank ~= 0 then return {} end
  local best = {}
  for i, list in ipairs(all) do
    for _, v in ipairs(list) do
      local key = (i - 1) * 1048576 + v[1]
      if not best[key] or v[2] < best[key][3] then best[key] = { i - 1, v[1], v[2] } end
    end
  end
  local keys, out = {}, {}
  for k in pairs(best) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = best[k] end
  return out
end

function M.pair(ctx, a, b, args)
  check_op(args)
  local v = false
  if ctx.rank == a or ctx.rank == b then
    for _ = 1, args.repeats or 1 do
      local x = pair_value(ctx.comm, ctx.rank == a and b or a, args)
      if not v or x < v then v = x end
    end
  end
  ctx.comm:barrier()
  return ctx.comm:broadcast_value(v, math.min(a, b))
end

function M.confirm(ctx, suspects, good, args, factor)
  -- rank 0's lists decide (round_robin's values are rank 0's)
  local both = ctx.comm:broadcast_value({ suspects, good }, 0)
  suspects, good = both[1], both[2]
  if #suspects == 0 or #good < 2 then return {} end  -- nothing to compare against: name nobody
  local reference = M.pair(ctx, good[1], good[2], args)
  local out = {}
  for _, s in ipairs(suspects) do
    local partner = good[1] ~= s and good[1] or good[2]
    local v = M.pair(ctx, s, partner, args)
    if v > factor * reference then
      out[#out + 1] = { rank = s, value = v, reference = reference, partner = partner }
    end
  end
  return out
end

-- localise(ctx, values, rank_hosts, args) -> cs.diagnose.localise's result on every rank.
--   The one localisation (cs.diagnose.localise) runs on rank 0 over its `values` ({a, b, us},
--   larger is worse; other ranks may pass anything); each of its rounds of re-tests is
--   broadcast and measured by every rank together: each pair alone (pair_bench on ctx.comm of
--   args.bytes, args.retest_iters or args.iters iterations: its min_us), the others idle at a
--   barrier; the values are gathered to rank 0. Rounds stop once rank 0's clock is past
--   args.deadline (cs.now() seconds; none: no limit), except the first rounds of the host
--   verdicts, which always run. The rescreen's rounds (more link suspects than the re-tests
--   take) measure their disjoint pairs at once, one barrier per round. The verdict is broadcast (O(suspects) per rank). args also
--   carries the verdict's options (cs.diagnose.VERDICT: samples, margin, max_cv, factor,
--   link_factor, ...); args.stages (cs.stages) gets the counts "retests" and "rescreened".
--   On rank 0 a second result: each re-test's { a, b, start (cs.now()), seconds, us }, in order
--   (for retests_report).
function M.localise(ctx, values, rank_hosts, args)
  check_op(args)
  local D = require "cs.diagnose.localise"
  local margs = { bytes = args.bytes, iters = args.retest_iters or args.iters or 10, warmup = args.warmup }
  if args.stream then  -- the re-tests measure what the pattern measured: streams, the slower way
    margs = { bytes = args.bytes, stream = true, window = args.window, iters = args.iters, warmup = args.warmup }
  end
  local clock = {}  -- rank 0: each re-test's { a, b, start (cs.now()), seconds, us }, in order
  local way_memo = {}  -- rank 0: the suspects' matrix ways (batch_from)
  local function exec(batch, together, from)  -- collective: every rank, the same batch
    local mine, times = {}, {}
    local t = native.now()
    for i, p in ipairs(batch) do
      if ctx.rank == p[1] or ctx.rank == p[2] then
        local v = pair_value(ctx.comm, ctx.rank == p[1] and p[2] or p[1], margs, from and from[i] or nil)
        if ctx.rank == math.min(p[1], p[2]) then mine[#mine + 1] = { i, v } end
        if together then break end  -- disjoint pairs (checked on rank 0): this rank's only one
      end
      if not together then  -- each re-test alone
        ctx.comm:barrier()
        local now = native.now()
        times[i], t = { t, now - t }, now
      end
    end
    if together then ctx.comm:barrier() end  -- the rescreen's round: its pairs at once
    if args.stages then args.stages:count(together and "rescreened" or "retests", #batch) end
    local all = ctx.comm:gather_value(mine, 0)
    if ctx.rank ~= 0 then return nil end
    local out = {}
    for _, list in ipairs(all) do for _, v in ipairs(list) do out[v[1]] = v[2] end end
    for i, p in ipairs(batch) do
      local tt = times[i] or { t, native.now() - t }
      clock[#clock + 1] = { p[1], p[2], tt[1], tt[2], out[i] or false }
    end
    return out
  end
  local out = false
  if ctx.rank == 0 then
    out = D.localise(values or {}, rank_hosts, args, function(batch, must, together)
      if not must and args.deadline and native.now() > args.deadline then return nil end
      if together then  -- a rank in two pairs of one round would wait for a partner forever
        local seen = {}
        for _, p in ipairs(batch) do
          if seen[p[1]] or seen[p[2]] or p[1] == p[2] then error("cs.p2p.localise: a rescreen round's pairs overlap", 2) end
          seen[p[1]], seen[p[2]] = true, true
        end
      end
      local from
      if args.stream and (args.bw or args.ways) then  -- each pair streams the way its ends were slow
        from = M.batch_from(args.bw, args.ways, batch, way_memo)
      end
      local plain = {}  -- {a, b} only: a pair's `like` would make it a JSON object
      for i, p in ipairs(batch) do plain[i] = { p[1], p[2] } end
      ctx.comm:broadcast_value({ batch = plain, together = together or nil, from = from }, 0)
      return exec(plain, together, from)
    end)
    ctx.comm:broadcast_value({ done = true }, 0)
  else
    while true do
      local msg = ctx.comm:broadcast_value(false, 0)
      if msg.done then break end
      exec(msg.batch, msg.together, msg.from)
    end
  end
  return ctx.comm:broadcast_value(out, 0), ctx.rank == 0 and clock or nil
end

-- retests_report(clock, n) -> the report's localisation.clock (n ranks up to PASSES_MAX_RANKS,
-- else nil): origin (rank 0's cs.now() at the first re-test) and each re-test in order,
-- { a, b, start s from origin, seconds, us } (a rescreen round's pairs share their round's times)
function M.retests_report(clock, n)
  if not clock or #clock == 0 or n > M.PASSES_MAX_RANKS then return nil end
  local origin, out = clock[1][3], {}
  for i, c in ipairs(clock) do out[i] = { c[1], c[2], c[3] - origin, c[4], c[5] } end
  return { origin = origin, retests = out }
end

-- one pass's clock as merge_passes keeps it (matrix's clock and ran)
local function pass_clock(m) return { clock = m.clock, ran = m.ran } end

-- the report's matrix.clocks: origin (rank 0's cs.now() at the first round's start) and, per
-- pass, each round's { start s from origin, seconds, { a, b, a, b, ... } its pairs }
local function clocks_report(clocks)
  local origin, out = nil, {}
  for _, c in ipairs(clocks) do
    for _, t in ipairs(c.clock or {}) do origin = origin and math.min(origin, t[1]) or t[1] end
  end
  for i, c in ipairs(clocks) do
    out[i] = {}
    for k, t in ipairs(c.clock or {}) do
      local flat = {}
      for _, p in ipairs(c.ran and c.ran[k] or {}) do flat[#flat + 1] = p[1]; flat[#flat + 1] = p[2] end
      out[i][k] = { t[1] - origin, t[2] - t[1], flat }
    end
  end
  return { origin = origin, passes = out }
end

-- matrix_report(m, bytes) -> the report's "matrix" section: n x n lists (row = sender) with
-- null on the diagonal, bandwidth in GB/s and ping-pong latency in us.
-- Above DENSE_MAX ranks (or when fewer than half the pairs were measured: a sampled plan) the
-- section is sparse instead: layout = "pairs", pairs = list of {a, b, GB/s a->b, GB/s b->a,
-- latency us}, a < b (docs/scale.md): n x n lists would be 2 x 67M entries at 8192 ranks. Its
-- values are rounded to SPARSE_DIGITS significant digits (far below the streams' noise): 17-digit
-- doubles made it 150 MB of report.json at 16 384 ranks, 2 M pairs (full_diag then writes no
-- per-pair results: they repeat these pairs).
M.DENSE_MAX = 1024
M.SPARSE_DIGITS = 4
local floor, log10 = math.floor, math.log10
local function digits(x)
  if type(x) ~= "number" or x == 0 or x ~= x or x == math.huge or x == -math.huge then return x end
  local k = M.SPARSE_DIGITS - 1 - floor(log10(math.abs(x)))
  if k >= 0 then local e = 10 ^ k; return floor(x * e + 0.5) / e end
  local d = 10 ^ -k
  return floor(x / d + 0.5) * d
end
-- sparse(m) -> true when matrix_report(m) writes the sparse layout
function M.sparse(m)
  return m.n > M.DENSE_MAX or (m.pairs ~= nil and #m.pairs < m.n * (m.n - 1) / 4)
end
M.PASSES_MAX_RANKS = 64  -- report.json keeps each pass's matrix up to this many ranks

function M.matrix_report(m, bytes)
  local null = require("commscript").json.null
  if M.sparse(m) then
    local list = {}
    for a = 1, m.n do
      for b, x in pairs(m.bw[a]) do
        if b > a then
          list[#list + 1] = { a - 1, b - 1, digits(x), digits(m.bw[b][a]) or null, digits(m.lat[a][b]) or null }
        end
      end
    end
    table.sort(list, function(x, y) return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2]) end)
    return { metric = "bandwidth", unit = "GB/s", n = m.n, layout = "pairs", pairs = list, bytes = bytes,
             columns = { "a", "b", "a_to_b", "b_to_a", "latency_us" } }
  end
  local function dense(t)
    local out = {}
    for a = 1, m.n do
      out[a] = {}
      for b = 1, m.n do out[a][b] = t[a][b] or null end
    end
    return out
  end
  local rep = { metric = "bandwidth", unit = "GB/s", n = m.n, rows = "sender", values = dense(m.bw),
                latency_us = dense(m.lat), bytes = bytes }
  -- each pass's own matrix on small fleets (values is their median): the time series an
  -- intermittent fault shows in, and what cs.evidence's spike counts were made from
  if m.passes and #m.passes > 1 and m.n <= M.PASSES_MAX_RANKS then
    rep.passes = {}
    for i, bw in ipairs(m.passes) do rep.passes[i] = dense(bw) end
  end
  local clocks = m.clocks or (m.clock and { pass_clock(m) })
  if clocks and m.n <= M.PASSES_MAX_RANKS then rep.clocks = clocks_report(clocks) end
  return rep
end

-- one pair: ping-pong latency (p50 us; false when light) and the GB/s this rank sent and
-- received streaming (stream_both)
local function measure_pair(comm, me, peer, args, light)
  local lat = false
  if not light then
    lat = comm:pingpong { peer = peer, bytes = args.lat_bytes or 8, iters = args.lat_iters or 100, warmup = 10 }.p50_us
  end
  local sent, recv = stream_both(comm, me, peer, args)
  return lat, sent, recv
end

-- this rank's share of one round, args.repeats times: { partner, lat_us, GB/s sent, pair value,
-- GB/s received } appended to mine (lat false when light; with args.pair, the streams only when
-- not light and the pair value from pair_bench, else the pair value false)
local function measure_round(ctx, round, args, light, mine)
  local me = ctx.rank
  for _ = 1, args.repeats or 1 do
    local peer = pairs_mod.partner(round, me)
    if peer then
      local lat, bw, rbw = false, false, false
      if not (light and args.pair) then lat, bw, rbw = measure_pair(ctx.comm, me, peer, args, light) end
      local pv = false
      if args.pair then
        for _ = 1, args.pair.repeats or 1 do
          local x = pair_value(ctx.comm, peer, args.pair)
          if not pv or x < pv then pv = x end
        end
      end
      mine[#mine + 1] = { peer, lat, bw, pv, rbw }
    end
  end
end

-- rank 0 after round i: stop when args.deadline passed; after round 1 of the full plan, when the
-- other rounds would not fit args.budget_s, the reduced plan to switch to (kind, cycles, reason).
-- round_s: round 1's time when measured before the call (args.first), else now - t0.
local function decide(ctx, args, plan, nrounds, i, t0, round_s)
  local now = native.now()
  local decision = { stop = args.deadline ~= nil and now > args.deadline }
  if i == 1 and not args.plan and args.budget_s and nrounds > 1 then
    local left = args.budget_s - (now - t0)
    round_s = round_s or now - t0
    plan.round_s = round_s
    if (nrounds - 1) * round_s > left then
      local cycles = M.sampled_cycles(ctx.hosts, left, round_s)
      if cycles >= 1 then
        decision.kind, decision.cycles = "sampled", cycles
      else
        decision.kind = "hosts"
      end
      decision.reason = ("%d rounds of %.3f s would take %.1f s, %.1f s are left of the pattern's budget"):format(
        nrounds - 1, round_s, (nrounds - 1) * round_s, left)
    end
  end
  return decision
end

-- the rounds once decision switched the plan: round 1 (round) is kept; the new plan follows it
local function switched_rounds(ctx, round, decision)
  local next_rounds = decision.kind == "sampled" and M.sampled_plan(ctx.hosts, { cycles = decision.cycles, inter_first = true })
    or M.host_plan(ctx.hosts)
  if decision.kind == "hosts" and #next_rounds == 0 then next_rounds = {} end
  local rounds = { round }
  for _, r in ipairs(next_rounds) do rounds[#rounds + 1] = r end
  return rounds
end

-- first_round(ctx, args) -> { mine, round_s }: round 1 of the full plan, measured as matrix(ctx,
-- args) measures it (collective), for matrix's args.first: what the pattern will cost, priced by
-- the pattern's own round, and not measured twice.
function M.first_round(ctx, args)
  local t = native.now()
  local mine = {}
  if ctx.size >= 2 then
    measure_round(ctx, pairs_mod.round_robin_round(ctx.size, 1), args, false, mine)
    ctx.comm:barrier()
  end
  return { mine = mine, round_s = native.now() - t }
end

-- rank 0: every rank's rows (all) into bw[a][b] (GB/s, a sent to b: the best), lat[a][b] (us,
-- the best, both ways) and the list of pairs {a, b, value} (the pair value, or the slower way's
-- time per args.bytes in us)
local function fill_matrix(all, n, args, bw, lat)
  local list = {}
  for r, rows in ipairs(all) do
    for _, v in ipairs(rows) do
      local a, b = r, v[1] + 1
      if v[3] and (not bw[a][b] or v[3] > bw[a][b]) then bw[a][b] = v[3] end  -- a sent to b
      if v[2] and (not lat[a][b] or v[2] < lat[a][b]) then lat[a][b], lat[b][a] = v[2], v[2] end
    end
  end
  local bytes = args.bytes or 262144
  local pv = {}
  for r, rows in ipairs(all) do
    for _, v in ipairs(rows) do
      local a, b = math.min(r, v[1] + 1), math.max(r, v[1] + 1)
      local key = a * (n + 1) + b
      if v[4] and (not pv[key] or v[4] < pv[key]) then pv[key] = v[4] end
    end
  end
  for a = 1, n do
    for b = a + 1, n do
      if args.pair then
        local v = pv[a * (n + 1) + b]
        if v then list[#list + 1] = { a - 1, b - 1, v } end
      else
        local slow = math.min(bw[a][b] or 0, bw[b][a] or 0)
        if slow > 0 then list[#list + 1] = { a - 1, b - 1, bytes / slow / 1e3 } end  -- GB/s -> us
      end
    end
  end
  return list
end

-- matrix(ctx, args) -> { bw = n x n GB/s (row = sender), lat = n x n us, pairs = { {a, b, us} },
--   n, plan = { kind, rounds_planned, rounds_run, rounds_full, round_s, reason } }: bw, lat and
--   pairs complete on rank 0 only (the other ranks get empty rows: they measured, rank 0 holds).
-- The pairs of each round measure at once on ctx.comm: ping-pong latency (p50 of
-- args.lat_iters round trips of args.lat_bytes) and streaming bandwidth in both directions
-- (args.bytes x args.window per iteration, args.iters iterations), args.repeats times keeping
-- the best. `pairs` carries, per unordered pair, the time one message of args.bytes takes at
-- the slower direction's bandwidth: larger is worse, for localize(); with args.pair ({ bytes,
-- iters, repeats, field }: what localise's re-tests measure) the pair's sendrecv value
-- (pair_bench, the best of args.pair.repeats) instead, measured in the same round.
-- The plan: args.plan (rounds) when given; else the full round robin while it fits
-- args.budget_s (seconds from the call, rank 0's clock; none: no limit): rank 0 times the first
-- round and, when n-1 rounds would not fit, switches to sampled_plan (as many cycles as fit)
-- or, when not even one cycle fits, host_plan; with args.pair, the rounds after the switch are
-- light (plan.light): only the pair value, no latency or bandwidth (those pairs stay empty in
-- bw and lat). args.deadline (cs.now() seconds) stops the
-- rounds wherever they are. args.stages (cs.stages) gets the count "rounds". args.first
-- (first_round's): round 1, measured before the call, is not measured again; its round_s
-- prices the plan.
-- merge_passes(list, bytes) -> matrix: several matrices of the same full plan measured one after
--   another (rank 0's), as one: each pair direction's GB/s the median over the passes (a steady
--   fault is slow in every pass, an intermittent one only in some), pairs recomputed from them
--   (the slower direction's time per message of `bytes`), lat and plan the first pass's;
--   .passes holds every pass's bw (cs.evidence.off counts their slow directions).
function M.merge_passes(list, bytes)
  local first = list[1]
  if #list == 1 then first.passes, first.clocks = { first.bw }, { pass_clock(first) }; return first end
  local n, bw, passes, clocks = first.n, {}, {}, {}
  for i, m in ipairs(list) do passes[i], clocks[i] = m.bw, pass_clock(m) end
  for a = 1, n do
    bw[a] = {}
    for b = 1, n do
      local xs = {}
      for _, m in ipairs(list) do if m.bw[a] and m.bw[a][b] then xs[#xs + 1] = m.bw[a][b] end end
      if #xs > 0 then bw[a][b] = stats.median(xs) end
    end
  end
  local pairs_list = {}
  for a = 1, n do
    for b = a + 1, n do
      local slow = math.min(bw[a][b] or 0, bw[b][a] or 0)
      if slow > 0 then pairs_list[#pairs_list + 1] = { a - 1, b - 1, bytes / slow / 1e3 } end
    end
  end
  return { bw = bw, lat = first.lat, pairs = pairs_list, n = n, plan = first.plan, passes = passes, clocks = clocks }
end

function M.matrix(ctx, args)
  local n, me = ctx.size, ctx.rank
  local t0 = native.now()
  local plan = { kind = args.plan and "given" or "full", rounds_full = rounds_of(n), reason = args.plan and "given by the caller" or "every pair fits the budget" }
  -- rounds nil: the full plan, built one round at a time (all of it at once is n^2/2 pairs on
  -- every rank: 768 MB at 4096 ranks)
  local rounds = args.plan
  local nrounds = rounds and #rounds or plan.rounds_full
  local mine = {}  -- { partner, lat_us, GB/s sent } per round this rank took part in
  local done, cut = 0, false
  -- a reduced plan measures only the pair value, once, in its later rounds (args.light: all of them)
  local light = args.light == true
  local i = 0
  local first = args.first  -- round 1 of the full plan, measured before the call (first_round)
  if first then for _, row in ipairs(first.mine) do mine[#mine + 1] = row end end
  local clock, ran = {}, {}  -- rank 0: each round's { start, end } (cs.now()) and its pairs
  while i < nrounds do
    i = i + 1
    local round = rounds and rounds[i] or pairs_mod.round_robin_round(n, i)
    local given = i == 1 and first and not args.plan
    local began = native.now()
    if not given then
      measure_round(ctx, round, args, light, mine)
      ctx.comm:barrier()  -- rounds do not overlap
    end
    if me == 0 then
      clock[#clock + 1] = given and { t0 - first.round_s, t0 } or { began, native.now() }
      ran[#ran + 1] = round
    end
    done = done + 1
    if args.stages then args.stages:count("rounds", 1) end
    local decision = false
    if me == 0 then decision = decide(ctx, args, plan, nrounds, i, t0, given and first.round_s or nil) end
    if i == 1 or args.deadline then decision = ctx.comm:broadcast_value(decision, 0) end
    if decision and decision.kind then
      rounds = switched_rounds(ctx, round, decision)
      nrounds = #rounds
      plan.kind, plan.reason, plan.cycles = decision.kind, decision.reason, decision.cycles
      light = true  -- the later rounds measure only what localisation takes (no latency)
      plan.light = light
    end
    if decision and decision.stop then cut = i < nrounds; break end
  end
  plan.rounds_planned, plan.rounds_run, plan.cut = nrounds, done, cut
  if cut then plan.reason = plan.reason .. "; cut short: the pattern's deadline passed" end
  local all = ctx.comm:gather_value(mine, 0)
  local bw, lat = {}, {}
  for r = 1, n do bw[r], lat[r] = {}, {} end
  local list = {}
  if me == 0 then list = fill_matrix(all, n, args, bw, lat) end
  return { bw = bw, lat = lat, pairs = list, n = n, plan = plan, clock = clock, ran = ran }
end

return M
