-- Detection self-test: one rank calls a different operation (a classic cause of NCCL hangs);
-- it must be reported as a desync: which operation each rank called, from which line (exit 5).
-- With call verification (the default) that happens at once; with --verify=false the deadline's
-- watchdog finds the mismatch.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_desync",
  version = "1.2.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank calling a different operation must be reported as a mismatch (exit 5)",
  options = cs.selftest.options {
    rank = "rank that calls something else",
    after = "operations before it does",
    calls = { default = "barrier", help = "what it calls instead of the all-reduce",
              choices = { "barrier", "broadcast", "allgather" } },
    deadline = { 3 },
    verify = { true, "call verification (false: left to the deadline's watchdog)" },
  },
}

function recipe.run(ctx)
  ctx.comm:set_verify(ctx.opt.verify)
  cs.selftest.run(ctx, { kind = "desync", op = ctx.opt.calls, recv_elements = 4096 })
end

return recipe
