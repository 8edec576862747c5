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
-- args: { op = "sendrecv", bytes =, iters =, warmup =, field = "min_us" }
local pairs_mod = require "cs.pairs"
local M = {}

local function bench_value(comm, args)
  local r = comm:bench { op = args.op or "sendrecv", bytes = args.bytes, iters = args.iters or 10,
                         warmup = args.warmup or 2 }
  return r[args.field or "min_us"]
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
  ctx.comm:barrier()
  local all = ctx.comm:allgather_value(ctx.rank == math.min(a, b) and v or false)
  return all[math.min(a, b) + 1]
end

function M.confirm(ctx, suspects, good, args, factor)
  if #suspects == 0 or #good < 2 then return suspects end
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

return M
