-- Detection self-test: one rank stops arriving; the watchdog must name it within the deadline
-- and end the job with exit 5 (see the incident in report.json).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "chaos_hang",
  version = "1.1.0",
  requires = ">=0.1, <1.0",
  summary = "self-test: a rank that stops arriving must be named by the watchdog (exit 5)",
  options = cs.selftest.options {
    rank = "rank that hangs",
    after = "operations before it hangs",
    deadline = { 3 },
  },
}

function recipe.run(ctx)
  cs.selftest.run(ctx, { kind = "hang" })
end

return recipe
