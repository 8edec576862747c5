-- Detection self-test: one rank dies; the job ends and report.json names the dead rank.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_exit",
  version = "1.1.1",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank that dies must appear in the incident",
  options = {
    rank = { -1, "rank that dies (-1: the last)" },
    after = { 5, "operations before it dies", min = 0 },
    status = { 99, "its exit status", min = 1, max = 255 },
    deadline = { 10, "deadline of each operation, s", type = "number", min = 0.1, max = 604800 },
  },
}

function recipe.run(ctx)
  cs.selftest.run(ctx, { kind = "exit", status = ctx.opt.status })
end

return recipe
