-- Detection self-test: one rank stops arriving; the watchdog must name it within the deadline
-- and end the job with exit 5 (see the incident in report.json).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_hang",
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank that stops arriving must be named by the watchdog (exit 5)",
  options = {
    rank = { -1, "rank that hangs (-1: the last)" },
    after = { 5, "operations before it hangs", min = 0 },
    deadline = { 3, "deadline of each operation, s", type = "number", min = 0.1 },
  },
}

function recipe.run(ctx)
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "chaos_hang needs at least 2 ranks", 0) end
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  ctx.comm:set_timeout(ctx.opt.deadline)
  cs.chaos.inject { kind = "hang", ranks = { target }, after = ctx.comm:seq() + ctx.opt.after }
  local t, r = ctx.comm:tensor("float32", 1024), ctx.comm:tensor("float32", 1024)
  for _ = 1, ctx.opt.after + 10 do ctx.comm:allreduce(t, r) end
  error(("self-test failed: rank %d was told to hang, yet every all-reduce completed"):format(target))
end

return recipe
