-- Point-to-point measurement patterns over a communicator. Every function here is collective:
-- all ranks of ctx.comm call it with the same arguments.
--
-- round_robin(ctx, args) -> list of { a, b, value } for every unordered pair, measured in
--   rounds of disjoint pairs (n-1 rounds of n/2 pairs at once), repeated args.repeats times
--   (default 1) keeping the smallest value (noise only adds time).
-- pair(ctx, a, b, args) -> value: the pair alone, every other rank idle.
-- confirm(ctx, suspects, good, args, factor) -> list of confirmed suspects: each suspect is
--   re-measured alone against a known-good partner and kept only when it is still more than
--   `factor` times the time of two known-good ranks measured the same way.
-- args: { op = "sendrecv", bytes =, iters =, warmup =, field = "min_us" }: `field` of comm:bench's
--   result; the default, min_us, is the fastest iteration of the sampled pass (noise only adds
--   time); "time_us" would be the whole-loop headline (docs/timing.md). `iters` sizes the pass
--   the field comes from (the headline loop runs once when the field is a sampled one).
local pairs_mod = require "cs.pairs"
local M = {}

-- The headline's fields; every other field of comm:bench comes from its sampled pass.
local HEADLINE = { time_us = true, time_rank_min_us = true, time_rank_max_us = true, algbw = true, busbw = true }

local function bench_value(comm, args)
  local field, n = args.field or "min_us", args.iters or 10
  -- A value from the sampled pass needs no headline loop: run it once only.
  local r = comm:bench { op = args.op or "sendrecv", bytes = args.bytes, iters = HEADLINE[field] and n or 1,
                         samples = n, warmup = args.warmup or 2 }
  return r[field]
end

function M.round_robin(ctx, args)
  local best = {}
  for _ = 1, args.repeats or 1 do
    for _, round in ipairs(pairs_mod.round_robin(ctx.size)) do
      local color = -1
      for i, p in ipairs(round) do
        if p[1] == ctx.rank or p[2] == ctx.rank then color = i end
      end
      local sub = ctx.comm:split(color, ctx.rank)
      local mine = false
      if sub then
        local v = bench_value(sub, args)
        local partner = pairs_mod.partner(round, ctx.rank)
        if ctx.rank < partner then mine = { ctx.rank, partner, v } end
        sub:free()  -- now, not at the next garbage collection (NCCL communicators hold GPU memory)
      end
      ctx.comm:barrier()  -- idle ranks wait here, yielding the CPU
      for _, v in ipairs(ctx.comm:allgather_value(mine)) do
        if v then
          local key = v[1] * 65536 + v[2]
          if not best[key] or v[3] < best[key][3] then best[key] = v end
        end
      end
    end
  end
  local keys, out = {}, {}
  for k in pairs(best) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = best[k] end
  return out
end

function M.pair(ctx, a, b, args)
  local member = ctx.rank == a or ctx.rank == b
  local sub = ctx.comm:split(member and 0 or -1, ctx.rank)
  local v = false
  for _ = 1, args.repeats or 1 do
    if sub then
      local x = bench_value(sub, args)
      if not v or x < v then v = x end
    end
  end
  if sub then sub:free() end
  ctx.comm:barrier()
  local all = ctx.comm:allgather_value(ctx.rank == math.min(a, b) and v or false)
  return all[math.min(a, b) + 1]
end

function M.confirm(ctx, suspects, good, args, factor)
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

-- localise(ctx, values, rank_hosts, args) -> { hosts = {...}, ranks = {...}, links = {...} }
--   cs.diagnose.localise with pair() as its re-test (sendrecv, the fastest of args.repeats):
--   suspects from the pattern's values, each re-measured alone and named only when still slow.
function M.localise(ctx, values, rank_hosts, args)
  return require("cs.diagnose").localise(values, rank_hosts, args, function(a, b) return M.pair(ctx, a, b, args) end)
end

-- matrix_report(m, bytes) -> the report's "matrix" section: n x n lists (row = sender) with
-- null on the diagonal, bandwidth in GB/s and ping-pong latency in us.
-- Above DENSE_MAX ranks (or when fewer than half the pairs were measured: a sampled plan) the
-- section is sparse instead: layout = "pairs", pairs = list of {a, b, GB/s a->b, GB/s b->a,
-- latency us}, a < b (docs/scale.md): n x n lists would be 2 x 67M entries at 8192 ranks.
M.DENSE_MAX = 1024
function M.matrix_report(m, bytes)
  local null = require("commscript").json.null
  if m.n > M.DENSE_MAX or (m.pairs and #m.pairs < m.n * (m.n - 1) / 4) then
    local list = {}
    for a = 1, m.n do
      for b, x in pairs(m.bw[a]) do
        if b > a then list[#list + 1] = { a - 1, b - 1, x, m.bw[b][a] or null, m.lat[a][b] or null } end
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
  return { metric = "bandwidth", unit = "GB/s", n = m.n, rows = "sender", values = dense(m.bw),
           latency_us = dense(m.lat), bytes = bytes }
end

-- matrix(ctx, args) -> { bw = n x n GB/s (row = sender), lat = n x n us, pairs = { {a, b, us} } }
-- Every pair in round-robin rounds (disjoint pairs at once): ping-pong latency (p50 of
-- args.lat_iters round trips of args.lat_bytes) and streaming bandwidth in both directions
-- (args.bytes x args.window per iteration, args.iters iterations), repeated args.repeats
-- times keeping the best. `pairs` carries, per unordered pair, the time one message of
-- args.bytes takes at the slower direction's bandwidth: larger is worse, for localize().
function M.matrix(ctx, args)
  local n = ctx.size
  local bw, lat = {}, {}
  for i = 1, n do bw[i], lat[i] = {}, {} end
  for _ = 1, args.repeats or 1 do
    for _, round in ipairs(pairs_mod.round_robin(n)) do
      local color = -1
      for i, p in ipairs(round) do
        if p[1] == ctx.rank or p[2] == ctx.rank then color = i end
      end
      local sub = ctx.comm:split(color, ctx.rank)
      local mine = false
      if sub then
        local me, peer = sub:rank(), 1 - sub:rank()
        local l = sub:pingpong { peer = peer, bytes = args.lat_bytes or 8, iters = args.lat_iters or 100, warmup = 10 }
        local out = {}
        for sender = 0, 1 do
          local g = sub:stream { peer = peer, sender = me == sender, bytes = args.bytes or 262144,
                                 window = args.window or 8, iters = args.iters or 5, warmup = 1 }
          if me == sender then out[sender] = g end
        end
        mine = { rank = ctx.rank, partner = pairs_mod.partner(round, ctx.rank), lat = l.p50_us, bw = out[me] }
        sub:free()
      end
      ctx.comm:barrier()
      for _, v in ipairs(ctx.comm:allgather_value(mine)) do
        if v then
          local a, b = v.rank + 1, v.partner + 1
          if not bw[a][b] or v.bw > bw[a][b] then bw[a][b] = v.bw end  -- a sent to b
          if not lat[a][b] or v.lat < lat[a][b] then lat[a][b], lat[b][a] = v.lat, v.lat end
        end
      end
    end
  end
  local list = {}
  local bytes = args.bytes or 262144
  for a = 1, n do
    for b = a + 1, n do
      local slow = math.min(bw[a][b] or 0, bw[b][a] or 0)
      if slow > 0 then list[#list + 1] = { a - 1, b - 1, bytes / slow / 1e3 } end  -- GB/s -> us
    end
  end
  return { bw = bw, lat = lat, pairs = list, n = n }
end

return M
