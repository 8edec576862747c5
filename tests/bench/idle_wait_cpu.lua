-- What ranks waiting in a collective cost the machine: rank 0 computes for --seconds while the
-- others wait in a barrier; prints each waiting rank's CPU time over that wait, as seconds and
-- as a share of the wait (engine/core/poll_wait.hpp paces their polls). Rank 0's own CPU time
-- over the same interval is the baseline (about the whole wait: it spins).
--   mpirun -np 4 --oversubscribe build/commscript tests/bench/idle_wait_cpu.lua --seconds 3
local cs = require "commscript"
local recipe = cs.recipe { name = "idle_wait_cpu", version = "1.0.0", options = { seconds = { 3, "seconds rank 0 computes" } } }
function recipe.run(ctx)
  ctx.comm:barrier()
  local c0, t0 = os.clock(), cs.now()
  if ctx.rank == 0 then
    local x = 0
    while cs.now() - t0 < ctx.opt.seconds do x = x + 1 end
  end
  ctx.comm:barrier()
  local wall, cpu = cs.now() - t0, os.clock() - c0
  local all = ctx.comm:gather_value({ cpu, wall }, 0)
  if ctx.rank == 0 then
    local s = {}
    for i = 2, #all do s[#s + 1] = string.format("rank %d %.3f s (%.1f %%)", i - 1, all[i][1], 100 * all[i][1] / all[i][2]) end
    print(string.format("idle_wait_cpu: rank 0 (computing) %.3f s of %.3f s; waiting: %s", all[1][1], all[1][2],
      table.concat(s, ", ")))
  end
end
return recipe
