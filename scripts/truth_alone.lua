-- The planted fault measured alone, for scripts/truth_harness.py: three ranks, one on each of
-- three namespace hosts (the harness puts the fault's ends on ranks 0 and 1), measure the pairs
-- 0-1, 0-2 and 1-2 in turn, each pair alone (the other ranks wait at its allgather), `rounds`
-- rounds interleaved, as full_diag's re-tests measure a pair (pair_bench of `bytes`, `iters`
-- timed iterations, its min_us). Rank 0 puts each pair's samples in the report ("alone").
-- Ground truth for the harness's "alone" column, not a diagnosis: it knows where the fault is.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "truth_alone",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "three pairs measured alone, in turn (truth harness)",
  options = {
    bytes = { default = "256K", help = "message size of a pair", type = "size" },
    iters = { 3, "timed iterations per sample (the minimum is kept)", type = "number", min = 1 },
    rounds = { 7, "interleaved rounds", type = "number", min = 1 },
  },
}

function recipe.run(ctx)
  if ctx.size < 3 then cs.raise(cs.exit.bad_input, "truth_alone needs at least 3 ranks, got " .. ctx.size) end
  local c, me, o = ctx.comm, ctx.rank, ctx.opt
  local pairs = { { 0, 1 }, { 0, 2 }, { 1, 2 } }
  local samples = { {}, {}, {} }
  for _ = 1, o.rounds do
    for i, p in ipairs(pairs) do
      local v = 0
      if me == p[1] or me == p[2] then
        local peer = me == p[1] and p[2] or p[1]
        v = c:pair_bench { peer = peer, bytes = o.bytes, iters = o.iters, warmup = 1 }.min_us
      end
      -- rank 0 is not in pair 1-2: it takes that pair's value from rank 1; the allgather also
      -- keeps the next pair from starting before this one ends
      local all = c:allgather_value(v)
      if me == 0 then table.insert(samples[i], math.max(all[1], all[2], all[3])) end
    end
  end
  if me == 0 then
    local s = cs.array { cs.array(samples[1]), cs.array(samples[2]), cs.array(samples[3]) }
    ctx.report:set("alone", { bytes = o.bytes, pairs = cs.array { "0-1", "0-2", "1-2" }, samples_us = s })
  end
  return 0
end

return recipe
