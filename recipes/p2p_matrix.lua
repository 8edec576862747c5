-- The rank x rank matrix (mpiGraph / SuperBench pair-wise): latency and bandwidth for every
-- ordered pair, pairs run concurrently in round-robin rounds (n-1 rounds of n/2 disjoint
-- pairs), plus one-to-many / many-to-one and intra- vs inter-host summaries; localisation of
-- slow ranks, hosts and links from the matrix.
local cs = require "commscript"

local recipe = cs.recipe {
  name = "p2p_matrix",
  version = "1.2.10",
  requires = ">=0.1, <1.0",
  summary = "latency and bandwidth of every rank pair, as an N x N matrix, with localisation",
  options = {
    bytes = { default = "256K", help = "message size of the bandwidth test", type = "size" },
    window = { 8, "messages in flight per bandwidth iteration", min = 1 },
    iters = { 5, "bandwidth iterations per direction", min = 1 },
    lat_iters = { 100, "ping-pong round trips per pair", min = 1 },
    repeats = { 2, "measure every pair this many times, keep the best", min = 1 },
  },
}

local function fmt_row(label, row, n, f)
  local cells = {}
  for j = 1, n do cells[j] = row[j] and f(row[j]) or "      -" end
  return ("%6s %s"):format(label, table.concat(cells, " "))
end

function recipe.run(ctx)
  local n = ctx.size
  if n < 2 then cs.raise(cs.exit.bad_input, "p2p_matrix needs at least 2 ranks", 0) end
  local hosts = ctx.comm:allgather_value(ctx.host)
  local m = cs.p2p.matrix(ctx, { bytes = ctx.opt.bytes, window = ctx.opt.window, iters = ctx.opt.iters,
                                 lat_iters = ctx.opt.lat_iters, repeats = ctx.opt.repeats })
  -- one-to-many and many-to-one from rank 0
  local fan_out = ctx.comm:bench { op = "scatter", bytes = ctx.opt.bytes * n, root = 0, iters = ctx.opt.iters, warmup = 1 }
  local fan_in = ctx.comm:bench { op = "gather", bytes = ctx.opt.bytes * n, root = 0, iters = ctx.opt.iters, warmup = 1 }
  fan_out.kind, fan_in.kind = "one_to_many", "many_to_one"
  ctx.report:result(fan_out)
  ctx.report:result(fan_in)

  local intra, inter = {}, {}
  for a = 1, n do
    for b = 1, n do
      if a ~= b and m.bw[a][b] then
        ctx.report:result { kind = "pair", a = a - 1, b = b - 1, hosts = { hosts[a], hosts[b] }, bytes = ctx.opt.bytes,
                            bw_gbps = m.bw[a][b], latency_us = m.lat[a][b] }
        table.insert(hosts[a] == hosts[b] and intra or inter, m.bw[a][b])
      end
    end
  end
  ctx.report:set("matrix", cs.p2p.matrix_report(m, ctx.opt.bytes))

  if ctx.rank == 0 then
    ctx.log("# bandwidth (GB/s), row sends to column, %s messages", cs.format_size(ctx.opt.bytes))
    local head = {}
    for j = 0, n - 1 do head[#head + 1] = ("%7d"):format(j) end
    ctx.log("%6s %s", "", table.concat(head, " "))
    for a = 1, n do ctx.log(fmt_row(a - 1, m.bw[a], n, function(v) return ("%7.3f"):format(v) end)) end
    ctx.log("# latency (us, ping-pong p50)")
    ctx.log("%6s %s", "", table.concat(head, " "))
    for a = 1, n do ctx.log(fmt_row(a - 1, m.lat[a], n, function(v) return ("%7.2f"):format(v) end)) end
    local med = cs.diagnose.median
    ctx.log("# intra-host median %s GB/s (%d pairs), inter-host median %s GB/s (%d pairs)",
      intra[1] and ("%.3f"):format(med(intra)) or "-", #intra, inter[1] and ("%.3f"):format(med(inter)) or "-", #inter)
    ctx.log("# one-to-many (scatter from 0) %.3f GB/s, many-to-one (gather to 0) %.3f GB/s", fan_out.algbw, fan_in.algbw)
  end

  -- Localisation from what the matrix measured (full_diag's: cs.p2p.localise): each pair's
  -- slower direction streaming, suspects re-measured the same way several times, interleaved
  -- with reference pairs, before they are named; the matrix's rows or columns far off are
  -- re-tested whatever the screen says, and end as a verdict or a "not confirmed" finding.
  local ev = ctx.rank == 0 and cs.evidence.off(m.bw, hosts) or nil
  local args = { stream = true, bytes = ctx.opt.bytes, window = ctx.opt.window, iters = ctx.opt.iters, warmup = 1,
                 force = ev and cs.evidence.force(ev, {}), bw = ctx.rank == 0 and m.bw or nil,
                 ways = ev and cs.evidence.ways(ev, hosts) }
  local loc = cs.p2p.localise(ctx, m.pairs, hosts, args)
  -- A host with more ranks than CPUs: its ranks' links and unconfirmed suspects are info (two may
  -- share a core), as in full_diag.
  local oversubscribed = cs.topo.oversubscribed(cs.topo.collect(ctx))
  if ev then
    cs.evidence.annotate(loc, ev, hosts)
    for _, f in ipairs(cs.evidence.shared_cpus(cs.evidence.unconfirmed(ev, loc, hosts, ctx.opt.bytes), oversubscribed)) do
      ctx.report:finding(f)
    end
  end
  local run = { size = n, rank_hosts = hosts, localisation = loc, oversubscribed = oversubscribed }
  if ctx.rank == 0 then  -- the verdict's measurements: what noise it decided under
    ctx.report:set("localisation", { references = loc.references, suspects = loc.suspects, retests = loc.retests,
                                     under_measured = loc.under_measured, undecided = loc.undecided, tested = loc.tested,
                                     noisy = loc.noisy or false, forced = args.force })
  end
  for _, f in ipairs(cs.diagnose.findings(loc)) do ctx.report:finding(f) end
  for _, f in ipairs(cs.rules.evaluate(run)) do ctx.report:finding(f) end
end

return recipe
