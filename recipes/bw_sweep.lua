-- Collective bandwidth sweep: what nccl-tests' *_perf binaries measure, for every collective,
-- with the same table, busbw factors and #wrong check. time/algbw/busbw are nccl-tests' own
-- definition (whole loop / iters, mean over ranks); i_p50/i_p99/i_cv% per size come from a
-- separate per-iteration pass (docs/timing.md).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "bw_sweep",
  version = "2.1.2",
  requires = ">=0.1, <1.0",
  summary = "collective bandwidth sweep (nccl-tests table: algbw, busbw, #wrong)",
  options = {
    ops = { default = "allreduce", help = "collectives to run (comma list, or all)", type = "list", choices = cs.collective_choices },
    min = { default = "8", help = "smallest message size", type = "size" },
    max = { default = "32M", help = "largest message size", type = "size" },
    factor = { 2, "multiplicative step between sizes", type = "number", min = 1.0001 },
    iters = { 20, "timed iterations per size (the headline loop)", min = 1, max = 100000000 },
    samples = { 0, "per-iteration samples per size (i_p50, i_p99, i_cv%); 0: as many as --iters", min = 0,
                max = 100000000 },
    warmup = { 5, "untimed iterations per size", min = 0, max = 100000000 },
    dtype = { default = "float32", help = "element type", choices = cs.dtypes },
    dtypes = { default = "", help = "element types, one sweep each (comma list; replaces --dtype)", type = "list",
               choices = cs.dtypes },
    op = { default = "sum", help = "reduction", choices = { "sum", "prod", "min", "max", "avg" } },
    root = { 0, "root of rooted collectives", min = 0 },
    check = { true, "check every result for wrong elements" },
    inplace = { true, "also run the in-place variant" },
  },
}

local FLOAT = { float16 = true, bfloat16 = true, float32 = true, float64 = true }


function recipe.run(ctx)
  local o = ctx.opt
  if o.min > o.max then
    cs.raise(cs.exit.bad_input, ("--min %s is larger than --max %s"):format(cs.format_size(o.min), cs.format_size(o.max)), 0)
  end
  if o.root >= ctx.size then
    cs.raise(cs.exit.bad_input, ("--root %d is not a rank (the job has %d)"):format(o.root, ctx.size), 0)
  end
  local ops = cs.expand_all(o.ops)
  local dtypes = #o.dtypes > 0 and o.dtypes or { o.dtype }
  for _, dtype in ipairs(dtypes) do
    -- Refused before anything runs (float16/bfloat16 on mpi and gloo), not halfway through.
    local ok, why = ctx.comm:supports(dtype)
    if not ok then cs.raise(cs.exit.bad_input, ("dtype %s is %s"):format(dtype, why), 0) end
    for _, op in ipairs(ops) do
      if (op == "allreduce" or op == "reduce" or op == "reduce_scatter") and o.op == "avg" and not FLOAT[dtype] then
        cs.raise(cs.exit.bad_input,
          ("--op avg is defined for float16, bfloat16, float32 and float64, not %s"):format(dtype), 0)
      end
    end
  end
  -- Every rank holds a send and a receive buffer of up to --max bytes (alltoall, gather).
  cs.sweep.check_memory(ctx, 2 * o.max, "--max " .. cs.format_size(o.max))

  local sizes = cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }
  local progress = cs.progress.new { total = #dtypes * #ops * #sizes, label = "bw_sweep", rank = ctx.rank }
  local total_wrong, bw_sum, bw_rows = 0, 0, 0

  ctx.log("# commscript bw_sweep %s: %s, backend %s, dtype %s, iters %d, warmup %d, samples %d, check %s",
    recipe.version, cs.text.plural(ctx.size, "rank"), ctx.backend, table.concat(dtypes, ","), o.iters, o.warmup,
    o.samples > 0 and o.samples or o.iters, tostring(o.check))
  ctx.log("# time: whole loop / iters, mean over ranks (nccl-tests); algbw, busbw from it; "
    .. "i_p50, i_p99, i_cv%: a separate per-iteration pass, slowest rank per iteration")
  for _, dtype in ipairs(dtypes) do
    for _, op in ipairs(ops) do
      ctx.log("#\n# %s%s", op, #dtypes > 1 and (" " .. dtype) or "")
      ctx.log(cs.bwtable.header { inplace = o.inplace })
      for _, bytes in ipairs(sizes) do
        if cs.count_for_bytes(op, bytes, dtype, ctx.size) > 0 then
          local row = {}
          for _, inplace in ipairs(o.inplace and { false, true } or { false }) do
            local r = ctx.comm:bench { op = op, bytes = bytes, dtype = dtype, redop = o.op, root = o.root,
                                       inplace = inplace, iters = o.iters, warmup = o.warmup, check = o.check,
                                       samples = o.samples > 0 and o.samples or o.iters }
            r.placement = inplace and "in-place" or "out-of-place"
            row[inplace and "ip" or "oop"] = r
            ctx.report:result(r)
            total_wrong = total_wrong + (r.wrong or 0)
            bw_sum, bw_rows = bw_sum + r.busbw, bw_rows + 1
            if (r.wrong or 0) > 0 then
              ctx.report:finding {
                severity = "error",
                subject = { ranks = r.wrong_ranks },
                message = ("%s %s %s %s: %d wrong elements on rank(s) %s"):format(
                  op, dtype, cs.format_size(r.bytes), r.placement, r.wrong, table.concat(r.wrong_ranks, ",")),
                evidence = { op = op, dtype = dtype, bytes = r.bytes, placement = r.placement, wrong = r.wrong,
                             ranks = r.wrong_ranks },
                remedy = "data corruption: re-run on the named ranks alone, check their memory and links",
              }
            end
          end
          ctx.log(cs.bwtable.row(row.oop, row.ip))
          progress:step(op .. " " .. cs.format_size(bytes))
        end
      end
    end
  end
  ctx.log(cs.bwtable.footer(total_wrong, bw_rows > 0 and bw_sum / bw_rows or 0))
end

return recipe
