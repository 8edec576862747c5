-- Detection self-test: one rank calls a different operation (a classic cause of NCCL hangs);
-- the watchdog must report the mismatch: which operation each rank called (exit 5).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_desync",
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank calling a different operation must be reported as a mismatch (exit 5)",
  options = {
    rank = { -1, "rank that calls something else (-1: the last)" },
    after = { 5, "operations before it does", min = 0 },
    calls = { default = "barrier", help = "what it calls instead of the all-reduce",
              choices = { "barrier", "broadcast", "allgather" } },
    deadline = { 3, "deadline of each operation, s", type = "number", min = 0.1 },
  },
}

function recipe.run(ctx)
  local target = ctx.opt.rank < 0 and ctx.size - 1 or ctx.opt.rank
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "chaos_desync needs at least 2 ranks", 0) end
  if target >= ctx.size then cs.raise(cs.exit.bad_input, ("--rank %d is not a rank"):format(target), 0) end
  ctx.comm:set_timeout(ctx.opt.deadline)
  cs.chaos.inject { kind = "desync", ranks = { target }, after = ctx.comm:seq() + ctx.opt.after, op = ctx.opt.calls }
  local t, r = ctx.comm:tensor("float32", 1024), ctx.comm:tensor("float32", 4096)
  for _ = 1, ctx.opt.after + 10 do ctx.comm:allreduce(t, r) end
  error(("self-test failed: rank %d was told to desync, yet every all-reduce completed"):format(target))
end

return recipe
