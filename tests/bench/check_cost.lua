-- What the result check adds to one comm:bench call, per size: the wall time of the call with
-- check = true (the fill-by-tile, compare-by-chunk method, engine/measure/bench_check.hpp) and
-- with check = "reference" (the per-element method it replaced: the whole send buffer filled on
-- the host and copied over, the whole result copied back and every element compared with its
-- recomputed value), each minus the same call with check = false, all three measured in this run
-- (rounds alternate the order; the medians are shown). Beside it, the check's own cost as bench
-- measures it (result.check_us: fill, extra run, copy and compare, slowest rank), free of the
-- noise of the timed loops the wall-time difference carries. On the GPU stand-in (a build with
-- -DCOMMSCRIPT_FAKE_GPU=ON, docs/fake-gpu.md) the buffers are "device" memory and the copies go
-- through its cudaMemcpy:
--   build-fake/commscript --backend nccl tests/bench/check_cost.lua --max 64M
--   mpirun -np 2 build/commscript tests/bench/check_cost.lua            (host buffers, MPI)
-- A benchmark: it prints numbers, and fails only when a checked call finds wrong elements.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "check_cost",
  version = "1.0.0",
  summary = "per-size host overhead of comm:bench's result check, old method vs new",
  options = {
    op = { default = "allreduce", help = "collective" },
    dtype = { default = "float32", help = "element type" },
    min = { default = "8", help = "smallest size", type = "size" },
    max = { default = "64M", help = "largest size", type = "size" },
    factor = { 4, "multiplicative step between sizes", type = "number", min = 1.0001 },
    iters = { 20, "timed iterations per call" },
    warmup = { 5, "warm-up iterations per call" },
    rounds = { 3, "calls per size and method (the median is shown)", min = 1 },
  },
}

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

function recipe.run(ctx)
  local o = ctx.opt
  local methods = { { "off", false }, { "reference", "reference" }, { "new", true } }
  local sizes = cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }
  local wrong = 0
  local sum = { off = 0, reference = 0, new = 0 }
  local check_sum = { reference = 0, new = 0 }
  ctx.log("# check_cost: %s %s, backend %s, %s, iters %d, warmup %d, median of %d rounds",
    o.op, o.dtype, ctx.backend, cs.text.plural(ctx.size, "rank"), o.iters, o.warmup, o.rounds)
  ctx.log("# wall ms per comm:bench call; overhead = check on - check off; check = result.check_us "
    .. "(fill + run + compare), old and new")
  ctx.log("# %10s %10s %10s %10s %9s %24s %24s %9s", "size", "off ms", "old +ms", "new +ms", "old/new",
    "old check ms (f+r+c)", "new check ms (f+r+c)", "old/new")
  for _, bytes in ipairs(sizes) do
    if cs.count_for_bytes(o.op, bytes, o.dtype, ctx.size) > 0 then
      local t = { off = {}, reference = {}, new = {} }
      local cost = { reference = {}, new = {} }
      for round = 1, o.rounds do
        for k = 1, #methods do
          -- Alternate the order each round, so that drift does not favour one method.
          local m = methods[round % 2 == 1 and k or #methods + 1 - k]
          ctx.comm:barrier()
          local t0 = cs.now()
          local r = ctx.comm:bench { op = o.op, bytes = bytes, dtype = o.dtype, iters = o.iters, warmup = o.warmup,
                                     check = m[2] }
          local dt = cs.now() - t0
          wrong = wrong + (r.wrong or 0)
          t[m[1]][#t[m[1]] + 1] = dt
          if r.check_us then
            local c = cost[m[1]]
            c[#c + 1] = { (r.check_us.fill_us + r.check_us.run_us + r.check_us.compare_us) * 1e-3,
                          r.check_us.fill_us * 1e-3, r.check_us.run_us * 1e-3, r.check_us.compare_us * 1e-3 }
          end
        end
      end
      -- The slowest rank's median: the call ends for the job when its last rank is done.
      local mine = { off = median(t.off), reference = median(t.reference), new = median(t.new) }
      local all = ctx.comm:allgather_value(mine)
      local w = { off = 0, reference = 0, new = 0 }
      for _, x in ipairs(all) do
        for k in pairs(w) do w[k] = math.max(w[k], x[k]) end
      end
      for k in pairs(sum) do sum[k] = sum[k] + w[k] end
      local old_o, new_o = w.reference - w.off, w.new - w.off
      -- The check's own cost: the round with the median total (check_us is already the slowest
      -- rank's, part by part).
      local function mid(list)
        table.sort(list, function(a, b) return a[1] < b[1] end)
        return list[math.floor((#list + 1) / 2)]
      end
      local co, cn = mid(cost.reference), mid(cost.new)
      check_sum.reference, check_sum.new = check_sum.reference + co[1], check_sum.new + cn[1]
      ctx.log("  %10s %10.2f %10.2f %10.2f %9s %24s %24s %9s", cs.format_size(bytes), w.off * 1e3, old_o * 1e3,
        new_o * 1e3, new_o > 0 and ("%.1fx"):format(old_o / new_o) or "-",
        ("%.2f (%.2f+%.2f+%.2f)"):format(co[1], co[2], co[3], co[4]),
        ("%.2f (%.2f+%.2f+%.2f)"):format(cn[1], cn[2], cn[3], cn[4]), ("%.1fx"):format(co[1] / cn[1]))
      ctx.report:result { kind = "check_cost", bytes = bytes, off_s = w.off, reference_s = w.reference, new_s = w.new,
                          reference_check_ms = co[1], new_check_ms = cn[1] }
    end
  end
  local old_o, new_o = sum.reference - sum.off, sum.new - sum.off
  ctx.log("# total: off %.3f s; check adds %.3f s (old method) vs %.3f s (new)%s", sum.off, old_o, new_o,
    new_o > 0 and (": %.1fx less"):format(old_o / new_o) or "")
  ctx.log("# total check cost as bench measures it: %.3f s (old method) vs %.3f s (new): %.1fx less",
    check_sum.reference * 1e-3, check_sum.new * 1e-3, check_sum.reference / math.max(check_sum.new, 1e-9))
  if wrong > 0 then cs.raise(cs.exit.corruption, ("%d wrong elements in checked calls"):format(wrong), 0) end
end

return recipe
