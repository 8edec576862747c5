-- Protocol comparison: the same sweep on every backend this run can open (mpi, gloo, nccl) over
-- the same ranks, one table per collective with each backend's time and busbw per size, the
-- winner per size (the lowest time) and the crossover points where the winner changes.
-- Under mpirun every backend built in can be opened (nccl needs a GPU per rank: without one it is
-- listed as skipped, with the reason); under --launcher env only gloo (and nccl over its store).
local cs = require "commscript"

local ALL = cs.collectives  -- every collective the engine benchmarks, in its order
local OPS = { "all" }
for _, o in ipairs(ALL) do OPS[#OPS + 1] = o end

local recipe = cs.recipe {
  name = "protocol_compare",
  version = "1.0.1",
  requires = ">=0.1, <1.0",
  summary = "the same sweep on every backend of the run: time and busbw per size, winner, crossovers",
  options = {
    backends = { default = "all", help = "backends to compare (comma list of mpi, gloo, nccl; all: every one "
                 .. "this run can open)", type = "list", choices = { "all", "mpi", "gloo", "nccl" } },
    ops = { default = "allreduce", help = "collectives (comma list, or all)", type = "list", choices = OPS },
    min = { default = "1K", help = "smallest message size", type = "size" },
    max = { default = "4M", help = "largest message size", type = "size" },
    factor = { 4, "multiplicative step between sizes", type = "number", min = 1.0001 },
    iters = { 20, "timed iterations per size and backend", min = 1, max = 100000000 },
    warmup = { 5, "untimed iterations per size and backend", min = 0, max = 100000000 },
    dtype = { default = "float32", help = "element type", choices = { "int32", "int64", "float32", "float64" } },
  },
}

local function expand(list, all)
  for _, o in ipairs(list) do
    if o == "all" then return all end
  end
  return list
end

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
  return nil
end

-- The backends to run, in the order of cs.comm.available(), ctx.backend first when listed.
local function choose(ctx, wanted)
  local avail = cs.comm.available()
  if not index_of(avail, ctx.backend) then table.insert(avail, 1, ctx.backend) end
  local out, missing = {}, {}
  for _, b in ipairs(expand(wanted, avail)) do
    if index_of(avail, b) then
      if not index_of(out, b) then out[#out + 1] = b end
    else
      missing[#missing + 1] = b
    end
  end
  table.sort(out, function(a, b)
    if a == ctx.backend or b == ctx.backend then return a == ctx.backend and b ~= ctx.backend end
    return index_of(avail, a) < index_of(avail, b)
  end)
  return out, missing, avail
end

function recipe.run(ctx)
  local o = ctx.opt
  if o.min > o.max then
    cs.raise(cs.exit.bad_input, ("--min %s is larger than --max %s"):format(cs.format_size(o.min), cs.format_size(o.max)), 0)
  end
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "protocol_compare needs at least 2 ranks", 0) end
  local backends, missing, avail = choose(ctx, o.backends)
  if #missing > 0 then
    cs.raise(cs.exit.bad_input, ("--backends %s: not available in this run (available: %s)"):format(
      table.concat(missing, ","), table.concat(avail, ",")), 0)
  end
  cs.sweep.check_memory(ctx, 2 * o.max, "--max " .. cs.format_size(o.max))
  local ops = expand(o.ops, ALL)
  local sizes = cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }

  -- Open every backend first, so a backend that cannot start is known before any timing.
  local comms, skipped, ran = {}, {}, {}
  for _, b in ipairs(backends) do
    local ok, c = pcall(cs.comm.open, b)
    if ok then
      comms[b], ran[#ran + 1] = c, b
    else
      skipped[#skipped + 1] = { backend = b, reason = tostring(type(c) == "table" and c.message or c) }
      ctx.log("# %s: not compared: %s", b, skipped[#skipped].reason)
    end
  end
  if #ran < 2 then
    ctx.report:finding { severity = "warn", subject = {},
      message = ("only %s could run: nothing to compare it with"):format(table.concat(ran, ",")),
      remedy = "run under mpirun with --backend gloo (or a GPU per rank for nccl)" }
  end
  ctx.log("# commscript protocol_compare %s: %s, backends %s, dtype %s, iters %d, warmup %d",
    recipe.version, cs.text.plural(ctx.size, "rank"), table.concat(ran, ","), o.dtype, o.iters, o.warmup)

  local tables, total_wrong = {}, 0
  for _, op in ipairs(ops) do
    local rows, crossovers, prev = {}, {}, nil
    local head = { ("%12s"):format("size") }
    for _, b in ipairs(ran) do head[#head + 1] = ("%12s %10s"):format(b .. " us", "busbw") end
    head[#head + 1] = "  winner"
    ctx.log("#\n# %s\n#%s", op, table.concat(head, " "))
    for _, bytes in ipairs(sizes) do
      if cs.count_for_bytes(op, bytes, o.dtype, ctx.size) > 0 then
        local row, winner, best, line = { bytes = bytes, by = {} }, nil, math.huge, { ("%13s"):format(cs.format_size(bytes)) }
        for _, b in ipairs(ran) do
          local r = comms[b]:bench { op = op, bytes = bytes, dtype = o.dtype, iters = o.iters, warmup = o.warmup }
          r.backend = b
          ctx.report:result(r)
          row.bytes = r.bytes
          row.by[b] = { time_us = r.time_us, busbw = r.busbw, algbw = r.algbw, wrong = r.wrong or 0 }
          total_wrong = total_wrong + (r.wrong or 0)
          if (r.wrong or 0) > 0 then
            ctx.report:finding { severity = "error", subject = { ranks = r.wrong_ranks },
              message = ("%s %s on %s: %d wrong elements"):format(op, cs.format_size(r.bytes), b, r.wrong),
              evidence = { backend = b, op = op, bytes = r.bytes, wrong = r.wrong } }
          end
          if r.time_us < best then best, winner = r.time_us, b end
          line[#line + 1] = ("%12.1f %10.3f"):format(r.time_us, r.busbw)
        end
        row.winner = winner
        line[#line + 1] = "  " .. winner
        ctx.log(table.concat(line, " "))
        if prev and prev.winner ~= winner then
          crossovers[#crossovers + 1] = { from = prev.winner, to = winner, below = prev.bytes, at = row.bytes }
        end
        rows[#rows + 1], prev = row, row
      end
    end
    for _, x in ipairs(crossovers) do
      ctx.log("# crossover: %s wins up to %s, %s from %s", x.from, cs.format_size(x.below), x.to, cs.format_size(x.at))
    end
    tables[#tables + 1] = { op = op, rows = rows, crossovers = cs.array(crossovers) }
    if #ran >= 2 and #rows > 0 then
      -- One finding per collective: who wins where, and by how much at the largest size.
      local last = rows[#rows]
      local slow, fast = nil, last.by[last.winner].time_us
      for _, b in ipairs(ran) do
        if b ~= last.winner and (not slow or last.by[b].time_us > last.by[slow].time_us) then slow = b end
      end
      local parts = {}
      for _, x in ipairs(crossovers) do parts[#parts + 1] = ("%s -> %s at %s"):format(x.from, x.to, cs.format_size(x.at)) end
      ctx.report:finding { severity = "info", subject = {},
        message = ("%s: %s wins at %s (%.1fx faster than %s)%s"):format(op, last.winner, cs.format_size(last.bytes),
          last.by[slow].time_us / fast, slow, #parts > 0 and "; crossovers: " .. table.concat(parts, ", ")
          or "; the winner at every size"),
        evidence = { op = op, winner = last.winner, bytes = last.bytes } }
    end
  end
  ctx.report:set("protocol_compare", { backends = ran, skipped = cs.array(skipped), dtype = o.dtype,
                                       ranks = ctx.size, iters = o.iters, tables = tables })
  ctx.log("# #wrong %d", total_wrong)
end

return recipe
