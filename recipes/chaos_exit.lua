-- Detection self-test: one rank dies; the job ends and report.json names the dead rank.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_exit",
  version = "1.1.1",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank that dies must appear in the incident",
  options = cs.selftest.options {
    rank = "rank that dies",
    after = "operations before it dies",
    status = { 99, "its exit status", min = 1, max = 255 },
    deadline = { 10, max = 604800 },
  },
}

function recipe.run(ctx)
  cs.selftest.run(ctx, { kind = "exit", status = ctx.opt.status })
end

return recipe
