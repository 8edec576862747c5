-- triage: from a customer's artifacts to a diagnosis and a repro (docs/triage.md).
--
--   commscript --backend self --out tri recipes/triage.lua --paths logs/,nccl_trace_rank_0,...
--
-- Reads any mix of PyTorch watchdog lines, Flight Recorder dumps (pickle or JSON, gzip or not),
-- NCCL_DEBUG logs, NCCL RAS JSON and nccl-tests output (text or -J), prints one diagnosis per
-- process group (last completed and in-flight collective per rank, missing ranks, mismatched
-- calls, as fr_trace would say), the NCCL version, transports and topology, and the env audit of
-- the variables the logs show; report.json holds each conclusion with the file:line it rests on.
-- It writes OUT/repro.lua + OUT/repro.toml: the collective sequence with the failure planted as
-- chaos. Exit 3 when the artifacts show a failure, 0 when they show none, 1 for unreadable input.
-- Only files and directories named on the command line are read (the sandbox holds).
local cs = require "commscript"

local recipe = cs.recipe {
  name = "triage",
  version = "1.1.2",
  requires = ">=0.1, <1.0",
  summary = "diagnose a customer's logs and dumps (watchdog, Flight Recorder, NCCL, RAS, nccl-tests) and write a repro",
  options = {
    paths = { {}, "files and directories to read (comma-separated)", type = "list" },
    ranks = { 0, "ranks of the repro (0: the customer's; fewer keeps the failing ranks and the group shapes)", min = 0 },
    world = { 0, "the customer's number of ranks when the artifacts do not say (0: from the artifacts)", min = 0 },
    last = { 32, "collectives replayed before the failure", min = 1, max = 100000 },
    repro_timeout = { 0, "deadline written to repro.toml, s (0: the customer's timeout)", type = "number", min = 0 },
  },
}

function recipe.run(ctx)
  local T = require "cs.triage"
  local R = require "cs.triage.repro"
  local o = ctx.opt
  local arts = T.load(o.paths)
  local diag = T.diagnose(arts, { world = o.world })
  for _, line in ipairs(T.lines(diag)) do ctx.log("%s", line) end
  for _, f in ipairs(T.findings(diag)) do ctx.report:finding(f) end
  local sources = {}
  for _, f in ipairs(diag.files) do sources[#sources + 1] = f.path end
  local built, why = R.build(diag, { ranks = o.ranks, last = o.last, timeout = o.repro_timeout, sources = sources })
  local section = { files = diag.files, world = diag.world, nccl = { version = diag.nccl.version, transports = diag.nccl.transports },
    groups = {} }
  for _, G in ipairs(diag.groups) do
    local v = G.verdict
    section.groups[#section.groups + 1] = { name = G.name, desc = G.desc, ranks = cs.array(G.ranks or {}), source = G.source,
      verdict = v.kind, seq = v.seq, op = v.rec and v.rec.name, culprits = cs.array(v.ranks or {}), fr_trace = v.fr_trace,
      mismatch = v.mismatch,
      at = v.rec and v.rec.at }
  end
  if built then
    section.repro = built.summary
    if ctx.rank == 0 then
      local paths = R.write(ctx.report.dir, built)
      ctx.log("== repro: %s + %s (%d ranks, %d collectives; %s)", paths[1], paths[2], built.summary.ranks,
        built.summary.collectives, built.summary.note or "nothing planted")
      ctx.log("  run:            mpirun -np %d commscript --config %s %s", built.summary.ranks, paths[2], paths[1])
      ctx.log("  without chaos:  mpirun -np %d commscript --config %s --set 'chaos=[]' %s", built.summary.ranks, paths[2], paths[1])
    end
  else
    ctx.log("== repro: none (%s)", why)
  end
  ctx.report:set("triage", section)
end

return recipe
