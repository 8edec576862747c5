-- LuaUnit tests of cs.topo's model (stdlib/cs/topo/model.lua: build, hosts and local ranks,
-- oversubscribed), collect on the self backend (native.topology of this machine and of a
-- fixture sysfs), and the API cs.topo re-exports.
-- Run: commscript --backend self --trusted tests/lua/test_topo.lua
local cs = require "commscript"
local lu = require "luaunit"
local topo = require "cs.topo"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "topo_testlib"
local deepcopy, VERSIONS, hca, rank_table, job, kinds, only, assert_finding_shape =
  H.deepcopy, H.VERSIONS, H.hca, H.rank_table, H.job, H.kinds, H.only, H.assert_finding_shape
local CTX  -- set in recipe.run

local recipe = cs.recipe {
  name = "test_topo",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.topo",
}

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

TestApi = {}

-- cs.topo keeps its API after the split: every name from the part that defines it.
function TestApi:test_every_part_is_re_exported()
  local parts = { ["topo.model"] = { "build", "summarize", "collect", "oversubscribed", "ranges" },
                  ["topo.checks"] = { "check" }, ["topo.text"] = { "render" } }
  for part, names in pairs(parts) do
    local mod = require("cs." .. part)
    for _, n in ipairs(names) do lu.assertIs(topo[n], mod[n], "cs.topo." .. n) end
  end
  lu.assertIsFunction(topo.report)
  lu.assertNil(topo.internal)
  lu.assertIs(topo.ranges, require("cs.text").ranges)
end

function TestApi:test_oversubscribed()
  local t = topo.build(job())
  lu.assertEquals(topo.oversubscribed(t), {})
  t.hosts.a.cpu_online_count = 1  -- 2 ranks on a host with 1 CPU
  lu.assertEquals(topo.oversubscribed(t), { a = true })
end

function recipe.run(ctx)
  CTX = ctx
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestBuild", TestBuild },
    { "TestCollect", TestCollect },
    { "TestApi", TestApi },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
