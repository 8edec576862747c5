-- LuaUnit tests of cs.env.ranks: compare, dedupe (merging per-rank findings), snapshot.
-- Run: commscript --backend self --trusted tests/lua/test_env_ranks.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env_ranks",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env.ranks",
}

-- =============================================================================================
TestCompare = {}

function TestCompare:test_same_everywhere()
  local s = { NCCL_ALGO = "Ring", OMPI_COMM_WORLD_RANK = "0" }
  nothing(env.compare { s, { NCCL_ALGO = "Ring", OMPI_COMM_WORLD_RANK = "1" } })
end

function TestCompare:test_differs_names_variable_and_ranks()
  local fs = env.compare({ { NCCL_ALGO = "Ring" }, {}, {}, { NCCL_ALGO = "Ring" } }, { hosts = { "a", "a", "b", "b" } })
  local f = one(fs, "differs-between-ranks", "error", "NCCL_ALGO")
  lu.assertStrContains(f.message, "NCCL_ALGO differs between ranks")
  lu.assertStrContains(f.message, "'Ring' on ranks 0,3")
  lu.assertStrContains(f.message, "unset on ranks 1-2")
  lu.assertEquals(#f.evidence.values, 2)
  lu.assertEquals(f.subject.ranks, { 0, 1, 2, 3 })  -- no majority: every rank is involved
  lu.assertEquals(f.evidence.values[2].hosts, { "a", "b" })
end

function TestCompare:test_majority_and_minority()
  local fs = env.compare { { NCCL_IB_HCA = "mlx5_0" }, { NCCL_IB_HCA = "mlx5_0" }, { NCCL_IB_HCA = "mlx5_1" } }
  local f = one(fs, "differs-between-ranks", "warn", "NCCL_IB_HCA")
  lu.assertEquals(f.subject.ranks, { 2 })
  lu.assertStrContains(f.message, "'mlx5_0' on ranks 0-1; 'mlx5_1' on rank 2")
end

function TestCompare:test_severities_and_per_rank_names()
  local a = { NCCL_DEBUG = "INFO", UCX_TLS = "rc", TORCH_NCCL_BLOCKING_WAIT = "1", CUDA_VISIBLE_DEVICES = "0",
              OMPI_COMM_WORLD_RANK = "0", OMPI_MCA_orte_ess_node_rank = "0", OMPI_MCA_pml = "ucx", CUDA_LAUNCH_BLOCKING = "1" }
  local b = { NCCL_DEBUG = "WARN", UCX_TLS = "tcp", TORCH_NCCL_BLOCKING_WAIT = "0", CUDA_VISIBLE_DEVICES = "1",
              OMPI_COMM_WORLD_RANK = "1", OMPI_MCA_orte_ess_node_rank = "1", OMPI_MCA_pml = "ob1", CUDA_LAUNCH_BLOCKING = "0" }
  local fs = env.compare { a, b }
  local sev = {}
  for _, f in ipairs(fs) do sev[f.subject.variable] = f.severity end
  lu.assertEquals(sev, { NCCL_DEBUG = "info", UCX_TLS = "warn", TORCH_NCCL_BLOCKING_WAIT = "warn", OMPI_MCA_pml = "warn",
                         CUDA_LAUNCH_BLOCKING = "info" })
end

function TestCompare:test_one_rank()
  nothing(env.compare { { NCCL_ALGO = "Ring" } })
end

-- =============================================================================================
TestMerge = {}

function TestMerge:test_dedupe_lists_ranks()
  local f4 = env.audit { NCCL_BUFFSIZE = "4M" }
  local out = env.dedupe({ f4, f4, env.audit {}, f4 }, { hosts = { "h0", "h0", "h1", "h1" } })
  lu.assertEquals(#out, 1)
  lu.assertEquals(out[1].subject.ranks, { 0, 1, 3 })
  lu.assertEquals(out[1].subject.hosts, { "h0", "h1" })
  lu.assertEquals(out[1].subject.variable, "NCCL_BUFFSIZE")
end

function TestMerge:test_different_values_stay_apart()
  local out = env.dedupe { env.audit { NCCL_BUFFSIZE = "4M" }, env.audit { NCCL_BUFFSIZE = "8M" } }
  lu.assertEquals(#out, 2)
  lu.assertEquals(out[1].subject.ranks, { 0 })
  lu.assertEquals(out[2].subject.ranks, { 1 })
end

function TestMerge:test_sorted_by_severity()
  local out = env.audit { NCCL_IB_DISABLE = "1", NCCL_BUFFSIZE = "4M", NCCL_IB_TIMEOUT = "22s" }
  lu.assertEquals(out[1].severity, "error")
  lu.assertEquals(out[#out].severity, "info")
end

function TestMerge:test_format_table()
  local out = env.dedupe { env.audit { NCCL_BUFFSIZE = "4M" }, env.audit { NCCL_BUFFSIZE = "4M" } }
  local lines = env.format_table(out, 2)
  lu.assertStrContains(lines[1], "severity")
  lu.assertStrContains(lines[2], "NCCL_BUFFSIZE")
  lu.assertStrContains(lines[2], "4M")
  lu.assertStrContains(lines[2], "all")
  lu.assertStrContains(lines[3], "-> write the number itself")
  lu.assertNotStrContains(lines[3], "set at")
  local conf = env.audit({ NCCL_BUFFSIZE = "4M" }, { sources = { NCCL_BUFFSIZE = "/etc/nccl.conf:2" } })
  lu.assertStrContains(env.format_table(conf, 1)[3], "(set at /etc/nccl.conf:2)")
end

function TestMerge:test_findings_are_valid_report_findings()
  -- what ctx.report:finding requires, and plain data (JSON round trip)
  local fs = env.audit { NCCL_BUFFSIZE = "4M", NCCL_TIMEOUT = "5", NCCL_P2P_LEVEL = "nvl" }
  for _, f in ipairs(fs) do
    lu.assertTrue(f.severity == "info" or f.severity == "warn" or f.severity == "error")
    lu.assertEquals(type(f.subject.variable), "string")
    lu.assertEquals(type(f.message), "string")
    lu.assertEquals(type(f.evidence), "table")
    lu.assertEquals(type(f.remedy), "string")
    lu.assertEquals(cs.json.decode(cs.json.encode(f)).message, f.message)
  end
end

-- env.collect over a fake two-rank communicator: rank 1 is rank 0 plus NCCL_ALGO=Ring.
function TestMerge:test_collect()
  local d = tmpdir()
  local ctx = {
    host = "h0", config = { env = { NCCL_DEBUG = "WARNING" } },
    comm = { allgather_value = function(_, v)
      local other = cs.json.decode(cs.json.encode(v))
      other.host = "h1"
      other.snapshot.NCCL_ALGO = "Ring"
      return { v, other }
    end },
  }
  local a = env.collect(ctx, { vars = { NCCL_DEBUG = "WARNING", NCCL_BUFFSIZE = "4M", PATH = "/bin" }, host_checks = false,
                               home = d, system_file = d .. "/none.conf" })
  lu.assertEquals(a.nhosts, 2)
  lu.assertEquals(a.audited, 2)
  lu.assertEquals(a.counts, { error = 3, warn = 0, info = 0 })
  local dbg = one(a.findings, "enum-invalid", "error", "NCCL_DEBUG")
  lu.assertEquals(dbg.subject.ranks, { 0, 1 })
  lu.assertEquals(dbg.subject.hosts, { "h0", "h1" })
  lu.assertEquals(dbg.evidence.source, "config [env]")
  lu.assertEquals(one(a.findings, "int-size-suffix", "error").evidence.source, "environment")
  lu.assertEquals(one(a.findings, "differs-between-ranks", "error", "NCCL_ALGO").subject.ranks, { 0, 1 })
  lu.assertEquals(#a.files, 2)
  os.execute("rm -rf '" .. d .. "'")
end

-- =============================================================================================
TestSnapshot = {}

function TestSnapshot:test_subset()
  local s = env.snapshot { NCCL_DEBUG = "WARN", TORCH_NCCL_BLOCKING_WAIT = "1", TORCH_FR_BUFFER_SIZE = "2000",
                           UCX_TLS = "rc", OMPI_MCA_pml = "ucx", CUDA_VISIBLE_DEVICES = "0", PATH = "/bin", HOME = "/",
                           OMPI_MCA_orte_precondition_transports = "secret", NCCL_API_TOKEN = "x" }
  lu.assertEquals(s, { NCCL_DEBUG = "WARN", TORCH_NCCL_BLOCKING_WAIT = "1", TORCH_FR_BUFFER_SIZE = "2000", UCX_TLS = "rc",
                       OMPI_MCA_pml = "ucx", CUDA_VISIBLE_DEVICES = "0" })
end

function TestSnapshot:test_interfaces_from_the_engine()
  local l = env.interfaces()
  lu.assertIsTable(l)
  lu.assertEquals(l, require("commscript.native").interfaces())
  local has_lo = false
  for i, n in ipairs(l) do
    if n == "lo" then has_lo = true end
    if i > 1 then lu.assertTrue(l[i - 1] < n, "sorted, no duplicates") end
  end
  lu.assertTrue(has_lo, "the loopback interface (virtual) is listed: " .. table.concat(l, ","))
end

function TestSnapshot:test_rdma_devices_from_the_engine_nics()
  lu.assertNil(env.rdma_devices(nil))
  lu.assertNil(env.rdma_devices {})   -- no RDMA device: nothing to check against
  lu.assertNil(env.rdma_devices { { name = "eth0", kind = "net" } })
  lu.assertEquals(env.rdma_devices { { name = "mlx5_1", kind = "rdma" }, { name = "ib0", kind = "net" },
                                     { name = "mlx5_0", kind = "rdma" }, { name = "mlx5_1", kind = "rdma" } },
                  { "mlx5_0", "mlx5_1" })
end

function TestSnapshot:test_rdma_devices_of_a_fixture_sysfs()
  -- this file is <root>/tests/lua/test_env_ranks.lua (the chunk name is "@" .. its path)
  local root = (debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/../.."
  local t = require("commscript.native").topology(root .. "/tests/fixtures/sysfs/dual_numa", { hwloc = false })
  lu.assertEquals(env.rdma_devices(t.nics), { "mlx5_0" })
end

function TestSnapshot:test_topology_without_the_binary_hash()
  local native = require "commscript.native"
  lu.assertNil(native.topology(nil, { hwloc = false, exe = false }).exe)
  lu.assertEquals(#native.topology(nil, { hwloc = false }).exe.sha256, 64)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestCompare", TestCompare },
    { "TestMerge", TestMerge },
    { "TestSnapshot", TestSnapshot },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
