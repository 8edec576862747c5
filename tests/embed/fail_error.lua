-- An embedded run's recipe error: rank 1 raises after the first barrier while the others wait
-- in a second one (they must be released, and the host must get exit code 2 on every rank).
local cs = require "commscript"
local recipe = cs.recipe { name = "fail_error", version = "1.0.0", requires = ">=0.1, <1.0",
                           summary = "rank 1 raises an error mid-run" }
function recipe.run(ctx)
  ctx.comm:barrier()
  if ctx.rank == 1 then error("deliberate failure on rank 1") end
  ctx.comm:barrier()
end
return recipe
