-- Protocol comparison: the same sweep on every backend this run can open (mpi, gloo, nccl) over
-- the same ranks, one table per collective with each backend's time and busbw per size, the
-- winner per size (the lowest time) and the crossover points where the winner changes.
-- Under mpirun every backend built in can be opened (nccl needs a GPU per rank: without one it is
-- listed as skipped, with the reason); under --launcher env only gloo (and nccl over its store).
-- On a job of 2+ hosts with the same number of ranks each, the all-reduce table also has the
-- hierarchical variants (Horovod's hierarchical all-reduce): the ranks split by host, a
-- reduce-scatter inside each host on one backend, an all-reduce across the hosts (between the
-- ranks of the same local rank) on another, an all-gather inside the host; timed as a loop of the
-- three calls, and checked like the flat ones (docs/launching.md).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "protocol_compare",
  version = "1.1.2",
  requires = ">=0.1, <1.0",
  summary = "the same sweep on every backend of the run: time and busbw per size, winner, crossovers",
  options = {
    backends = { default = "all", help = "backends to compare (comma list of mpi, gloo, nccl; all: every one "
                 .. "this run can open)", type = "list", choices = { "all", "mpi", "gloo", "nccl" } },
    ops = { default = "allreduce", help = "collectives (comma list, or all)", type = "list", choices = cs.collective_choices },
    min = { default = "1K", help = "smallest message size", type = "size" },
    max = { default = "4M", help = "largest message size", type = "size" },
    factor = { 4, "multiplicative step between sizes", type = "number", min = 1.0001 },
    iters = { 20, "timed iterations per size and backend", min = 1, max = 100000000 },
    warmup = { 5, "untimed iterations per size and backend", min = 0, max = 100000000 },
    dtype = { default = "float32", help = "element type", choices = { "int32", "int64", "float32", "float64" } },
    hierarchical = { default = "auto", help = "hierarchical all-reduce variants, inside/across (comma list such as "
                     .. "nccl/nccl,mpi/gloo; auto: every compared backend inside, mpi and gloo across, and nccl/nccl; none)" },
  },
}

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
  return nil
end

-- The backends to run, in the order of cs.comm.available(), ctx.backend first when listed.
local function choose(ctx, wanted)
  local avail = cs.comm.available()
  if not index_of(avail, ctx.backend) then table.insert(avail, 1, ctx.backend) end
  local out, missing = {}, {}
  for _, b in ipairs(cs.expand_all(wanted, avail)) do
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

-- Hosts in order of their first rank, this rank's host index and local rank, and the ranks per
-- host (nil when hosts differ in their number of ranks).
local function host_layout(ctx)
  local index, count, order = {}, {}, {}
  local my_host, my_local
  for r, h in ipairs(ctx.hosts) do
    if not index[h] then
      order[#order + 1] = h
      index[h] = #order
      count[h] = 0
    end
    if r - 1 == ctx.rank then my_host, my_local = index[h], count[h] end
    count[h] = count[h] + 1
  end
  local per = count[order[1]]
  for _, h in ipairs(order) do
    if count[h] ~= per then per = nil break end
  end
  return { nhosts = #order, host = my_host, local_rank = my_local, per_host = per }
end

-- --hierarchical as {inside, across} pairs ("auto" and "none" as such); malformed: exit 1.
local function parse_hierarchical(spec)
  if spec == "auto" or spec == "none" then return spec end
  local want = {}
  for item in spec:gmatch("[^,]+") do
    local inside, across = item:match("^%s*(%w+)/(%w+)%s*$")
    if not inside then
      cs.raise(cs.exit.bad_input, ("--hierarchical %s: inside/across pairs expected (such as nccl/mpi), or auto "
        .. "or none"):format(spec), 0)
    end
    for _, b in ipairs({ inside, across }) do
      if b ~= "mpi" and b ~= "gloo" and b ~= "nccl" then
        cs.raise(cs.exit.bad_input, ("--hierarchical %s: %s is not a backend (mpi, gloo, nccl)"):format(spec, b), 0)
      end
    end
    want[#want + 1] = { inside, across }
  end
  if #want == 0 then cs.raise(cs.exit.bad_input, "--hierarchical is empty: auto, none, or inside/across pairs", 0) end
  return want
end

-- The variants asked for: {name, inside, across}, and the ones that cannot run with the reason.
local HOST_BACKENDS = { mpi = true, gloo = true }
local function hierarchical_variants(ctx, spec, ran, layout)
  local want, skipped = {}, {}
  if spec == "none" then return want, skipped end
  if spec == "auto" then
    for _, inside in ipairs(ran) do
      for _, across in ipairs(ran) do
        if HOST_BACKENDS[across] or (inside == "nccl" and across == "nccl") then want[#want + 1] = { inside, across } end
      end
    end
  else
    want = spec
  end
  local out, why = {}, nil
  if layout.nhosts < 2 then
    why = ("the job runs on %s: nothing to split by host"):format(cs.text.plural(layout.nhosts, "host"))
  elseif not layout.per_host then
    why = "the hosts run different numbers of ranks"
  elseif layout.per_host < 2 then
    why = "one rank per host: nothing to reduce inside a host"
  end
  for _, w in ipairs(want) do
    local name = ("hier:%s/%s"):format(w[1], w[2])
    local reason = why
    if not reason then
      for _, b in ipairs(w) do
        if not index_of(ran, b) then reason = reason or (b .. " is not compared in this run") end
      end
    end
    if not reason and w[1] == "nccl" and w[2] ~= "nccl" then
      reason = "NCCL inside with " .. w[2] .. " across needs copies between the GPU and the host, which recipes "
        .. "cannot make yet"
    end
    if reason then
      skipped[#skipped + 1] = { backend = name, reason = reason }
    else
      out[#out + 1] = { name = name, inside = w[1], across = w[2] }
    end
  end
  -- auto on a job of the wrong shape: one line for all of them.
  if spec == "auto" and why and #want > 0 then skipped = { { backend = "hier:*", reason = why } } end
  return out, skipped
end

-- One hierarchical all-reduce variant at one size: buffers on the inside backend's side, the
-- loop of reduce-scatter (inside), all-reduce (across), all-gather (inside) timed as a whole
-- (warm-up, barrier, iters calls, / iters; the mean over ranks, as bench's headline), call
-- verification off in the timed loop; then one checked run from the check pattern.
local function bench_hierarchical(ctx, v, bytes, o)
  local n = cs.count_for_bytes("allreduce", bytes, o.dtype, ctx.size)
  local L = v.inner:size()
  local c = math.floor((n + L - 1) / L)  -- the shard: the count padded up to a multiple of the ranks per host
  local full = v.inner:tensor(o.dtype, c * L)
  local out = v.inner:tensor(o.dtype, c * L)
  local shard = v.inner:tensor(o.dtype, c)
  local function once()
    v.inner:reduce_scatter(full, shard)
    v.cross:allreduce(shard, shard)
    v.inner:allgather(shard, out)
  end
  full:fill_pattern(ctx.rank, "sum", 0)
  local vi, vc = v.inner:set_verify(false), v.cross:set_verify(false)
  for _ = 1, o.warmup do once() end
  ctx.comm:barrier()
  local t0 = cs.now()
  for _ = 1, o.iters do once() end
  local mine = (cs.now() - t0) / o.iters * 1e6
  v.inner:set_verify(vi)
  v.cross:set_verify(vc)
  -- Checked run: every rank's pattern in, the exact all-reduce of all ranks expected out.
  full:fill_pattern(ctx.rank, "sum", 1)
  out:fill(0)
  once()
  local wrong = v.world:check("allreduce", out, { salt = 1 })
  local all = ctx.comm:allgather_value({ mine, wrong })
  local sum, lo, hi, total, wrong_ranks = 0, math.huge, 0, 0, {}
  for r, x in ipairs(all) do
    sum, lo, hi = sum + x[1], math.min(lo, x[1]), math.max(hi, x[1])
    total = total + x[2]
    if x[2] > 0 then wrong_ranks[#wrong_ranks + 1] = r - 1 end
  end
  local time_us = math.min(math.max(sum / #all, lo), hi)
  local nbytes = n * cs.dtype_size(o.dtype)
  local algbw = nbytes / (time_us * 1e3)
  return { kind = "hierarchical", op = "allreduce", backend = v.name, inside = v.inside, across = v.across,
           bytes = nbytes, count = n, dtype = o.dtype, ranks = ctx.size, hosts = math.floor(ctx.size / L), ranks_per_host = L,
           iters = o.iters, warmup = o.warmup, time_us = time_us, time_rank_min_us = lo, time_rank_max_us = hi,
           algbw = algbw, busbw = algbw * 2 * (ctx.size - 1) / ctx.size, checked = true, wrong = total,
           wrong_ranks = cs.array(wrong_ranks) }
end

-- Opens every backend of the list: the communicators by name, what could not start (with why),
-- the names that did; a warning finding when fewer than two did.
local function open_backends(ctx, backends)
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
  return comms, skipped, ran
end

-- One size of one collective on every column (the flat backends, then the hierarchical variants
-- in hier_of): a result each, a finding per wrong one. Returns the row (times by column, its
-- winner), the printed line's cells and the wrong elements.
local function bench_row(ctx, o, op, bytes, cols, hier_of, comms, width)
  local row, winner, best, line = { bytes = bytes, by = {} }, nil, math.huge, { ("%13s"):format(cs.format_size(bytes)) }
  local wrong = 0
  for _, b in ipairs(cols) do
    local r
    if hier_of[b] then
      r = bench_hierarchical(ctx, hier_of[b], bytes, o)
    else
      r = comms[b]:bench { op = op, bytes = bytes, dtype = o.dtype, iters = o.iters, warmup = o.warmup }
    end
    r.backend = b
    ctx.report:result(r)
    row.bytes = r.bytes
    row.by[b] = { time_us = r.time_us, busbw = r.busbw, algbw = r.algbw, wrong = r.wrong or 0 }
    wrong = wrong + (r.wrong or 0)
    if (r.wrong or 0) > 0 then
      ctx.report:finding { severity = "error", subject = { ranks = r.wrong_ranks },
        message = ("%s %s on %s: %d wrong elements"):format(op, cs.format_size(r.bytes), b, r.wrong),
        evidence = { backend = b, op = op, bytes = r.bytes, wrong = r.wrong } }
    end
    if r.time_us < best then best, winner = r.time_us, b end
    line[#line + 1] = ("%" .. width[b] .. ".1f %10.3f"):format(r.time_us, r.busbw)
  end
  row.winner = winner
  return row, line, wrong
end

-- One finding per collective: who wins where, and by how much at the largest size.
local function winner_finding(ctx, op, cols, rows, crossovers)
  local last = rows[#rows]
  local slow, fast = nil, last.by[last.winner].time_us
  for _, b in ipairs(cols) do
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

-- The table of one collective: every size on every column, the crossovers between winners.
-- Returns the table for report.json and the wrong elements seen.
local function compare_op(ctx, o, op, sizes, ran, hier, comms)
  local rows, crossovers, prev, wrong = {}, {}, nil, 0
  -- The columns of this table: the flat backends, then (all-reduce) the hierarchical variants.
  local cols, hier_of = {}, {}
  for _, b in ipairs(ran) do cols[#cols + 1] = b end
  if op == "allreduce" then
    for _, v in ipairs(hier) do cols[#cols + 1], hier_of[v.name] = v.name, v end
  end
  local head, width = { ("%12s"):format("size") }, {}
  for _, b in ipairs(cols) do
    width[b] = math.max(12, #b + 3)
    head[#head + 1] = ("%" .. width[b] .. "s %10s"):format(b .. " us", "busbw")
  end
  head[#head + 1] = "  winner"
  ctx.log("#\n# %s\n#%s", op, table.concat(head, " "))
  for _, bytes in ipairs(sizes) do
    if cs.count_for_bytes(op, bytes, o.dtype, ctx.size) > 0 then
      local row, line, w = bench_row(ctx, o, op, bytes, cols, hier_of, comms, width)
      local winner = row.winner
      wrong = wrong + w
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
  if #cols >= 2 and #rows > 0 then winner_finding(ctx, op, cols, rows, crossovers) end
  return { op = op, rows = rows, crossovers = cs.array(crossovers) }, wrong
end

function recipe.run(ctx)
  local o = ctx.opt
  if o.min > o.max then
    cs.raise(cs.exit.bad_input, ("--min %s is larger than --max %s"):format(cs.format_size(o.min), cs.format_size(o.max)), 0)
  end
  if ctx.size < 2 then cs.raise(cs.exit.bad_input, "protocol_compare needs at least 2 ranks", 0) end
  local hier_spec = parse_hierarchical(o.hierarchical)
  local backends, missing, avail = choose(ctx, o.backends)
  if #missing > 0 then
    cs.raise(cs.exit.bad_input, ("--backends %s: not available in this run (available: %s)"):format(
      table.concat(missing, ","), table.concat(avail, ",")), 0)
  end
  cs.sweep.check_memory(ctx, 2 * o.max, "--max " .. cs.format_size(o.max))
  local ops = cs.expand_all(o.ops)
  local sizes = cs.sweep.sizes { min = o.min, max = o.max, factor = o.factor }

  -- Open every backend first, so a backend that cannot start is known before any timing.
  local comms, skipped, ran = open_backends(ctx, backends)
  -- Hierarchical variants (all-reduce only): the inside and across communicators, split once per
  -- backend (by host; by local rank).
  local hier, hier_skipped = {}, {}
  if index_of(ops, "allreduce") then
    local layout = host_layout(ctx)
    hier, hier_skipped = hierarchical_variants(ctx, hier_spec, ran, layout)
    local inner, cross = {}, {}
    for _, v in ipairs(hier) do
      inner[v.inside] = inner[v.inside] or comms[v.inside]:split(layout.host - 1, ctx.rank)
      cross[v.across] = cross[v.across] or comms[v.across]:split(layout.local_rank, ctx.rank)
      v.inner, v.cross, v.world = inner[v.inside], cross[v.across], comms[v.inside]
    end
    for _, x in ipairs(hier_skipped) do
      skipped[#skipped + 1] = x
      ctx.log("# %s: not compared: %s", x.backend, x.reason)
    end
  end
  ctx.log("# commscript protocol_compare %s: %s, backends %s, dtype %s, iters %d, warmup %d",
    recipe.version, cs.text.plural(ctx.size, "rank"), table.concat(ran, ","), o.dtype, o.iters, o.warmup)
  if #hier > 0 then
    local names = {}
    for _, v in ipairs(hier) do names[#names + 1] = v.name end
    ctx.log("# hierarchical all-reduce (inside/across; %d hosts x %d ranks): %s", ctx.size / hier[1].inner:size(),
      hier[1].inner:size(), table.concat(names, ","))
  end

  local tables, total_wrong = {}, 0
  local variants = {}
  for _, b in ipairs(ran) do variants[#variants + 1] = b end
  for _, v in ipairs(hier) do variants[#variants + 1] = v.name end
  for _, op in ipairs(ops) do
    local t, wrong = compare_op(ctx, o, op, sizes, ran, hier, comms)
    tables[#tables + 1], total_wrong = t, total_wrong + wrong
  end
  local hier_info = {}
  for _, v in ipairs(hier) do
    hier_info[#hier_info + 1] = { name = v.name, inside = v.inside, across = v.across,
                                  hosts = ctx.size / v.inner:size(), ranks_per_host = v.inner:size() }
  end
  ctx.report:set("protocol_compare", { backends = ran, variants = variants, hierarchical = cs.array(hier_info),
                                       skipped = cs.array(skipped), dtype = o.dtype, ranks = ctx.size,
                                       iters = o.iters, tables = tables })
  local freed = {}
  for _, v in ipairs(hier) do
    for _, c in ipairs({ v.inner, v.cross }) do
      if not freed[c] then freed[c] = true c:free() end
    end
  end
  ctx.log("# #wrong %d", total_wrong)
end

return recipe
