-- What short waits of idle ranks cost a pair measured alone (full_diag's re-tests: one pair
-- measures while every other rank waits in a barrier, a few milliseconds, then the next pair).
-- Ranks 0 and 1 time `--rounds` pair_bench samples (`--bytes`, 3 iterations, their min_us)
-- twice: first with the other ranks waiting in one barrier for the whole phase (the
-- baseline: a long wait; the samples start after --settle samples, once the waiting polls are
-- far apart), then with a barrier of every rank after each sample (the re-tests' case: each
-- wait a few milliseconds). Prints both medians and their ratio (engine/core/poll_wait.hpp paces the
-- waiting ranks' polls). On namespace hosts: scripts/idle_wait_netns.py.
--   mpirun -np 16 --oversubscribe build/commscript tests/bench/idle_wait_pair.lua
local cs = require "commscript"
local recipe = cs.recipe {
  name = "idle_wait_pair",
  version = "1.0.0",
  options = { rounds = { 40, "samples per phase" },
              settle = { 100, "samples before the first phase's" },
              bytes = { default = "256K", help = "pair message", type = "size" } },
}

function recipe.run(ctx)
  local c, me, o = ctx.comm, ctx.rank, ctx.opt
  local function sample()
    if me > 1 then return nil end
    return c:pair_bench { peer = 1 - me, bytes = o.bytes, iters = 3, warmup = 1 }.min_us
  end
  local long, short = {}, {}
  c:barrier()
  -- the waiting ranks' polls settle first (a count both ranks of the pair agree on: a time
  -- limit on each rank's own clock would leave one of them waiting for a sample that never comes)
  for _ = 1, o.settle do sample() end
  for i = 1, o.rounds do long[i] = sample() end
  c:barrier()
  for i = 1, o.rounds do
    short[i] = sample()
    c:barrier()
  end
  if me == 0 then
    local a, b = cs.stats.median(long), cs.stats.median(short)
    print(string.format("idle_wait_pair: %d ranks, %s pair: alone %.0f us, with %d ranks waiting %.0f us: %.2fx",
      ctx.size, cs.format_size(o.bytes), a, ctx.size - 2, b, b / a))
  end
end
return recipe
