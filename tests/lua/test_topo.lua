-- LuaUnit tests of stdlib/cs/topo.lua: build (hosts, local ranks), check (findings for ranks
-- that disagree on versions, binaries or NCCL_* variables, NIC ports down, PCIe links below
-- their maximum, NIC speeds that differ between hosts, overlapping CPU bindings) on synthetic
-- per-rank tables, render, and collect on the self backend (native.topology of this machine).
-- Run: commscript --backend self --trusted tests/lua/test_topo.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_topo",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.topo",
}

local topo = require "cs.topo"
local CTX  -- set in recipe.run

local function deepcopy(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = deepcopy(x) end
  return setmetatable(c, getmetatable(v))
end

local VERSIONS = {
  version = "0.1.0", luajit = "LuaJIT 2.1.0-beta3",
  backends = {
    self = { library = "built-in" },
    mpi = { library = "Open MPI v4.1.4" },
    nccl = { built = true, header = "2.21.5", library = "2.21.5", cuda_runtime = "12.4", cuda_driver = "12.4" },
  },
}

local function hca(port2_state)
  return {
    name = "mlx5_0", kind = "rdma", fw_ver = "20.39.1002", netdevs = cs.array { "ib0" },
    pci = { bdf = "0000:3b:00.0", numa_node = 0,
            pcie = { gen = 4, width = 16, max_gen = 4, max_width = 16, speed = "16.0 GT/s PCIe",
                     below_max_width = false, below_max_speed = false } },
    ports = {
      { port = 1, state = "ACTIVE", phys_state = "LinkUp", rate = "200 Gb/sec (4X HDR)", rate_gbps = 200,
        link_layer = "InfiniBand" },
      { port = 2, state = port2_state or "ACTIVE", phys_state = "LinkUp", rate = "200 Gb/sec (4X HDR)",
        rate_gbps = 200, link_layer = "InfiniBand" },
    },
  }
end

-- What native.topology() returns on a healthy 2-NUMA host, for `rank` of `host`, bound to
-- 4 CPUs of its own (local rank l -> CPUs 4l..4l+3).
local function rank_table(rank, host, l)
  local first = 4 * l
  return {
    rank = rank, host = host, pid = 1000 + rank,
    cpu = { affinity = ("%d-%d"):format(first, first + 3), count = 4, bound = true, online = "0-15",
            online_count = 16, numa_nodes = cs.array { first < 8 and 0 or 1 } },
    numa = { { node = 0, cpus = "0-7", count = 8 }, { node = 1, cpus = "8-15", count = 8 } },
    hwloc = { available = true, packages = 2, cores = 16, pus = 16, numa_nodes = 2, cpu_model = "Test CPU" },
    nics = {
      hca(),
      { name = "eth0", kind = "net", type = "ethernet", operstate = "up", speed_mbps = 25000, mtu = 9000,
        pci = { bdf = "0000:5e:00.0", numa_node = 1,
                pcie = { gen = 3, width = 8, max_gen = 3, max_width = 8, below_max_width = false,
                         below_max_speed = false } } },
    },
    gpus = cs.array {}, gpu_links = cs.array {},
    exe = { path = "/opt/commscript/bin/commscript", size = 1234, sha256 = string.rep("ab", 32) },
    env = { NCCL_IB_HCA = "mlx5_0", NCCL_DEBUG = "WARN" },
    versions = deepcopy(VERSIONS),
  }
end

-- 2 hosts x 2 ranks, all consistent.
local function job()
  return { rank_table(0, "a", 0), rank_table(1, "a", 1), rank_table(2, "b", 0), rank_table(3, "b", 1) }
end

local function kinds(findings)
  local out = {}
  for _, f in ipairs(findings) do out[#out + 1] = f.kind .. ":" .. f.severity end
  table.sort(out)
  return out
end

local function only(findings, kind)
  local out = {}
  for _, f in ipairs(findings) do
    if f.kind == kind then out[#out + 1] = f end
  end
  return out
end

-- Every finding must pass ctx.report:finding's checks.
local function assert_finding_shape(f)
  lu.assertTrue(f.severity == "info" or f.severity == "warn" or f.severity == "error", f.severity)
  lu.assertIsString(f.message)
  lu.assertNotNil(f.subject)
  lu.assertIsTable(f.evidence)
  lu.assertIsString(f.remedy)
  lu.assertTrue(#f.remedy > 0)
end

TestBuild = {}

function TestBuild:test_hosts_and_local_ranks()
  local list = job()
  -- the order of arrival does not matter: ranks are sorted
  list[1], list[4] = list[4], list[1]
  local t = topo.build(list)
  lu.assertEquals(t.size, 4)
  lu.assertEquals(t.host_order, { "a", "b" })
  lu.assertEquals(t.hosts.a.ranks, { 0, 1 })
  lu.assertEquals(t.hosts.b.ranks, { 2, 3 })
  lu.assertEquals(t.hosts.b.local_size, 2)
  lu.assertEquals(t.hosts.a.first_rank, 0)
  lu.assertEquals(t.hosts.b.first_rank, 2)
  for i, e in ipairs(t.ranks) do
    lu.assertEquals(e.rank, i - 1)
    lu.assertEquals(e.local_rank, (i - 1) % 2)
    lu.assertEquals(e.local_size, 2)
    lu.assertNil(e.cpu.cpus)
  end
  lu.assertEquals(t.ranks[4].cpu.affinity, "4-7")
  lu.assertEquals(#t.hosts.a.numa, 2)
  lu.assertEquals(t.hosts.a.nics[1].name, "mlx5_0")
  lu.assertEquals(t.hosts.a.cpu_online_count, 16)
  lu.assertEquals(t.summary.ranks, 4)
  lu.assertEquals(t.summary.hosts, 2)
  lu.assertEquals(t.summary.ranks_per_host, { min = 2, max = 2 })
  lu.assertTrue(t.summary.uniform)
  lu.assertEquals(t.summary.ib_ports_active, 4)
  lu.assertEquals(t.summary.ib_ports_down, 0)
  lu.assertEquals(t.summary.numa_nodes, 4)
  lu.assertEquals(t.summary.binaries, 1)
  lu.assertEquals(t.summary.versions["NCCL library"], "2.21.5")
  lu.assertEquals(t.summary.versions["MPI library"], "Open MPI v4.1.4")
end

function TestBuild:test_host_data_from_the_first_rank_only()
  -- what collect sends: the other ranks of a host leave out the host-level keys
  local list = job()
  for _, i in ipairs { 2, 4 } do
    list[i].nics, list[i].numa, list[i].hwloc, list[i].gpus, list[i].gpu_links = nil, nil, nil, nil, nil
  end
  local t = topo.build(list)
  lu.assertEquals(#t.hosts.b.nics, 2)
  lu.assertEquals(t.hosts.b.hwloc.pus, 16)
  lu.assertEquals(t.ranks[4].cpu.affinity, "4-7")
end

function TestBuild:test_round_trips_through_json()
  local t = topo.build(job())
  local back = cs.json.decode(cs.json.encode(t))
  lu.assertEquals(back.hosts.a.ranks, { 0, 1 })
  lu.assertEquals(back.ranks[3].host, "b")
  lu.assertEquals(back.summary.ranks_per_host.max, 2)
end

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
  lu.assertStrContains(topo.render(topo.build(list)), "environment: no NCCL_*/TORCH_NCCL_*/UCX_* variables set -- same")
end

function TestRender:test_many_hosts_one_line_each()
  local list = {}
  for r = 0, 11 do list[r + 1] = rank_table(r, ("node%02d"):format(r), 0) end
  local s = topo.render(topo.build(list), { max_hosts = 2 })
  lu.assertStrContains(s, "Topology: 12 ranks on 12 hosts (1 per host)")
  lu.assertStrContains(s, "host node01: rank 1 (1), CPUs 0-15")
  lu.assertStrContains(s, "host node11: rank 11 (1), 0 GPUs, 2 active IB ports (200G 200G)")
end

TestCollect = {}

function TestCollect:test_collect_on_the_self_backend()
  local t = topo.collect(CTX)
  lu.assertEquals(t.size, 1)
  lu.assertEquals(t.host_order, { CTX.host })
  local e = t.ranks[1]
  lu.assertEquals(e.rank, 0)
  lu.assertEquals(e.local_rank, 0)
  lu.assertIsString(e.cpu.affinity)
  lu.assertEquals(#e.exe.sha256, 64)
  lu.assertEquals(e.versions.version, cs.version)
  lu.assertIsTable(t.hosts[CTX.host].nics)
  lu.assertIsTable(t.hosts[CTX.host].gpus)
  lu.assertIsTable(t.hosts[CTX.host].hwloc)
  local f = topo.check(t)
  for _, x in ipairs(f) do assert_finding_shape(x) end
  lu.assertStrContains(topo.render(t), "Topology: 1 rank on 1 host (1 per host)")
  -- JSON for the report
  lu.assertIsString(cs.json.encode(t))
end

function TestCollect:test_native_topology_on_a_fixture_root()
  -- this file is <root>/tests/lua/test_topo.lua (the chunk name is "@" .. its path)
  local src = debug.getinfo(1, "S").source
  lu.assertEquals(src:sub(1, 1), "@", "cannot locate the source tree")
  local root = (src:sub(2):match("^(.*)/[^/]*$") or ".") .. "/../.."
  local native = require "commscript.native"
  local t = native.topology(root .. "/tests/fixtures/sysfs/dual_numa")
  lu.assertEquals(#t.numa, 2)
  lu.assertEquals(t.nics[1].name, "mlx5_0")
  lu.assertEquals(t.nics[1].ports[2].state, "DOWN")
  lu.assertEquals(t.gpus[1].pcie.below_max_width, true)
  t.rank = 0
  local all = topo.build { t }
  local f = topo.check(all)
  lu.assertEquals(#only(f, "nic_down"), 1)
  lu.assertEquals(#only(f, "pcie"), 1)
  local s = topo.render(all)
  lu.assertStrContains(s, "NIC mlx5_0 port 1: ACTIVE, 200 Gb/sec (4X HDR), InfiniBand; PCIe gen4 x16, NUMA 0")
  lu.assertStrContains(s, "NIC eth0 (ethernet): up, 25000 Mb/s; PCIe gen3 x8, NUMA 1")
  lu.assertStrContains(s, "NIC ib0 (infiniband, mlx5_0): up, 200000 Mb/s")
end

function TestCollect:test_bad_root_argument()
  local native = require "commscript.native"
  local ok, err = pcall(native.topology, "")
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "bad argument #1")
  local t = native.topology("/nonexistent/sysfs")
  lu.assertEquals(#t.nics, 0)
  lu.assertEquals(native.topology(nil, { hwloc = false }).hwloc.available, false)
  lu.assertStrContains(tostring(select(2, pcall(native.topology, nil, { hwlock = false }))), "hwlock")
end

function recipe.run(ctx)
  CTX = ctx
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestBuild", TestBuild },
    { "TestCheck", TestCheck },
    { "TestRender", TestRender },
    { "TestCollect", TestCollect },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
