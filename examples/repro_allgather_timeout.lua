-- Reproduces a customer's failure: "watchdog caught collective operation timeout ... ALLGATHER
-- ... ran for 600500 ms". A training-like loop (gradient all-reduce, then a parameter
-- all-gather) runs for a number of steps; the TOML file beside this recipe makes one rank never
-- join the all-gather at a given step, the way the customer's job hung.
--
--   mpirun -np 4 commscript --config examples/repro_allgather_timeout.toml \
--       examples/repro_allgather_timeout.lua
--
-- Expected diagnosis (exit 5, within the deadline plus a few seconds):
--   timeout: allgather #N (...B, world) after 5.0 s; missing ranks: 2 (host ..., stuck)
-- report.json holds the incident (missing ranks, which operation each rank was in), every
-- rank's flight recorder (OUT/flight/rank-*.json) and the injection that caused it; send it
-- back, and `commscript --replay report.json` runs the same thing again.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "repro_allgather_timeout",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "a training loop whose all-gather one rank never joins (customer repro)",
  options = {
    steps = { 20, "training steps", min = 1 },
    grad = { default = "1M", help = "gradient bytes all-reduced per step", type = "size" },
    params = { default = "256K", help = "parameter bytes each rank contributes to the all-gather", type = "size" },
  },
}

function recipe.run(ctx)
  local g = cs.tensor("float32", math.floor(ctx.opt.grad / 4))
  local gsum = cs.tensor("float32", math.floor(ctx.opt.grad / 4))
  local p = cs.tensor("float32", math.floor(ctx.opt.params / 4))
  local all = cs.tensor("float32", math.floor(ctx.opt.params / 4) * ctx.size)
  for step = 1, ctx.opt.steps do
    g:fill_pattern(ctx.rank, "sum", step)
    ctx.comm:allreduce(g, gsum)
    p:fill_pattern(ctx.rank, "sum", step)
    ctx.comm:allgather(p, all)
    local wrong = ctx.comm:check("allreduce", gsum, { salt = step }) + ctx.comm:check("allgather", all, { salt = step })
    ctx.report:result { kind = "step", step = step, wrong = wrong }
    ctx.log("step %d ok", step)
  end
  ctx.log("all %d steps completed: the failure did not reproduce", ctx.opt.steps)
end

return recipe
