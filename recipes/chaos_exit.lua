-- Detection self-test: one rank dies; the job ends and report.json names the dead rank.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_exit",
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank that dies must appear in the incident",
  options = {
    rank = { -1, "rank that dies (-1: the last)" },
    after = { 5, "operations before it dies", min = 0 },
    status = { 99, "its exit status", min = 1, max = 255 },
    deadline = { 10, "deadline of each operation, s", type = "number", min = 0.1 },
  },
}

function recipe.run(ctx)
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "chaos_exit needs at least 2 ranks", 0) end
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  ctx.comm:set_timeout(ctx.opt.deadline)
  cs.chaos.inject { kind = "exit", ranks = { target }, after = ctx.comm:seq() + ctx.opt.after, status = ctx.opt.status }
  local t, r = ctx.comm:tensor("float32", 1024), ctx.comm:tensor("float32", 1024)
  for _ = 1, ctx.opt.after + 10 do ctx.comm:allreduce(t, r) end
  error(("self-test failed: rank %d was told to exit, yet every all-reduce completed"):format(target))
end

return recipe
