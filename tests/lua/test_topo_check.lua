-- LuaUnit tests of cs.topo.check (stdlib/cs/topo/checks.lua): findings for ranks that disagree on
-- versions, binaries or audited variables (NCCL_*, TORCH_NCCL_*, TORCH_FR_*, UCX_*), NIC ports down, PCIe links below their maximum, NIC
-- speeds that differ between hosts, overlapping CPU bindings, on synthetic per-rank tables.
-- Run: commscript --backend self --trusted tests/lua/test_topo_check.lua
local cs = require "commscript"
local lu = require "luaunit"
local topo = require "cs.topo"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "topo_testlib"
local deepcopy, VERSIONS, hca, rank_table, job, kinds, only, assert_finding_shape =
  H.deepcopy, H.VERSIONS, H.hca, H.rank_table, H.job, H.kinds, H.only, H.assert_finding_shape
local CTX  -- set in recipe.run

local recipe = cs.recipe {
  name = "test_topo_check",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.topo.checks",
}

TestCheck = {}

function TestCheck:test_identical_ranks_give_no_findings()
  local f = topo.check(topo.build(job()))
  lu.assertEquals(#f, 0, table.concat(kinds(f), " "))
  lu.assertEquals(cs.json.encode(f), "[]")
end

function TestCheck:test_a_rank_with_another_nccl_version_is_named()
  local list = job()
  list[4].versions.backends.nccl.library = "2.19.3"
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "version:error" })
  local v = f[1]
  assert_finding_shape(v)
  lu.assertStrContains(v.message, "NCCL library differs between ranks")
  lu.assertStrContains(v.message, "2.21.5 on ranks 0-2 (a, b)")
  lu.assertStrContains(v.message, "2.19.3 on rank 3 (b)")
  lu.assertEquals(v.subject.ranks, { 3 })
  lu.assertEquals(v.subject.hosts, { "b" })
  lu.assertEquals(v.subject.variable, "NCCL library")
  lu.assertEquals(v.evidence.field, "backends.nccl.library")
  lu.assertEquals(#v.evidence.groups, 2)
  lu.assertEquals(v.evidence.groups[2].value, "2.19.3")
  lu.assertStrContains(v.remedy, "same NCCL")
end

function TestCheck:test_versions_missing_on_a_rank_and_other_fields()
  local list = job()
  list[1].versions.backends.nccl.cuda_driver = "12.2"
  list[2].versions.backends.nccl.cuda_driver = "12.2"
  list[3].versions.backends.mpi.library = nil
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "version:error", "version:warn" })
  local by = {}
  for _, x in ipairs(f) do by[x.subject.variable] = x end
  -- a tie (2 against 2): the group with rank 0 is the reference
  lu.assertEquals(by["CUDA driver"].subject.ranks, { 2, 3 })
  lu.assertStrContains(by["MPI library"].message, "(unset) on rank 2 (b)")
end

function TestCheck:test_different_binaries()
  local list = job()
  list[3].exe.sha256 = string.rep("cd", 32)
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "binary:warn" })
  assert_finding_shape(f[1])
  lu.assertEquals(f[1].subject.ranks, { 2 })
  lu.assertStrContains(f[1].message, "cdcdcdcdcdcd on rank 2 (b)")
end

function TestCheck:test_nccl_env_differs()
  local list = job()
  list[2].env.NCCL_IB_HCA = "mlx5_1"
  list[3].env.NCCL_P2P_DISABLE = "1"
  list[4].env.OTHER_VARIABLE = "x"  -- not compared
  list[4].env.CUDA_VISIBLE_DEVICES = "1"  -- per rank by design: not compared
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "env:warn", "env:warn" })
  local by = {}
  for _, x in ipairs(f) do
    assert_finding_shape(x)
    by[x.subject.variable] = x
  end
  lu.assertEquals(by.NCCL_IB_HCA.subject.ranks, { 1 })
  lu.assertStrContains(by.NCCL_IB_HCA.message, "mlx5_1 on rank 1 (a)")
  lu.assertEquals(by.NCCL_P2P_DISABLE.subject.ranks, { 2 })
  lu.assertStrContains(by.NCCL_P2P_DISABLE.message, "(unset) on ranks 0-1,3")
end

-- The topology records what the environment audit lints (one list in the engine,
-- engine/core/env_policy.hpp, read by cs.env.registry): ctest sets one variable of each audited
-- family (tests/lua/CMakeLists.txt), and each must reach this rank's collected topology and be
-- compared between ranks. TORCH_FR_* was once audited but never collected.
function TestCheck:test_every_audited_family_is_collected_and_compared()
  local audited = require("cs.env.registry").AUDITED_PREFIXES
  lu.assertTrue(#audited >= 4)
  local env = cs.environ()
  local mine = topo.collect(CTX).ranks[1].env
  for _, p in ipairs(audited) do
    local name = p .. "CS_LUA_TEST"
    lu.assertNotNil(env[name], name .. " is not set: tests/lua/CMakeLists.txt sets one per audited family")
    lu.assertEquals(mine[name], env[name], name .. ": an audited family the topology did not collect")
    local list = job()
    for _, r in ipairs(list) do r.env = deepcopy(mine) end
    list[2].env[name] = "other"
    local f = topo.check(topo.build(list))
    lu.assertEquals(kinds(f), { "env:warn" }, name)
    lu.assertEquals(f[1].subject.variable, name)
    lu.assertEquals(f[1].subject.ranks, { 1 })
  end
  lu.assertNotNil(mine.TORCH_FR_CS_LUA_TEST)
end

function TestCheck:test_ib_port_down()
  local list = job()
  list[3].nics[1] = hca("DOWN")
  list[3].nics[1].ports[2].phys_state = "Disabled"
  local f = only(topo.check(topo.build(list)), "nic_down")
  lu.assertEquals(#f, 1)
  assert_finding_shape(f[1])
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject, { host = "b", nic = "mlx5_0", port = 2 })
  lu.assertStrContains(f[1].message, "host b: mlx5_0 port 2 is DOWN (physical state Disabled)")
  lu.assertEquals(topo.build(list).summary.ib_ports_down, 1)
end

function TestCheck:test_ethernet_down_is_info()
  local list = job()
  list[1].nics[2].operstate = "down"
  list[1].nics[2].speed_mbps = nil
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "nic_down:info" })
  lu.assertStrContains(f[1].message, "network interface eth0 is down")
end

function TestCheck:test_pcie_below_max_width()
  local list = job()
  list[1].gpus = { { bdf = "0000:17:00.0", vendor = "NVIDIA", device_id = "0x20b0", numa_node = 0, source = "sysfs",
                     pcie = { gen = 4, width = 8, max_gen = 4, max_width = 16, gbytes_per_s = 15.75,
                              max_gbytes_per_s = 31.5, below_max_width = true, below_max_speed = false } } }
  list[3].gpus = { { bdf = "0000:17:00.0", vendor = "NVIDIA", numa_node = 0, source = "sysfs",
                     pcie = { gen = 1, width = 16, max_gen = 4, max_width = 16, below_max_width = false,
                              below_max_speed = true } } }
  local eth = list[3].nics[2].pci.pcie
  eth.gen, eth.below_max_speed = 2, true
  local f = only(topo.check(topo.build(list)), "pcie")
  lu.assertEquals(#f, 3)
  for _, x in ipairs(f) do assert_finding_shape(x) end
  lu.assertEquals(f[1].severity, "warn")
  lu.assertEquals(f[1].subject.host, "a")
  lu.assertStrContains(f[1].message, "GPU 0000:17:00.0 (PCI 0000:17:00.0)")
  lu.assertStrContains(f[1].message, "gen4 x8 (max gen4 x16); 15.8 of 31.5 GB/s per direction")
  -- on host b: the NIC below its speed is a warning, the (idle) GPU below its speed only info
  lu.assertEquals(f[2].subject.device, "NIC eth0")
  lu.assertEquals(f[2].severity, "warn")
  lu.assertEquals(f[3].severity, "info")
  lu.assertStrContains(f[3].remedy, "idle")
end

function TestCheck:test_nic_slower_on_one_host()
  local list = job()
  list[3].nics[1].ports[1].rate, list[3].nics[1].ports[1].rate_gbps = "100 Gb/sec (4X EDR)", 100
  list[3].nics[2].speed_mbps = 10000
  local f = only(topo.check(topo.build(list)), "nic_speed")
  lu.assertEquals(#f, 2)
  assert_finding_shape(f[1])
  lu.assertEquals(f[1].subject, { hosts = { "b" }, nic = "mlx5_0 port 1" })
  lu.assertStrContains(f[1].message, "mlx5_0 port 1 runs slower on host b than elsewhere (200 Gb/s): 100 Gb/s on b")
  lu.assertStrContains(f[2].message, "eth0 runs slower on host b than elsewhere (25 Gb/s): 10 Gb/s on b")
end

function TestCheck:test_overlapping_cpu_binding()
  local list = job()
  list[2].cpu.affinity = "2-5"
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "cpu_overlap:warn" })
  assert_finding_shape(f[1])
  lu.assertEquals(f[1].subject, { host = "a" })
  lu.assertStrContains(f[1].message, "host a: ranks are bound to overlapping CPUs: rank 0 (CPUs 0-3) and rank 1 "
    .. "(CPUs 2-5) share CPUs 2-3")
  lu.assertEquals(f[1].evidence.overlaps, { { ranks = { 0 }, other_ranks = { 1 }, shared = "2-3" } })
  lu.assertEquals(f[1].evidence.binding, { { rank = 0, affinity = "0-3" }, { rank = 1, affinity = "2-5" } })
end

function TestCheck:test_ranks_crowded_on_one_cpu()
  local list = job()
  list[3].cpu.affinity, list[4].cpu.affinity = "0", "0"
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "cpu_overlap:warn" })
  lu.assertEquals(f[1].subject, { host = "b" })
  lu.assertStrContains(f[1].message, "ranks 2-3 are all bound to CPU 0 (2 ranks on 1 CPU)")
end

function TestCheck:test_ranks_sharing_a_numa_node_binding_are_fine()
  -- --bind-to numa: 4 ranks per 8-CPU node share the node's CPUs; each still has CPUs of its own
  local list = {}
  for r = 0, 7 do
    list[r + 1] = rank_table(r, "a", r)
    list[r + 1].cpu.affinity = r < 4 and "0-7" or "8-15"
  end
  lu.assertEquals(kinds(topo.check(topo.build(list))), {})
end

function TestCheck:test_unbound_and_oversubscribed()
  local list = {}
  for r = 0, 3 do
    list[r + 1] = rank_table(r, "solo", 0)
    list[r + 1].cpu = { affinity = "0-1", count = 2, bound = false, online = "0-1", online_count = 2,
                        numa_nodes = { 0 } }
  end
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "oversubscribed:info", "unbound:info" })
  for _, x in ipairs(f) do assert_finding_shape(x) end
  local u = only(f, "unbound")[1]
  lu.assertStrContains(u.message, "host solo: its 4 ranks are not bound to CPUs (each may run on any of 0-1)")
  lu.assertStrContains(only(f, "oversubscribed")[1].message, "runs 4 ranks on 2 CPUs")
end

function TestCheck:test_uneven_ranks_per_host()
  local list = job()
  list[#list + 1] = rank_table(4, "b", 2)
  local f = topo.check(topo.build(list))
  lu.assertEquals(kinds(f), { "ranks_per_host:info" })
  lu.assertStrContains(f[1].message, "2 to 3")
end

function TestCheck:test_findings_are_deterministic()
  local list = job()
  list[2].env.NCCL_IB_HCA = "x"
  list[2].env.NCCL_ALGO = "Ring"
  list[3].versions.luajit = "other"
  list[4].cpu.affinity = "0-7"
  local a = cs.json.encode(topo.check(topo.build(deepcopy(list))))
  for _ = 1, 5 do lu.assertEquals(cs.json.encode(topo.check(topo.build(deepcopy(list)))), a) end
end

function recipe.run(ctx)
  CTX = ctx
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestCheck", TestCheck },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
