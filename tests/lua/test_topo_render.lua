-- LuaUnit tests of cs.topo.render (stdlib/cs/topo/text.lua): the text rank 0 prints.
-- Run: commscript --backend self --trusted tests/lua/test_topo_render.lua
local cs = require "commscript"
local lu = require "luaunit"
local topo = require "cs.topo"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "topo_testlib"
local deepcopy, VERSIONS, hca, rank_table, job, kinds, only, assert_finding_shape =
  H.deepcopy, H.VERSIONS, H.hca, H.rank_table, H.job, H.kinds, H.only, H.assert_finding_shape
local CTX  -- set in recipe.run

local recipe = cs.recipe {
  name = "test_topo_render",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.topo.text",
}

TestRender = {}

function TestRender:test_summary_text()
  local list = job()
  list[1].gpus = { { bdf = "0000:17:00.0", vendor = "NVIDIA", device_id = "0x20b0", numa_node = 0,
                     pcie = { gen = 4, width = 8, max_gen = 4, max_width = 16, below_max_width = true } } }
  list[3].nics[1].ports[2].state = "DOWN"
  local s = topo.render(topo.build(list))
  lu.assertStrContains(s, "Topology: 4 ranks on 2 hosts (2 per host)")
  lu.assertStrContains(s, "  versions: commscript 0.1.0, MPI Open MPI v4.1.4, NCCL 2.21.5 (CUDA runtime 12.4, driver 12.4), "
    .. "LuaJIT 2.1.0-beta3 -- same on all ranks")
  lu.assertStrContains(s, "  environment: NCCL_DEBUG=WARN NCCL_IB_HCA=mlx5_0 -- same on all ranks")
  lu.assertStrContains(s, "binary: /opt/commscript/bin/commscript sha256 abababababababab -- same on all ranks")
  lu.assertStrContains(s, "host a: ranks 0-1 (2), CPUs 0-15, 2 NUMA nodes, 2 packages, 16 cores, 16 PUs, Test CPU, 1 GPU")
  lu.assertStrContains(s, "  NUMA node 1: CPUs 8-15")
  lu.assertStrContains(s, "  rank 1 (local 1) pid 1001: CPUs 4-7 (NUMA 0)")
  lu.assertStrContains(s, "  NIC mlx5_0 port 1: ACTIVE, 200 Gb/sec (4X HDR), InfiniBand; PCIe gen4 x16, NUMA 0, 0000:3b:00.0")
  lu.assertStrContains(s, "  NIC mlx5_0 port 2: DOWN, 200 Gb/sec (4X HDR)")
  lu.assertStrContains(s, "  NIC eth0 (ethernet): up, 25000 Mb/s; PCIe gen3 x8, NUMA 1, 0000:5e:00.0")
  lu.assertStrContains(s, "  GPU 0000:17:00.0: NVIDIA 0x20b0, PCIe gen4 x8 (max gen4 x16), NUMA 0")
  lu.assertStrContains(s, "host b: ranks 2-3 (2)")
end

function TestRender:test_versions_that_differ_are_flagged()
  local list = job()
  list[2].versions.backends.nccl.library = "2.19.3"
  local s = topo.render(topo.build(list))
  lu.assertStrContains(s, "NCCL 2.21.5")
  lu.assertStrContains(s, "DIFFER between ranks (see findings)")
  list[3].env.NCCL_ALGO = "Tree"
  lu.assertStrContains(topo.render(topo.build(list)), "environment: NCCL_DEBUG=WARN NCCL_IB_HCA=mlx5_0 -- DIFFERS between ranks")
  list[1].env, list[2].env, list[3].env, list[4].env = {}, {}, {}, {}
  lu.assertStrContains(topo.render(topo.build(list)), "environment: no NCCL_*/TORCH_NCCL_*/TORCH_FR_*/UCX_* variables set -- same")
end

function TestRender:test_many_hosts_one_line_each()
  local list = {}
  for r = 0, 11 do list[r + 1] = rank_table(r, ("node%02d"):format(r), 0) end
  local s = topo.render(topo.build(list), { max_hosts = 2 })
  lu.assertStrContains(s, "Topology: 12 ranks on 12 hosts (1 per host)")
  lu.assertStrContains(s, "host node01: rank 1 (1), CPUs 0-15")
  lu.assertStrContains(s, "host node11: rank 11 (1), 0 GPUs, 2 active IB ports (200G 200G)")
end

function recipe.run(ctx)
  CTX = ctx
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestRender", TestRender },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
