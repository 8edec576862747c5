-- A bundled recipe (CS_INNER_RECIPE, default recipes/bw_sweep.lua) run after one more one-byte
-- broadcast from rank 0: the same run with Open MPI's shared-memory path in its other
-- small-message state (docs/timing.md), for scripts/compare_anchors.sh's "cs+1" column, as
-- plain_loop --prior-bcasts 1 is for "plain+1". Not a recipe of its own: it needs --trusted
-- (dofile, os.getenv) and takes the inner recipe's options.
--   mpirun -np 2 build/commscript --trusted scripts/anchors/after_bcast.lua --ops allreduce --min 8 --max 8
local cs = require "commscript"
local inner = dofile(os.getenv("CS_INNER_RECIPE") or "recipes/bw_sweep.lua")
local run = inner.run
function inner.run(ctx)
  local one = cs.tensor("uint8", 1)
  ctx.comm:broadcast(one, one, 0)
  return run(ctx)
end
return inner
