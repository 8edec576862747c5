-- LuaUnit tests of cs.env.checks: the checks of one value by kind (integers, enums, P2P levels, NCCL_ALGO/PROTO, name and interface lists).
-- Run: commscript --backend self --trusted tests/lua/test_env_checks.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env_checks",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env.checks",
}

-- =============================================================================================
-- Integer parameters (NCCL_PARAM, strtoll semantics, §1.4)
TestInt = {}

function TestInt:test_size_suffix()
  local f = one(audit { NCCL_BUFFSIZE = "4M" }, "int-size-suffix", "error", "NCCL_BUFFSIZE")
  lu.assertEquals(f.evidence.parsed_as, 4)
  lu.assertEquals(f.evidence.value, "4M")
  lu.assertEquals(f.evidence.meant, 4194304)
  lu.assertStrContains(f.message, "read as 4")
  lu.assertStrContains(f.remedy, "NCCL_BUFFSIZE=4194304")
  one(audit { NCCL_BUFFSIZE = "64KiB" }, "int-size-suffix", "error")
  -- passing: the number in bytes
  local ok = audit { NCCL_BUFFSIZE = "4194304" }
  clean(ok)
  none(ok, "int-size-suffix")
end

function TestInt:test_exponent_and_fraction()
  local f = one(audit { NCCL_P2P_NET_CHUNKSIZE = "1e3" }, "int-exponent", "error")
  lu.assertEquals(f.evidence.parsed_as, 1)
  lu.assertEquals(f.evidence.meant, 1000)
  one(audit { NCCL_IB_TIMEOUT = "1.5" }, "int-fraction", "error")
  local w = one(audit { NCCL_IB_TIMEOUT = "20.0" }, "int-fraction", "warn")
  lu.assertEquals(w.evidence.parsed_as, 20)
  nothing(audit { NCCL_P2P_NET_CHUNKSIZE = "1000" })
end

function TestInt:test_octal()
  local f = one(audit { NCCL_IB_TIMEOUT = "010" }, "int-octal", "error")
  lu.assertEquals(f.evidence.parsed_as, 8)
  lu.assertEquals(f.evidence.meant, 10)
  local g = one(audit { NCCL_IB_TIMEOUT = "08" }, "int-octal", "error")
  lu.assertEquals(g.evidence.parsed_as, 0)
  -- passing: hex is explicit, a single 0 is 0
  nothing(audit { NCCL_IB_TC = "0x68" })
  nothing(audit { NCCL_IB_SL = "0" })
end

function TestInt:test_words()
  local f = one(audit { NCCL_IB_DISABLE = "true" }, "int-word", "error", "NCCL_IB_DISABLE")
  lu.assertEquals(f.evidence.parsed_as, 0)
  lu.assertStrContains(f.message, "read as 0")
  lu.assertStrContains(f.remedy, "NCCL_IB_DISABLE=1")
  one(audit { NCCL_SHM_DISABLE = "yes" }, "int-word", "error")
  -- "false" reads as 0 by accident: a warning, not an error
  one(audit { NCCL_IB_DISABLE = "false" }, "int-word", "warn")
  local ok = audit { NCCL_IB_DISABLE = "1" }
  clean(ok)
  none(ok, "int-word")
end

function TestInt:test_nonnumeric()
  local f = one(audit { NCCL_IB_RETRY_CNT = "seven" }, "int-nonnumeric", "error")
  lu.assertEquals(f.evidence.parsed_as, 0)
  nothing(audit { NCCL_IB_RETRY_CNT = "7" })
end

function TestInt:test_trailing_text()
  local f = one(audit { NCCL_IB_TIMEOUT = "22s" }, "int-trailing", "warn")
  lu.assertEquals(f.evidence.parsed_as, 22)
  nothing(audit { NCCL_IB_TIMEOUT = "22" })
  local s = one(audit { NCCL_IB_TIMEOUT = "22 " }, "int-trailing-space", "info")
  lu.assertEquals(s.evidence.parsed_as, 22)
end

function TestInt:test_overflow()
  one(audit { NCCL_SOCKET_MAGIC = "99999999999999999999" }, "int-overflow", "warn")
  nothing(audit { NCCL_SOCKET_MAGIC = "0x564abc" })
end

function TestInt:test_empty_means_default()
  local f = one(audit { NCCL_IB_TIMEOUT = "" }, "empty", "info")
  lu.assertEquals(f.evidence.parsed_as, "default")
  none(audit { NCCL_IB_TIMEOUT = "20" }, "empty")
end

function TestInt:test_p2p_disable_exactly_one()
  local f = one(audit { NCCL_P2P_DISABLE = "2" }, "exactly-one", "error", "NCCL_P2P_DISABLE")
  lu.assertStrContains(f.message, "exactly 1")
  one(audit { NCCL_P2P_DISABLE = "-1" }, "exactly-one", "error")
  clean(audit { NCCL_P2P_DISABLE = "1" })
  clean(audit { NCCL_P2P_DISABLE = "0" })
  -- "true" is read as 0: P2P stays enabled
  one(audit { NCCL_P2P_DISABLE = "true" }, "int-word", "error")
end

function TestInt:test_bool_range()
  one(audit { NCCL_NET_GDR_READ = "2" }, "bool-range", "warn")
  nothing(audit { NCCL_NET_GDR_READ = "1" })
end

function TestInt:test_documented_values()
  local f = one(audit { NCCL_NTHREADS = "100" }, "int-values", "warn")
  lu.assertEquals(f.evidence.accepted, { 64, 128, 256, 512 })
  clean(audit { NCCL_NTHREADS = "256" })
  one(audit { NCCL_CROSS_NIC = "3" }, "int-values", "warn")
  nothing(audit { NCCL_CROSS_NIC = "2" })
end

function TestInt:test_range()
  one(audit { NCCL_IB_RETRY_CNT = "9" }, "int-range", "warn")
  one(audit { NCCL_IB_SL = "-1" }, "int-range", "warn")
  one(audit { NCCL_SOCKET_NTHREADS = "17" }, "int-range", "warn")
  nothing(audit { NCCL_IB_RETRY_CNT = "7", NCCL_IB_SL = "3", NCCL_SOCKET_NTHREADS = "4" })
end

function TestInt:test_ib_timeout_infinite()
  one(audit { NCCL_IB_TIMEOUT = "0" }, "ib-timeout-infinite", "warn")
  one(audit { NCCL_IB_TIMEOUT = "32" }, "ib-timeout-infinite", "warn")
  nothing(audit { NCCL_IB_TIMEOUT = "31" })
end

function TestInt:test_range_depends_on_version()
  one(audit({ NCCL_MAX_CTAS = "48" }, { nccl_version = "2.24.3" }), "int-range", "warn")
  nothing(audit({ NCCL_MAX_CTAS = "48" }, { nccl_version = "2.25.1" }))
  nothing(audit { NCCL_MAX_CTAS = "48" })
  one(audit { NCCL_MAX_CTAS = "65" }, "int-range", "warn")
end

function TestInt:test_dynamic_gid_needs_2_21()
  one(audit({ NCCL_IB_GID_INDEX = "-1" }, { nccl_version = "2.20.5" }), "since-value", "warn")
  nothing(audit({ NCCL_IB_GID_INDEX = "-1" }, { nccl_version = "2.21.5" }))
  nothing(audit({ NCCL_IB_GID_INDEX = "3" }, { nccl_version = "2.20.5" }))
end

function TestInt:test_power_of_two_advised()
  one(audit { NCCL_BUFFSIZE = "3000000" }, "pow2", "info")
  none(audit { NCCL_BUFFSIZE = "8388608" }, "pow2")
end

-- =============================================================================================
-- Enumerations
TestEnum = {}

function TestEnum:test_nccl_debug_invalid()
  local f = one(audit { NCCL_DEBUG = "WARNING" }, "enum-invalid", "error", "NCCL_DEBUG")
  lu.assertEquals(f.evidence.suggestion, "WARN")
  lu.assertEquals(f.evidence.parsed_as, "default")
  lu.assertStrContains(f.remedy, "NCCL_DEBUG=WARN")
  lu.assertEquals(one(audit { NCCL_DEBUG = "DEBUG" }, "enum-invalid", "error").evidence.suggestion, "INFO")
  one(audit { NCCL_DEBUG = "verbose" }, "enum-invalid", "error")
end

function TestEnum:test_nccl_debug_is_case_insensitive()
  for _, v in ipairs { "WARN", "warn", "Info", "VERSION", "trace" } do nothing(audit { NCCL_DEBUG = v }) end
  -- ABORT is accepted but undocumented
  local f = one(audit { NCCL_DEBUG = "ABORT" }, "undocumented-value", "info")
  lu.assertEquals(f.evidence.parsed_as, "ABORT")
end

function TestEnum:test_case_not_stated()
  one(audit { NCCL_SOCKET_FAMILY = "af_inet6" }, "enum-case-unstated", "info")
  nothing(audit { NCCL_SOCKET_FAMILY = "AF_INET6" })
  one(audit { NCCL_SOCKET_FAMILY = "IPv4" }, "enum-invalid", "error")
end

function TestEnum:test_deprecated_value()
  one(audit { NCCL_LAUNCH_MODE = "GROUP" }, "deprecated-value", "warn")
  nothing(audit { NCCL_LAUNCH_MODE = "PARALLEL" })
end

function TestEnum:test_check_mode()
  nothing(audit { NCCL_CHECK_MODE = "DEBUG_GLOBAL" })
  one(audit { NCCL_CHECK_MODE = "STRICT" }, "enum-invalid", "error")
end

function TestEnum:test_cta_policy_names_combine_and_legacy()
  nothing(audit { NCCL_CTA_POLICY = "EFFICIENCY|ZERO" })
  nothing(audit { NCCL_CTA_POLICY = "1" })
  one(audit { NCCL_CTA_POLICY = "5" }, "enum-legacy-range", "warn")
  one(audit { NCCL_CTA_POLICY = "EFFICIENT" }, "enum-invalid", "error")
  one(audit({ NCCL_CTA_POLICY = "ZERO" }, { nccl_version = "2.28.3" }), "since-value", "warn")
  nothing(audit({ NCCL_CTA_POLICY = "2" }, { nccl_version = "2.28.3" }))
end

function TestEnum:test_netdevs_policy()
  nothing(audit { NCCL_NETDEVS_POLICY = "MAX:2" })
  nothing(audit { NCCL_NETDEVS_POLICY = "ALL" })
  one(audit { NCCL_NETDEVS_POLICY = "MAX" }, "netdevs", "warn")
end

-- =============================================================================================
-- NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL (ncclGetLevel)
TestLevel = {}

function TestLevel:test_case_sensitive()
  local f = one(audit { NCCL_P2P_LEVEL = "nvl" }, "level-case", "error", "NCCL_P2P_LEVEL")
  lu.assertEquals(f.evidence.parsed_as, "unset")
  lu.assertStrContains(f.remedy, "NCCL_P2P_LEVEL=NVL")
  one(audit { NCCL_NET_GDR_LEVEL = "phb" }, "level-case", "error", "NCCL_NET_GDR_LEVEL")
  for _, l in ipairs(R.LEVELS) do clean(audit { NCCL_P2P_LEVEL = l }) end
  nothing(audit { NCCL_NET_GDR_LEVEL = "PHB" })
end

function TestLevel:test_invalid()
  one(audit { NCCL_P2P_LEVEL = "NVLINK" }, "level-invalid", "error")
  one(audit { NCCL_P2P_LEVEL = "-1" }, "level-invalid", "error")
end

function TestLevel:test_legacy_numbers()
  lu.assertEquals(one(audit { NCCL_NET_GDR_LEVEL = "2" }, "level-legacy", "info").evidence.parsed_as, "PXB")
  lu.assertEquals(one(audit { NCCL_NET_GDR_LEVEL = "7" }, "level-legacy", "info").evidence.parsed_as, "SYS")
  lu.assertEquals(one(audit { NCCL_NET_GDR_LEVEL = "3x" }, "level-trailing", "warn").evidence.parsed_as, "PHB")
end

-- =============================================================================================
-- NCCL_ALGO / NCCL_PROTO
TestAlgo = {}

function TestAlgo:test_valid_lists()
  for _, v in ipairs { "Ring", "ring,tree", "^NVLS,CollNetDirect", "NVLSTree,PAT" } do clean(audit { NCCL_ALGO = v }) end
  clean(audit { NCCL_PROTO = "LL,LL128,Simple" })
  clean(audit { NCCL_PROTO = "^LL128" })
  clean(audit { NCCL_ALGO = "allreduce:ring,tree;broadcast:ring" })
end

function TestAlgo:test_unknown_token()
  local f = one(audit { NCCL_ALGO = "Ring,Rings" }, "algo-token", "error", "NCCL_ALGO")
  lu.assertStrContains(f.message, "'Rings'")
  lu.assertStrContains(f.remedy, "'Ring' for 'Rings'")
  local p = one(audit { NCCL_PROTO = "Ring" }, "algo-token", "error", "NCCL_PROTO")
  lu.assertStrContains(p.remedy, "Ring is for NCCL_ALGO")
  one(audit { NCCL_ALGO = "allreduse:ring" }, "algo-token", "error")
end

function TestAlgo:test_per_function_syntax_needs_2_24()
  one(audit({ NCCL_ALGO = "allreduce:ring" }, { nccl_version = "2.23.4" }), "algo-syntax-version", "error")
  none(audit({ NCCL_ALGO = "allreduce:ring" }, { nccl_version = "2.24.3" }), "algo-syntax-version")
  none(audit({ NCCL_ALGO = "ring" }, { nccl_version = "2.23.4" }), "algo-syntax-version")
end

-- =============================================================================================
-- Lists, interfaces, HCAs, paths, addresses
TestList = {}

function TestList:test_debug_subsys()
  nothing(audit { NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "INIT,NET,ENV" })
  nothing(audit { NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "^COLL,P2P" })
  local f = one(audit { NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "INIT,NETWORK" }, "list-unknown", "warn")
  lu.assertEquals(f.evidence.unknown, { "NETWORK" })
  lu.assertEquals(f.evidence.suggestion, "NET")
  one(audit({ NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "INIT,RAS" }, { nccl_version = "2.23.4" }), "since-value", "warn")
  nothing(audit({ NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "INIT,RAS" }, { nccl_version = "2.24.3" }))
end

function TestList:test_timestamp_levels()
  nothing(audit { NCCL_DEBUG = "WARN", NCCL_DEBUG_TIMESTAMP_LEVELS = "WARN,INFO" })
  one(audit { NCCL_DEBUG = "WARN", NCCL_DEBUG_TIMESTAMP_LEVELS = "WARNING" }, "list-unknown", "warn")
end

function TestList:test_socket_ifname_against_interfaces()
  local ifs = { "eth0", "ib0", "lo" }
  for _, v in ipairs { "eth", "=eth0", "ib", "^lo,docker", "^=lo", "eth0,ib0" } do
    nothing(audit({ NCCL_SOCKET_IFNAME = v }, { interfaces = ifs }))
  end
  local f = one(audit({ NCCL_SOCKET_IFNAME = "ens" }, { interfaces = ifs }), "iflist-no-match", "error")
  lu.assertEquals(f.evidence.interfaces, ifs)
  one(audit({ NCCL_SOCKET_IFNAME = "=eth" }, { interfaces = ifs }), "iflist-no-match", "error")  -- exact: no eth
  one(audit({ NCCL_SOCKET_IFNAME = "^eth,ib,lo" }, { interfaces = ifs }), "iflist-no-match", "error")
  -- without the host's interfaces only the syntax is checked
  nothing(audit { NCCL_SOCKET_IFNAME = "ens" })
  one(audit { NCCL_SOCKET_IFNAME = "eth,,ib" }, "iflist-empty-item", "warn")
end

function TestList:test_ib_hca()
  nothing(audit { NCCL_IB_HCA = "mlx5_0:1,mlx5_1:1" })
  nothing(audit { NCCL_IB_HCA = "=mlx5_0,mlx5_1" })
  nothing(audit { NCCL_IB_HCA = "^mlx5_2" })
  one(audit { NCCL_IB_HCA = "mlx5_0:x" }, "hca-port", "warn")
  local many = {}
  for i = 0, 32 do many[#many + 1] = "mlx5_" .. i end
  one(audit { NCCL_IB_HCA = table.concat(many, ",") }, "hca-too-many", "warn")
  -- against the host's devices
  nothing(audit({ NCCL_IB_HCA = "mlx5" }, { hcas = { "mlx5_0", "mlx5_1" } }))
  one(audit({ NCCL_IB_HCA = "=mlx5_4" }, { hcas = { "mlx5_0", "mlx5_1" } }), "hca-no-match", "error")
  one(audit({ NCCL_IB_HCA = "mlx5" }, { hcas = {} }), "hca-none", "info")
end

function TestList:test_paths()
  local f = one(audit { NCCL_CONF_FILE = "~/nccl.conf" }, "path-tilde", "error", "NCCL_CONF_FILE")
  lu.assertStrContains(f.remedy, "$HOME/nccl.conf")
  one(audit { NCCL_TOPO_FILE = "/nonexistent/topo.xml" }, "path-missing", "warn")
  local exists = function() return true end
  nothing(audit({ NCCL_TOPO_FILE = "/opt/topo.xml", NCCL_CONF_FILE = "/opt/nccl.conf" }, { file_exists = exists }))
  -- the real check: this test file exists
  nothing(env.audit({ NCCL_TOPO_FILE = "/proc/self/status" }, {}))
end

function TestList:test_addresses()
  nothing(audit { NCCL_RAS_ADDR = "localhost:28028" })
  nothing(audit { NCCL_RAS_ADDR = "[::1]:28028" })
  one(audit { NCCL_RAS_ADDR = "localhost" }, "hostport", "warn")
  one(audit { NCCL_RAS_ADDR = "host:99999" }, "hostport", "warn")
  nothing(audit { NCCL_IB_ADDR_RANGE = "10.0.0.0/16" })
  nothing(audit { NCCL_IB_ADDR_RANGE = "fd00::/8" })
  one(audit { NCCL_IB_ADDR_RANGE = "10.0.0.0" }, "cidr", "warn")
  one(audit { NCCL_IB_ADDR_RANGE = "300.0.0.0/8" }, "cidr", "warn")
end

-- =============================================================================================
-- NVIDIA container images' variables (cs.env.registry.container, container_facts)
TestContainer = {}

local IMAGE = { NCCL_VERSION = "2.28.3-1", NV_LIBNCCL_PACKAGE_VERSION = "2.28.3-1", NV_LIBNCCL_PACKAGE_NAME = "libnccl2",
                CUDA_VERSION = "12.8.1", NVIDIA_REQUIRE_CUDA = "cuda>=12.8", NVIDIA_VISIBLE_DEVICES = "all" }
local LOADED = { library = "2.28.9", library_path = "/opt/venv/nvidia/nccl/lib/libnccl.so.2", cuda_runtime = "12.8",
                 cuda_driver = "13.0" }

function TestContainer:test_the_image_variables_give_one_info_line_naming_both_nccls()
  local f = env.audit(IMAGE, { libraries = LOADED })
  lu.assertEquals(#f, 1)
  lu.assertEquals(f[1].severity, "info")
  lu.assertEquals(f[1].evidence.rule, "container")
  lu.assertStrContains(f[1].message, "the image packages NCCL 2.28.3 (NCCL_VERSION=2.28.3-1")
  lu.assertStrContains(f[1].message, "this process loaded NCCL 2.28.9 from /opt/venv/nvidia/nccl/lib/libnccl.so.2, not the image's")
  lu.assertStrContains(f[1].message, "image CUDA 12.8.1 (CUDA_VERSION), CUDA runtime 12.8 loaded, driver supports CUDA 13.0")
end

function TestContainer:test_same_nccl_and_no_nccl_loaded()
  local same = {}
  for k, v in pairs(LOADED) do same[k] = v end
  same.library = "2.28.3"
  lu.assertStrContains(env.audit(IMAGE, { libraries = same })[1].message, "this process loaded the same NCCL 2.28.3")
  lu.assertStrContains(env.audit(IMAGE, { libraries = { library = "not loaded: libnccl.so.2: cannot open" } })[1].message,
    "this process loaded no NCCL (not loaded: libnccl.so.2: cannot open)")
end

function TestContainer:test_a_driver_older_than_the_runtime_warns()
  local old = {}
  for k, v in pairs(LOADED) do old[k] = v end
  old.cuda_driver, old.cuda_runtime = "12.4", "12.8"
  local f = env.audit(IMAGE, { libraries = old })
  lu.assertEquals(#f, 2)
  local w = one(f, "driver-older-than-runtime", "warn", "CUDA_VERSION")
  lu.assertStrContains(w.message, "older than the CUDA runtime")
end

function TestContainer:test_nothing_outside_a_container_and_no_warning_for_NCCL_VERSION()
  lu.assertEquals(env.audit({ NCCL_DEBUG = "WARN" }, { libraries = LOADED }), {})
  for _, f in ipairs(env.audit({ NCCL_VERSION = "2.21.5-1" }, {})) do lu.assertEquals(f.severity, "info") end
  lu.assertNotNil(R.container.NCCL_VERSION)
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestInt", TestInt },
    { "TestEnum", TestEnum },
    { "TestLevel", TestLevel },
    { "TestAlgo", TestAlgo },
    { "TestList", TestList },
    { "TestContainer", TestContainer },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
