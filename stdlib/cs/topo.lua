-- cs.topo: the job's topology (docs/stdlib.md, cs.topo; docs/full_diag-and-scorecard.md): every
-- rank's host, CPU binding, NUMA nodes, NICs and their speeds, PCIe links, GPUs, binary hash,
-- NCCL-related environment and library versions, gathered so that every rank holds all of it;
-- checked for the inconsistencies that hang or slow a job; rendered as the text rank 0 prints.
--
--   local topo = require "cs.topo"          -- or cs.topo
--   local t = topo.collect(ctx)             -- every rank calls it (two allgathers)
--   for _, f in ipairs(topo.check(t)) do ctx.report:finding(f) end
--   ctx.log(topo.render(t))
--   topo.report(ctx, t)                     -- the three above: report key "topology", the
--                                           -- findings, the text on rank 0; returns findings
--
-- topo.collect(ctx [, {sysfs_root=, root=}]) -> t (with root: t on that rank only, nil on the others,
-- gathered rather than allgathered); topo.build(list) builds the same t from a list of
-- per-rank tables (what native.topology() returns, plus `rank`), which is what the tests use.
--
-- t = {
--   size = n,
--   ranks = { {rank, host, local_rank, local_size, pid, cpu = {affinity, count, bound,
--              numa_nodes, online}, env = {NAME = value}, versions = {...}, exe = {path, size,
--              sha256, sha256_from}}, ... }                      -- ranks[i] is rank i-1
--   hosts = { [name] = {name, ranks = {world ranks; ranks[k] has local rank k-1}, local_size,
--              first_rank, numa = {{node, cpus, count}}, nics = {...}, gpus = {...},
--              gpu_links = {...}, hwloc = {...}, cpu_online, cpu_online_count} },
--   host_order = { names, by their first rank },
--   summary = { ranks, hosts, ranks_per_host = {min, max}, uniform, gpus, numa_nodes,
--               ib_ports_active, ib_ports_down, versions = {label = value of rank 0},
--               binaries = number of distinct binary hashes },
-- }
-- NICs, GPUs and PCIe links: engine/host/topology.cpp describes their fields.
-- The code is in the package's parts (stdlib/cs/topo/), re-exported here: cs.topo.model (build,
-- summarize, collect, oversubscribed, ranges), cs.topo.checks (check), cs.topo.text (render);
-- cs.topo.gpu (the GPU path from the model: also the field cs.topo.gpu) is not re-exported.
--
-- topo.check(t [, opts]) -> list of findings, each ready for ctx.report:finding (extra field
-- `kind`): version (a library differs between ranks), binary (the binary's hash differs),
-- env (a variable of a family the environment audit lints differs: NCCL_*, TORCH_NCCL_*,
-- TORCH_FR_*, UCX_*, the engine's one list), nic_down (an IB port not ACTIVE, an
-- Ethernet NIC down), pcie (a link trained below its width or speed), nic_speed (the same NIC
-- runs at different speeds on different hosts), cpu_overlap (ranks of a host bound to shared
-- CPUs), unbound, oversubscribed, ranks_per_host. opts: env_prefixes (the variables compared;
-- default cs.env.registry.AUDITED_PREFIXES).
local M = { gpu = require "cs.topo.gpu" }

for _, part in ipairs { "cs.topo.model", "cs.topo.checks", "cs.topo.text" } do
  for k, v in pairs(require(part)) do
    if k ~= "internal" then
      assert(M[k] == nil, "cs.topo: two parts export " .. k)
      M[k] = v
    end
  end
end

-- Sets the report's "topology" section, reports the findings and prints the summary on rank 0.
-- Every rank calls it with the same t (the findings are the same on every rank, so every rank's
-- exit code agrees; only rank 0 writes the report); returns the findings.
function M.report(ctx, t, opts)
  local findings = M.check(t, opts)
  ctx.report:set("topology", t)
  for _, f in ipairs(findings) do ctx.report:finding(f) end
  ctx.log(M.render(t, opts))
  return findings
end


return M
