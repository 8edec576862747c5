-- A short stress test to copy and adapt: all-reduces of random sizes for a while, every result
-- checked, the slowest iterations reported. Run it as
--   mpirun -np 4 commscript examples/custom_stress.lua --seconds 10 --max 4M
local cs = require "commscript"

local recipe = cs.recipe {
  name = "custom_stress",
  version = "1.0.0",
  requires = ">=0.1, <1.0",
  summary = "random-size all-reduces for a while, every result checked",
  options = {
    seconds = { 5, "how long to run", type = "number", min = 0 },
    min = { default = "1K", help = "smallest message", type = "size" },
    max = { default = "1M", help = "largest message", type = "size" },
    dtype = { default = "float32", help = "element type", choices = cs.dtypes },
  },
}

function recipe.run(ctx)
  local o = ctx.opt
  -- Every rank must run the same sequence of sizes: draw them from a generator seeded alike
  -- (--seed), and let rank 0 decide when time is up.
  local state = ctx.seed * 2654435761 % 4294967296 + 1
  local function next_size()
    state = (1103515245 * state + 12345) % 2147483648
    local lo, hi = math.log(o.min), math.log(o.max)
    return math.floor(math.exp(lo + (hi - lo) * state / 2147483648))
  end
  local start, n, slowest = cs.now(), 0, nil
  while true do
    local go = ctx.comm:broadcast_value(cs.now() - start < o.seconds, 0)
    if not go then break end
    local bytes = next_size()
    local r = ctx.comm:bench { op = "allreduce", bytes = bytes, dtype = o.dtype, iters = 5, warmup = 1 }
    r.kind = "stress"
    ctx.report:result(r)  -- a result with wrong > 0 makes the run exit 4
    n = n + 1
    if not slowest or r.p99_us > slowest.p99_us then slowest = r end
  end
  ctx.log("%d measurements in %.1f s; slowest p99 %.1f us at %s (rank %d slowest on average)", n,
    cs.now() - start, slowest and slowest.p99_us or 0, slowest and cs.format_size(slowest.bytes) or "-",
    slowest and slowest.slowest_rank or -1)
end

return recipe
