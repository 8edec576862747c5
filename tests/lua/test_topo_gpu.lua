-- LuaUnit tests of cs.topo.gpu: the GPU path's bandwidth reference (copies within the NVML
-- nominal, the NICs' line rate across hosts), the GPU each rank uses, and the link checks, on
-- synthetic topologies (cs.topo's model).
-- Run: commscript --backend self --trusted tests/lua/test_topo_gpu.lua
local cs = require "commscript"
local lu = require "luaunit"
local G = require "cs.topo.gpu"

local recipe = cs.recipe {
  name = "test_topo_gpu",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.topo.gpu",
}

-- A host of two PCIe GPUs (gen4 x16, no NVLink) on NUMA node 0 and one 200 Gb/s HCA.
local function host(name, ranks)
  return { name = name, ranks = ranks,
           gpus = { { bdf = "0000:18:00.0", cuda_index = 0, numa_node = 0, pcie = { gen = 4, width = 16 } },
                    { bdf = "0000:3b:00.0", cuda_index = 1, numa_node = 0, pcie = { gen = 4, width = 16 } } },
           gpu_links = { { a = 0, b = 1, kind = "PHB" } },
           nics = { { name = "mlx5_0", kind = "rdma", pci = { bdf = "0000:20:00.0", numa_node = 0 },
                      ports = { { port = 1, state = "ACTIVE", rate_gbps = 200 } } } } }
end

local function job(nhosts, per_host)
  local t = { hosts = {}, host_order = {}, ranks = {} }
  for h = 1, nhosts do
    local name, ranks = "h" .. h, {}
    for l = 0, per_host - 1 do
      local r = #t.ranks
      ranks[#ranks + 1] = r
      t.ranks[#t.ranks + 1] = { rank = r, host = name, local_rank = l, cpu = { numa_nodes = { 0 }, affinity = "0-7" } }
    end
    t.hosts[name] = host(name, ranks)
    t.host_order[h] = name
  end
  return t
end

TestReference = {}

function TestReference:test_one_rank_has_none()
  local r, why = G.reference(job(1, 1), {})
  lu.assertNil(r)
  lu.assertStrContains(why, "one rank")
end

function TestReference:test_pcie_pair_within_a_host_then_the_copy()
  local t = job(1, 2)
  local r = G.reference(t, {})
  lu.assertAlmostEquals(r.gbps, 16 * 128 / 130 / 8 * 16, 1e-9)  -- gen4 x16 one way, 31.5 GB/s
  lu.assertStrContains(r.source, "nominal PCIe gen4 x16 (no NVLink)")
  -- a measured copy below the nominal is the reference, the nominal stays the bound
  r = G.reference(t, { h1 = { host = "h1", peer = { { nil, 24 }, { 25 } } } })
  lu.assertEquals(r.gbps, 24.5)
  lu.assertAlmostEquals(r.nominal_gbps, 31.5, 0.1)
  lu.assertStrContains(r.source, "measured GPU->GPU copy 24.5 GB/s (median of 2 pairs")
end

function TestReference:test_across_hosts_the_nic_line_rate()
  local r = G.reference(job(2, 2), {})
  lu.assertEquals(r.gbps, 25)  -- 200 Gb/s
  lu.assertEquals(r.scope, "inter-node")
  lu.assertStrContains(r.source, "NIC line rate mlx5_0/1 200 Gb/s = 25.0 GB/s")
end

TestRanks = {}

function TestRanks:test_local_rank_modulo_gpus()
  local t = job(1, 3)
  local rg = G.rank_gpus(t)
  lu.assertEquals(rg[0].gpu.cuda_index, 0)
  lu.assertEquals(rg[1].gpu.cuda_index, 1)
  lu.assertEquals(rg[2].gpu.cuda_index, 0)
end

TestLinks = {}

function TestLinks:test_far_numa_only_when_the_ranks_use_gpus()
  local t = job(1, 2)
  t.hosts.h1.gpus[2].numa_node = 1
  local f = G.check_links(t)
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].kind, "gpu_numa")
  lu.assertStrContains(f[1].message, "rank 1 uses GPU 1 (0000:3b:00.0) on NUMA node 1")
  lu.assertEquals(G.check_links(t, { gpus_used = false }), {})
end

function TestLinks:test_a_gpu_with_no_nic_on_its_node_across_hosts()
  local t = job(2, 2)
  t.hosts.h2.nics[1].pci.numa_node = 1
  local f = G.check_links(t)
  lu.assertEquals(#f, 2)  -- both GPUs of h2
  for _, x in ipairs(f) do
    lu.assertEquals(x.kind, "nic_numa")
    lu.assertEquals(x.subject.host, "h2")
  end
end

function TestLinks:test_nvlink_down()
  local t = job(1, 1)
  t.hosts.h1.gpus[1].nvlinks_active, t.hosts.h1.gpus[1].nvlinks_present = 11, 12
  t.hosts.h1.gpus[1].nvlinks_down = { 7 }
  local f = G.check_links(t)
  lu.assertEquals(#f, 1)
  lu.assertStrContains(f[1].message, "host h1: GPU 0 (0000:18:00.0) has NVLink 7 down: 11 of 12 links active")
end

TestCopies = {}

-- GPUs 0 and 1 bridged by 4 NVLink3 links (100 GB/s one way), GPU 2 on PCIe only.
local function bridged()
  local t = job(1, 3)
  local h = t.hosts.h1
  h.gpus[3] = { bdf = "0000:5e:00.0", cuda_index = 2, numa_node = 0, pcie = { gen = 4, width = 16 } }
  for k = 1, 2 do h.gpus[k].nvlinks_active, h.gpus[k].nvlink_version = 4, 3 end
  h.gpu_links = { { a = 0, b = 1, kind = "NVLink", links = 4, version = 3 }, { a = 0, b = 2, kind = "PHB" },
                  { a = 1, b = 2, kind = "PHB" } }
  return t
end

local function copies(nv, pcie)
  return { h1 = { host = "h1", devices = { { index = 0 }, { index = 1 }, { index = 2 } },
                  peer = { { nil, nv, pcie }, { nv, nil, pcie }, { pcie, pcie } },
                  host_to_device = { pinned = { 25, 25, 25 } }, device_to_host = { pinned = { 25, 25, 25 } } } }
end

function TestCopies:test_nvlink_copies_against_the_nvlink_peers_only()
  -- 80 GB/s over the bridge, 20 over PCIe between the others: healthy
  lu.assertEquals(G.check_copies(bridged(), copies(80, 20)), {})
  -- 40 GB/s over the bridge: both bridged GPUs, not the PCIe one
  local f = G.check_copies(bridged(), copies(40, 20))
  lu.assertEquals(#f, 2)
  for _, x in ipairs(f) do
    lu.assertEquals(x.kind, "nvlink_copy")
    lu.assertStrContains(x.message, "copies to its NVLink peers at 40.0 GB/s (median), below 70 % of their NVLink3 x4's 100.0 GB/s")
  end
end

function TestCopies:test_a_pinned_copy_below_its_pcie_link()
  local c = copies(80, 20)
  c.h1.host_to_device.pinned[3] = 12
  local f = G.check_copies(bridged(), c)
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].kind, "pcie_copy")
  lu.assertStrContains(f[1].message, "GPU 2 (0000:5e:00.0) pinned host->GPU copy 12.0 GB/s, below 70 % of its PCIe gen4 x16's 31.5 GB/s")
  lu.assertStrContains(f[1].evidence.seed_note, "both directions at once")
end

function TestCopies:test_each_gpu_gets_a_line_healthy_or_not()
  -- the H200's link checks (2026-11-27): gen5 x16, 55.0 and 55.1 GB/s pinned
  local t = job(1, 1)
  t.hosts.h1.gpus[1].pcie = { gen = 5, width = 16 }
  local c = { h1 = { host = "h1", devices = { { index = 0 } }, host_to_device = { pinned = { 54.98 } },
                     device_to_host = { pinned = { 55.08 } } } }
  lu.assertEquals(G.check_copies(t, c), {})
  local l = G.copy_lines(t, c)
  lu.assertEquals(#l, 1)
  lu.assertEquals(l[1], "host h1: GPU 0 (0000:18:00.0) pinned host->GPU 55.0, GPU->host 55.1 GB/s: 87 % and 87 % of its "
    .. "PCIe gen5 x16's 63.0 GB/s one way (healthy from 70 %)")
  t.hosts.h1.gpus[1].pcie = nil
  lu.assertStrContains(G.copy_lines(t, c)[1], "(its PCIe link is not known: not judged)")
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestReference", TestReference }, { "TestRanks", TestRanks }, { "TestLinks", TestLinks },
    { "TestCopies", TestCopies },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
