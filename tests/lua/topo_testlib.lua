-- Helpers shared by the tests of cs.topo (tests/lua/test_topo*.lua): synthetic per-rank tables
-- (what native.topology() returns on a healthy 2-NUMA host) and finding filters. Loaded with
-- require "topo_testlib" (the tests put their own directory on package.path; they run --trusted).
local cs = require "commscript"
local lu = require "luaunit"
local H = {}

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

H.deepcopy, H.VERSIONS, H.hca, H.rank_table, H.job, H.kinds, H.only, H.assert_finding_shape =
  deepcopy, VERSIONS, hca, rank_table, job, kinds, only, assert_finding_shape
return H
