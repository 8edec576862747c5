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
  cs.selftest.run(ctx, { kind = "desync", op = ctx.opt.calls, recv_elements = 4096 })
end

return recipe
