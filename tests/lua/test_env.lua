-- LuaUnit tests of stdlib/cs/env.lua (the environment audit) and cs.env_registry: every audit
-- rule with a passing and a failing example, NCCL's config-file precedence, compare, dedupe.
-- Run: commscript --backend self --trusted tests/lua/test_env.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env_registry"

local recipe = cs.recipe {
  name = "test_env",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env",
}

-- ---- helpers ----
local NO_FILES = function() return false end

-- audit of one variable set (combination rules included); opts default to "no host checks".
local function audit(vars, opts)
  opts = opts or {}
  if opts.file_exists == nil then opts.file_exists = NO_FILES end
  return env.audit(vars, opts)
end

-- The findings of one rule.
local function with_rule(fs, rule)
  local l = {}
  for _, f in ipairs(fs) do if f.evidence.rule == rule then l[#l + 1] = f end end
  return l
end

-- Exactly one finding of `rule`, with `severity`, about `variable`; returns it.
local function one(fs, rule, severity, variable)
  local l = with_rule(fs, rule)
  local got = {}
  for _, f in ipairs(fs) do got[#got + 1] = f.severity .. " " .. f.evidence.rule .. " " .. tostring(f.subject.variable) end
  lu.assertEquals(#l, 1, ("expected one '%s' finding, got: %s"):format(rule, table.concat(got, "; ")))
  lu.assertEquals(l[1].severity, severity)
  if variable then lu.assertEquals(l[1].subject.variable, variable) end
  lu.assertEquals(type(l[1].message), "string")
  lu.assertEquals(type(l[1].remedy), "string")
  return l[1]
end

local function none(fs, rule)
  local l = with_rule(fs, rule)
  lu.assertEquals(#l, 0, ("unexpected '%s' finding: %s"):format(rule, l[1] and l[1].message or ""))
end

-- No finding of severity warn or error.
local function clean(fs)
  for _, f in ipairs(fs) do
    lu.assertEquals(f.severity, "info", ("unexpected %s: %s"):format(f.severity, f.message))
  end
end

local function nothing(fs)
  lu.assertEquals(#fs, 0, fs[1] and ("unexpected finding: " .. fs[1].message) or nil)
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p '" .. d .. "'")
  return d
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- =============================================================================================
TestStrtoll = {}

function TestStrtoll:test_decimal_hex_octal()
  lu.assertEquals({ env.strtoll("42") }, { 42, 3, 10, false, "42" })
  lu.assertEquals(env.strtoll("0x1A"), 26)
  lu.assertEquals(env.strtoll("0X1a"), 26)
  lu.assertEquals(env.strtoll("010"), 8)
  lu.assertEquals(env.strtoll("  -17"), -17)
  lu.assertEquals(env.strtoll("+5"), 5)
end

function TestStrtoll:test_stops_at_the_first_non_digit()
  local v, endpos = env.strtoll("4M")
  lu.assertEquals(v, 4)
  lu.assertEquals(endpos, 2)
  lu.assertEquals(env.strtoll("1e3"), 1)
  lu.assertEquals(env.strtoll("08"), 0)        -- octal: '8' is not an octal digit
  local v2, e2 = env.strtoll("0x")              -- no hex digit: "0" is converted, 'x' is left
  lu.assertEquals(v2, 0)
  lu.assertEquals(e2, 2)
end

function TestStrtoll:test_no_conversion()
  local v, endpos, _, _, digits = env.strtoll("true")
  lu.assertEquals(v, 0)
  lu.assertEquals(endpos, 1)
  lu.assertEquals(digits, "")
  lu.assertEquals(env.strtoll(""), 0)
end

function TestStrtoll:test_overflow_clamps()
  local v, _, _, overflow = env.strtoll("99999999999999999999")
  lu.assertTrue(overflow)
  lu.assertEquals(v, 9223372036854775807)
end

function TestStrtoll:test_base_10()
  lu.assertEquals(env.strtoll("010", 10), 10)
  lu.assertEquals(env.strtoll("0x10", 10), 0)
end

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
-- Names: folklore, aliases, plugins, typos, removed, deprecated, since, internal, status
TestNames = {}

function TestNames:test_folklore_and_typos()
  for name, kind in pairs { NCCL_TIMEOUT = "folklore", NCCL_IB_MTU = "folklore", NCCL_NVLS_RANGE = "folklore",
                             NCCL_MAX_RINGS = "typo", NCCL_MIN_RINGS = "typo" } do
    local f = one(audit { [name] = "1" }, "not-nccl-" .. kind, "error", name)
    lu.assertEquals(f.evidence.parsed_as, "ignored")
  end
  lu.assertStrContains(one(audit { NCCL_IB_MTU = "4096" }, "not-nccl-folklore", "error").remedy, "UCX_IB_MTU")
  lu.assertEquals(one(audit { NCCL_MAX_RINGS = "4" }, "not-nccl-typo", "error").evidence.replacement, "NCCL_MAX_NRINGS")
end

function TestNames:test_pytorch_aliases()
  local f = one(audit { NCCL_ASYNC_ERROR_HANDLING = "1" }, "pytorch-alias", "warn", "NCCL_ASYNC_ERROR_HANDLING")
  lu.assertEquals(f.evidence.replacement, "TORCH_NCCL_ASYNC_ERROR_HANDLING")
  one(audit { NCCL_BLOCKING_WAIT = "1" }, "pytorch-alias", "warn")
  nothing(audit { TORCH_NCCL_ASYNC_ERROR_HANDLING = "1" })
end

function TestNames:test_plugin_owned()
  one(audit { NCCL_IBEXT_DISABLE = "1" }, "plugin-owned", "info")
  one(audit { NCCL_SHARP_GROUP_SIZE_THRESH = "2" }, "plugin-owned", "info")
  one(audit { NCCL_INSPECTOR_ENABLE = "1" }, "plugin-owned", "info")
end

function TestNames:test_unknown_with_did_you_mean()
  local f = one(audit { NCCL_SOCKET_IFNAM = "eth0" }, "unknown-typo", "error", "NCCL_SOCKET_IFNAM")
  lu.assertEquals(f.evidence.suggestion, "NCCL_SOCKET_IFNAME")
  lu.assertStrContains(f.message, "did you mean NCCL_SOCKET_IFNAME?")
  lu.assertEquals(one(audit { NCCL_DEUBG = "WARN" }, "unknown-typo", "error").evidence.suggestion, "NCCL_DEBUG")
  lu.assertEquals(one(audit { NCCL_IBHCA = "mlx5" }, "unknown-typo", "error").evidence.suggestion, "NCCL_IB_HCA")
  -- far from every name: a warning without a suggestion
  local u = one(audit { NCCL_FROBNICATE_EVERYTHING = "1" }, "unknown", "warn")
  lu.assertNil(u.evidence.suggestion)
end

function TestNames:test_removed()
  local f = one(audit { NCCL_LL_THRESHOLD = "0" }, "removed", "warn")
  lu.assertEquals(f.evidence.last_read, "2.4.8")
  lu.assertEquals(one(audit { NCCL_IB_GDR_LEVEL = "2" }, "removed", "warn").evidence.replacement, "NCCL_NET_GDR_LEVEL")
  -- still read by the version in use
  nothing(audit({ NCCL_LL_THRESHOLD = "0" }, { nccl_version = "2.4.8" }))
  one(audit({ NCCL_LL_THRESHOLD = "0" }, { nccl_version = "2.5.6" }), "removed", "warn")
end

function TestNames:test_deprecated()
  local f = one(audit { NCCL_MAX_NCHANNELS = "8" }, "deprecated", "warn", "NCCL_MAX_NCHANNELS")
  lu.assertEquals(f.evidence.replacement, "NCCL_MAX_CTAS")
  lu.assertEquals(one(audit { NCCL_MIN_NRINGS = "4" }, "deprecated", "warn").evidence.replacement, "NCCL_MIN_CTAS")
  lu.assertEquals(one(audit { NCCL_CHECK_POINTERS = "1" }, "deprecated", "warn").evidence.replacement, "NCCL_CHECK_MODE")
  -- not yet deprecated in the version in use
  none(audit({ NCCL_MAX_NCHANNELS = "8" }, { nccl_version = "2.16.5" }), "deprecated")
  nothing(audit { NCCL_MAX_CTAS = "8" })
end

function TestNames:test_since()
  local f = one(audit({ NCCL_RAS_ENABLE = "1" }, { nccl_version = "2.23.4" }), "since", "warn")
  lu.assertEquals(f.evidence.since, "2.24")
  nothing(audit({ NCCL_RAS_ENABLE = "1" }, { nccl_version = "2.24.3" }))
  nothing(audit { NCCL_RAS_ENABLE = "1" })
end

function TestNames:test_internal()
  local f = one(audit { NCCL_COMM_ID = "host:1234" }, "internal", "warn")
  lu.assertEquals(f.evidence.since, "2.3")
  lu.assertStrContains(f.evidence.reference, "§1.7")
  -- internal boolean parameters are still parsed
  one(audit { NCCL_NVTX_DISABLE = "true" }, "int-word", "error")
end

function TestNames:test_debug_and_experimental_status()
  local f = one(audit { NCCL_IB_DISABLE = "1" }, "debug-variable", "info")
  lu.assertEquals(#audit { NCCL_IB_DISABLE = "1" }, 1)
  lu.assertStrContains(f.evidence.reference, "§1.5")
  -- not repeated next to a real problem with the same variable
  none(audit { NCCL_IB_DISABLE = "true" }, "debug-variable")
  one(audit { NCCL_MULTI_RANK_GPU_ENABLE = "1" }, "experimental", "info")
  none(audit { NCCL_IB_HCA = "mlx5_0" }, "debug-variable")
end

function TestNames:test_non_audited_names_are_ignored()
  nothing(audit { PATH = "/usr/bin", OMPI_MCA_btl = "self,vader", CUDA_VISIBLE_DEVICES = "0,1", HOME = "/root" })
end

-- =============================================================================================
-- PyTorch (§2.2) and UCX
TestTorchUcx = {}

function TestTorchUcx:test_known_values()
  nothing(audit { TORCH_NCCL_ASYNC_ERROR_HANDLING = "3", TORCH_NCCL_BLOCKING_WAIT = "1", TORCH_NCCL_DUMP_ON_TIMEOUT = "true",
                  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = "600", TORCH_FR_BUFFER_SIZE = "2000",
                  TORCH_NCCL_DEBUG_INFO_PIPE_FILE = "/tmp/pipe", TORCH_FR_DUMP_TEMP_FILE = "/tmp/fr_" })
end

function TestTorchUcx:test_values()
  one(audit { TORCH_NCCL_ASYNC_ERROR_HANDLING = "5" }, "int-values", "warn")
  one(audit { TORCH_NCCL_ASYNC_ERROR_HANDLING = "0" }, "torch-no-error-handling", "warn")
  one(audit { TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = "10m" }, "torch-int", "warn")
  one(audit { TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = "0" }, "int-range", "warn")
  one(audit { TORCH_NCCL_BLOCKING_WAIT = "maybe" }, "torch-bool", "warn")
  one(audit { TORCH_NCCL_ENABLE_MONITORING = "0" }, "torch-no-monitoring", "info")
  nothing(audit { TORCH_NCCL_ENABLE_MONITORING = "1" })
end

function TestTorchUcx:test_deprecated_and_older_names()
  lu.assertEquals(one(audit { TORCH_NCCL_TRACE_BUFFER_SIZE = "2000" }, "deprecated", "warn").evidence.replacement,
    "TORCH_FR_BUFFER_SIZE")
  one(audit { TORCH_NCCL_TRACE_CPP_STACK = "1" }, "older-name", "info")
  one(audit { TORCH_NCCL_DEBUG_INFO_TEMP_FILE = "/tmp/x" }, "older-name", "info")
end

function TestTorchUcx:test_unknown_torch_names()
  local f = one(audit { TORCH_NCCL_BLOCKNG_WAIT = "1" }, "unknown-torch", "info")
  lu.assertEquals(f.evidence.suggestion, "TORCH_NCCL_BLOCKING_WAIT")
  one(audit({ TORCH_NCCL_BLOCKNG_WAIT = "1" }, { strict = true }), "unknown-torch", "warn")
  nothing(audit { TORCH_NCCL_SOMETHING_NEW_ENTIRELY = "1" })
  one(audit({ TORCH_NCCL_SOMETHING_NEW_ENTIRELY = "1" }, { strict = true }), "unknown-torch", "warn")
end

function TestTorchUcx:test_ucx_names()
  nothing(audit { UCX_TLS = "rc,cuda_copy", UCX_NET_DEVICES = "mlx5_0:1", UCX_IB_MTU = "4096" })
  lu.assertEquals(one(audit { UCX_TSL = "rc" }, "unknown-ucx", "info").evidence.suggestion, "UCX_TLS")
  one(audit({ UCX_TSL = "rc" }, { strict = true }), "unknown-ucx", "warn")
  nothing(audit { UCX_SOME_RARE_KNOB = "y" })
  one(audit({ UCX_SOME_RARE_KNOB = "y" }, { strict = true }), "unknown-ucx", "warn")
end

-- =============================================================================================
-- Combination rules
TestCombos = {}

function TestCombos:test_p2p_disable_overrides_level()
  local f = one(audit { NCCL_P2P_DISABLE = "1", NCCL_P2P_LEVEL = "NVL" }, "p2p-level-overridden", "warn", "NCCL_P2P_LEVEL")
  lu.assertEquals(f.evidence.other, "NCCL_P2P_DISABLE")
  none(audit { NCCL_P2P_DISABLE = "0", NCCL_P2P_LEVEL = "NVL" }, "p2p-level-overridden")
end

function TestCombos:test_p2p_disabled_on_nvlink()
  one(audit({ NCCL_P2P_DISABLE = "1" }, { nvlink = true }), "p2p-disabled-nvlink", "warn")
  none(audit({ NCCL_P2P_DISABLE = "1" }, { nvlink = false }), "p2p-disabled-nvlink")
end

function TestCombos:test_rings_and_channels()
  one(audit { NCCL_MAX_NRINGS = "4", NCCL_MAX_NCHANNELS = "8" }, "alias-ignored", "warn", "NCCL_MAX_NRINGS")
  none(audit { NCCL_MAX_NRINGS = "4" }, "alias-ignored")
  one(audit { NCCL_MIN_NCHANNELS = "4", NCCL_MIN_CTAS = "8" }, "both-channels-ctas", "info", "NCCL_MIN_NCHANNELS")
  none(audit { NCCL_MIN_CTAS = "8" }, "both-channels-ctas")
end

function TestCombos:test_min_above_max()
  one(audit { NCCL_MIN_CTAS = "16", NCCL_MAX_CTAS = "8" }, "min-above-max", "warn", "NCCL_MIN_CTAS")
  nothing(audit { NCCL_MIN_CTAS = "8", NCCL_MAX_CTAS = "16" })
end

function TestCombos:test_socket_threads_product()
  one(audit { NCCL_SOCKET_NTHREADS = "16", NCCL_NSOCKS_PERTHREAD = "8" }, "socket-threads-product", "warn")
  nothing(audit { NCCL_SOCKET_NTHREADS = "8", NCCL_NSOCKS_PERTHREAD = "8" })
end

function TestCombos:test_ib_disabled_but_selected()
  one(audit { NCCL_IB_DISABLE = "1", NCCL_NET = "IB" }, "net-ib-disabled", "warn", "NCCL_NET")
  one(audit { NCCL_IB_DISABLE = "1", NCCL_IB_HCA = "mlx5_0" }, "ib-hca-disabled", "info", "NCCL_IB_HCA")
  clean(audit { NCCL_IB_DISABLE = "0", NCCL_NET = "IB", NCCL_IB_HCA = "mlx5_0" })
end

function TestCombos:test_env_plugin()
  one(audit { NCCL_ENV_PLUGIN = "libnccl-env-site.so" }, "env-plugin", "info", "NCCL_ENV_PLUGIN")
  none(audit { NCCL_ENV_PLUGIN = "none" }, "env-plugin")
end

function TestCombos:test_check_pointers_and_mode()
  one(audit { NCCL_CHECK_POINTERS = "1", NCCL_CHECK_MODE = "DEBUG_LOCAL" }, "both-check", "info")
  none(audit { NCCL_CHECK_MODE = "DEBUG_LOCAL" }, "both-check")
end

function TestCombos:test_debug_options_without_level()
  one(audit { NCCL_DEBUG_SUBSYS = "INIT" }, "debug-without-level", "info", "NCCL_DEBUG_SUBSYS")
  none(audit { NCCL_DEBUG = "INFO", NCCL_DEBUG_SUBSYS = "INIT" }, "debug-without-level")
end

function TestCombos:test_alias_conflicts()
  one(audit { NCCL_ASYNC_ERROR_HANDLING = "1", TORCH_NCCL_ASYNC_ERROR_HANDLING = "3" }, "alias-conflict", "warn",
    "NCCL_ASYNC_ERROR_HANDLING")
  none(audit { NCCL_ASYNC_ERROR_HANDLING = "3", TORCH_NCCL_ASYNC_ERROR_HANDLING = "3" }, "alias-conflict")
  one(audit { TORCH_NCCL_TRACE_BUFFER_SIZE = "10", TORCH_FR_BUFFER_SIZE = "2000" }, "alias-conflict", "warn")
end

-- =============================================================================================
-- A realistic, correct configuration: not a single warning.
TestGoodSet = {}

local GOOD = {
  NCCL_DEBUG = "WARN", NCCL_DEBUG_SUBSYS = "INIT,NET", NCCL_DEBUG_FILE = "/tmp/nccl.%h.%p.log",
  NCCL_SOCKET_IFNAME = "^lo,docker", NCCL_SOCKET_FAMILY = "AF_INET",
  NCCL_IB_HCA = "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1", NCCL_IB_GID_INDEX = "3", NCCL_IB_TIMEOUT = "22",
  NCCL_IB_RETRY_CNT = "7", NCCL_IB_TC = "106", NCCL_IB_SL = "0", NCCL_IB_QPS_PER_CONNECTION = "4",
  NCCL_IB_SPLIT_DATA_ON_QPS = "0", NCCL_IB_PCI_RELAXED_ORDERING = "1", NCCL_IB_ADAPTIVE_ROUTING = "1",
  NCCL_NET_GDR_LEVEL = "PHB", NCCL_NET_GDR_READ = "1", NCCL_CROSS_NIC = "0", NCCL_NVLS_ENABLE = "1",
  NCCL_MIN_CTAS = "4", NCCL_MAX_CTAS = "32", NCCL_CUMEM_ENABLE = "1", NCCL_RAS_ENABLE = "1",
  NCCL_RAS_ADDR = "localhost:28028", NCCL_SOCKET_NTHREADS = "4", NCCL_NSOCKS_PERTHREAD = "4",
  NCCL_CTA_POLICY = "DEFAULT", NCCL_NET_PLUGIN = "none", NCCL_COLLNET_ENABLE = "0",
  TORCH_NCCL_ASYNC_ERROR_HANDLING = "1", TORCH_NCCL_BLOCKING_WAIT = "0", TORCH_NCCL_ENABLE_MONITORING = "1",
  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = "600", TORCH_NCCL_DUMP_ON_TIMEOUT = "1", TORCH_FR_BUFFER_SIZE = "2000",
  TORCH_NCCL_DESYNC_DEBUG = "0",
  UCX_TLS = "rc,cuda_copy,cuda_ipc", UCX_NET_DEVICES = "mlx5_0:1", UCX_RNDV_THRESH = "8192",
  CUDA_VISIBLE_DEVICES = "0,1,2,3", OMPI_MCA_pml = "ucx", PATH = "/usr/bin:/bin", HOME = "/home/u",
}

function TestGoodSet:test_no_warning()
  nothing(env.audit(GOOD, { interfaces = { "eth0", "ib0", "lo", "docker0" }, hcas = { "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3" },
                            nccl_version = "2.29.7" }))
  nothing(env.audit(GOOD, { strict = true }))
end

function TestGoodSet:test_no_warning_with_conf_files()
  local d = tmpdir()
  write(d .. "/.nccl.conf", "# user settings\nNCCL_DEBUG=WARN\n\nNCCL_IB_TIMEOUT=22\n")
  write(d .. "/etc.conf", "NCCL_SOCKET_IFNAME=^lo,docker\n")
  local fs = env.full_audit(GOOD, { home = d, system_file = d .. "/etc.conf" })
  nothing(fs)
  os.execute("rm -rf '" .. d .. "'")
end

-- =============================================================================================
-- NCCL's config files (§1.4)
TestConf = {}

function TestConf:setUp()
  self.d = tmpdir()
  self.home = self.d .. "/home"
  os.execute("mkdir -p '" .. self.home .. "'")
  self.sys = self.d .. "/etc-nccl.conf"
  self.user = self.home .. "/.nccl.conf"
  self.cf = self.d .. "/custom.conf"
end

function TestConf:tearDown()
  os.execute("rm -rf '" .. self.d .. "'")
end

function TestConf:conf(envt, extra)
  return env.nccl_conf { env = envt or {}, home = self.home, system_file = self.sys, extra = extra }
end

function TestConf:test_environment_beats_user_file_beats_system_file()
  write(self.user, "NCCL_DEBUG=INFO\nNCCL_IB_TIMEOUT=22\n")
  write(self.sys, "NCCL_DEBUG=TRACE\nNCCL_IB_TIMEOUT=18\nNCCL_IB_RETRY_CNT=7\n")
  local c = self:conf { NCCL_DEBUG = "WARN" }
  lu.assertEquals(c.merged.NCCL_DEBUG, "WARN")                -- environment
  lu.assertEquals(c.sources.NCCL_DEBUG, "environment")
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")             -- user file over /etc
  lu.assertEquals(c.sources.NCCL_IB_TIMEOUT, self.user .. ":2")
  lu.assertEquals(c.merged.NCCL_IB_RETRY_CNT, "7")            -- only in /etc
  lu.assertEquals(c.sources.NCCL_IB_RETRY_CNT, self.sys .. ":3")
  lu.assertEquals(c.effective.NCCL_IB_TIMEOUT, { value = "22", source = self.user .. ":2" })
  lu.assertNil(c.effective.NCCL_DEBUG)
  -- the shadowed lines are reported (info), naming what wins
  local sh = with_rule(c.file_findings, "conf-shadowed")
  lu.assertEquals(#sh, 3)  -- user NCCL_DEBUG, /etc NCCL_DEBUG (by env), /etc NCCL_IB_TIMEOUT (by the user file)
  for _, f in ipairs(sh) do lu.assertEquals(f.severity, "info") end
  clean(c.findings)
end

function TestConf:test_nccl_conf_file_replaces_the_user_file()
  write(self.user, "NCCL_IB_TIMEOUT=22\nNCCL_IB_SL=1\n")
  write(self.cf, "NCCL_IB_TIMEOUT=19\n")
  write(self.sys, "NCCL_IB_SL=2\n")
  local c = self:conf { NCCL_CONF_FILE = self.cf }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "19")
  lu.assertEquals(c.sources.NCCL_IB_TIMEOUT, self.cf .. ":1")
  lu.assertEquals(c.merged.NCCL_IB_SL, "2")  -- ~/.nccl.conf is not read at all, /etc still is
  lu.assertEquals(c.files[1].role, "NCCL_CONF_FILE")
  lu.assertEquals(c.files[2].role, "system")
  lu.assertEquals(#c.files, 2)
end

function TestConf:test_empty_nccl_conf_file_means_the_user_file()
  write(self.user, "NCCL_IB_TIMEOUT=22\n")
  local c = self:conf { NCCL_CONF_FILE = "" }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")
  lu.assertEquals(c.files[1].role, "user")
end

function TestConf:test_nccl_conf_file_needs_2_23()
  write(self.user, "NCCL_IB_TIMEOUT=22\n")
  write(self.cf, "NCCL_IB_TIMEOUT=19\n")
  local c = env.nccl_conf { env = { NCCL_CONF_FILE = self.cf }, home = self.home, system_file = self.sys,
                            nccl_version = "2.22.3" }
  lu.assertEquals(c.merged.NCCL_IB_TIMEOUT, "22")
  -- and the audit says NCCL_CONF_FILE is not read by that version
  one(env.full_audit({ NCCL_CONF_FILE = self.cf }, { home = self.home, system_file = self.sys, nccl_version = "2.22.3" }),
    "since", "warn", "NCCL_CONF_FILE")
end

function TestConf:test_missing_nccl_conf_file()
  local fs = env.full_audit({ NCCL_CONF_FILE = self.d .. "/nope.conf" }, { home = self.home, system_file = self.sys })
  local f = one(fs, "path-missing", "warn", "NCCL_CONF_FILE")
  lu.assertStrContains(f.message, "~/.nccl.conf is not read either")
end

function TestConf:test_values_from_files_are_audited_with_their_source()
  write(self.sys, "# site defaults\nNCCL_BUFFSIZE=4M\nNCCL_P2P_LEVEL=nvl\n")
  local c = self:conf {}
  local f = one(c.findings, "int-size-suffix", "error", "NCCL_BUFFSIZE")
  lu.assertEquals(f.evidence.source, self.sys .. ":2")
  lu.assertEquals(one(c.findings, "level-case", "error").evidence.source, self.sys .. ":3")
  -- full_audit: the same, once
  local fs = env.full_audit({}, { home = self.home, system_file = self.sys })
  lu.assertEquals(one(fs, "int-size-suffix", "error").evidence.source, self.sys .. ":2")
  -- a shadowed bad value does not count: the environment's good one is what NCCL reads
  fs = env.full_audit({ NCCL_BUFFSIZE = "4194304" }, { home = self.home, system_file = self.sys })
  none(fs, "int-size-suffix")
  lu.assertEquals(one(fs, "conf-shadowed", "info", "NCCL_BUFFSIZE").evidence.effective, "4194304")
end

function TestConf:test_combination_rules_see_env_and_files_together()
  write(self.sys, "NCCL_P2P_LEVEL=NVL\n")
  local fs = env.full_audit({ NCCL_P2P_DISABLE = "1" }, { home = self.home, system_file = self.sys })
  local f = one(fs, "p2p-level-overridden", "warn", "NCCL_P2P_LEVEL")
  lu.assertEquals(f.evidence.source, self.sys .. ":1")
end

function TestConf:test_line_syntax()
  write(self.sys, table.concat({
    "# comment",
    "   # indented comment",
    "",
    "NCCL_DEBUG = WARN",          -- 4: blanks around the name
    "export NCCL_IB_SL=1",        -- 5: shell syntax
    "NCCL_IB_TIMEOUT=22 ",        -- 6: blank after the value
    "NCCL_SOCKET_IFNAME=\"eth0\"", -- 7: quotes
    "NCCL_IB_TC=106 # RoCE",      -- 8: inline comment
    "just some text",             -- 9: no '='
    "NCCL_IB_RETRY_CNT=7",        -- 10
    "NCCL_IB_RETRY_CNT=5",        -- 11: duplicate, the first wins
    "NCCL_CONF_FILE=/x.conf",     -- 12: has no effect in a file
  }, "\n") .. "\n")
  local c = self:conf {}
  local fs = c.file_findings
  local b = with_rule(fs, "conf-blanks-in-name")
  lu.assertEquals(#b, 2)
  lu.assertEquals(b[1].severity, "error")
  lu.assertEquals(b[1].subject.variable, "NCCL_DEBUG")
  lu.assertEquals(b[1].evidence.source, self.sys .. ":4")
  lu.assertEquals(b[2].subject.variable, "NCCL_IB_SL")
  lu.assertNil(c.merged.NCCL_DEBUG)       -- NCCL set "NCCL_DEBUG ", not NCCL_DEBUG
  one(fs, "conf-blanks-in-value", "warn", "NCCL_IB_TIMEOUT")
  one(fs, "conf-quotes", "warn", "NCCL_SOCKET_IFNAME")
  one(fs, "conf-inline-comment", "warn", "NCCL_IB_TC")
  lu.assertEquals(one(fs, "conf-no-equals", "warn").evidence.source, self.sys .. ":9")
  local dup = one(fs, "conf-duplicate", "warn", "NCCL_IB_RETRY_CNT")
  lu.assertEquals(dup.evidence.source, self.sys .. ":11")
  lu.assertEquals(c.merged.NCCL_IB_RETRY_CNT, "7")
  one(fs, "conf-file-in-file", "warn", "NCCL_CONF_FILE")
  lu.assertNil(c.merged.NCCL_CONF_FILE)
end

function TestConf:test_clean_file_has_no_findings()
  write(self.sys, "# a good file\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==eth0\nNCCL_IB_HCA=mlx5_0:1\n")
  local c = self:conf {}
  nothing(c.findings)
  lu.assertEquals(c.merged.NCCL_SOCKET_IFNAME, "=eth0")
end

function TestConf:test_extra_file_is_audited_but_not_applied()
  write(self.cf, "NCCL_DEBUG=WARNING\n")
  local c = self:conf({}, { self.cf })
  lu.assertNil(c.merged.NCCL_DEBUG)
  lu.assertEquals(c.files[#c.files].role, "extra")
  lu.assertFalse(c.files[#c.files].applied)
  one(c.findings, "conf-extra", "info")
  lu.assertEquals(one(c.findings, "enum-invalid", "error", "NCCL_DEBUG").evidence.source, self.cf .. ":1")
  -- when NCCL_CONF_FILE names it, it is the file NCCL reads
  c = self:conf({ NCCL_CONF_FILE = self.cf }, { self.cf })
  lu.assertEquals(c.merged.NCCL_DEBUG, "WARNING")
  none(c.findings, "conf-extra")
  one(self:conf({}, { self.d .. "/missing.conf" }).findings, "conf-unreadable", "warn")
end

function TestConf:test_absent_files()
  local c = self:conf {}
  lu.assertEquals(#c.files, 2)
  lu.assertFalse(c.files[1].exists)
  lu.assertFalse(c.files[2].exists)
  nothing(c.findings)
end

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

function TestSnapshot:test_interfaces_from_proc()
  local d = tmpdir()
  write(d .. "/dev", "Inter-|   Receive\n face |bytes\n    lo: 1 2 3\n  eth0: 4 5 6\nib0: 7\n")
  lu.assertEquals(env.interfaces(d .. "/dev"), { "eth0", "ib0", "lo" })
  lu.assertNil(env.interfaces(d .. "/nope"))
  os.execute("rm -rf '" .. d .. "'")
end

function TestSnapshot:test_rdma_devices_from_sysfs()
  local d = tmpdir()
  lu.assertNil(env.rdma_devices(d .. "/infiniband_verbs"))  -- no verbs class: nothing to check against
  os.execute("mkdir -p '" .. d .. "/infiniband_verbs/uverbs0' '" .. d .. "/infiniband_verbs/uverbs2'")
  write(d .. "/infiniband_verbs/uverbs0/ibdev", "mlx5_1\n")
  write(d .. "/infiniband_verbs/uverbs2/ibdev", "mlx5_0\n")
  lu.assertEquals(env.rdma_devices(d .. "/infiniband_verbs"), { "mlx5_0", "mlx5_1" })
  os.execute("rm -rf '" .. d .. "'")
end

-- =============================================================================================
TestHelpers = {}

function TestHelpers:test_distance_and_suggest()
  lu.assertEquals(env.distance("NCCL_DEBUG", "NCCL_DEBUG"), 0)
  lu.assertEquals(env.distance("NCCL_DEUBG", "NCCL_DEBUG"), 1)  -- a transposition
  lu.assertEquals(env.distance("abc", ""), 3)
  lu.assertEquals(env.suggest("NCCL_IB_TIMEOUTS", { "NCCL_IB_TIMEOUT", "NCCL_IB_TC" }, "NCCL_"), "NCCL_IB_TIMEOUT")
  lu.assertNil(env.suggest("NCCL_XYZ", { "NCCL_IB_TIMEOUT" }, "NCCL_"))
end

function TestHelpers:test_version_lt()
  lu.assertTrue(env.version_lt("2.3", "2.3.4"))
  lu.assertFalse(env.version_lt("2.3.0", "2.3"))
  lu.assertTrue(env.version_lt("2.9.9", "2.10"))
  lu.assertFalse(env.version_lt("2.30.7", "2.30.7"))
end

function TestHelpers:test_rank_ranges()
  lu.assertEquals(env.rank_ranges { 0, 1, 2, 5, 7, 8 }, "0-2,5,7-8")
  lu.assertEquals(env.rank_ranges { 3 }, "3")
end

function TestHelpers:test_registry_is_consistent()
  local n = 0
  for name, e in pairs(R.nccl) do
    n = n + 1
    lu.assertTrue(name:match("^NCCL_[A-Z0-9_]+$") ~= nil, name)
    lu.assertEquals(type(e.src), "string", name .. " has no source section")
    lu.assertTrue(e.removed ~= nil or e.since ~= nil, name .. " has no since")
    if e.deprecated then lu.assertNotNil(R.nccl[e.deprecated.by], name .. " -> " .. e.deprecated.by) end
    lu.assertNil(R.not_nccl[name], name .. " is both read and not read")
  end
  lu.assertTrue(n > 250)
  for name, e in pairs(R.torch) do
    lu.assertEquals(type(e.src), "string", name)
    if e.alias_of then lu.assertNotNil(R.torch[e.alias_of], name) end
  end
  for alias, real in pairs(R.pytorch_alias) do lu.assertNotNil(R.torch[real], alias) end
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestStrtoll", TestStrtoll },
    { "TestInt", TestInt },
    { "TestEnum", TestEnum },
    { "TestLevel", TestLevel },
    { "TestAlgo", TestAlgo },
    { "TestList", TestList },
    { "TestNames", TestNames },
    { "TestTorchUcx", TestTorchUcx },
    { "TestCombos", TestCombos },
    { "TestGoodSet", TestGoodSet },
    { "TestConf", TestConf },
    { "TestCompare", TestCompare },
    { "TestMerge", TestMerge },
    { "TestSnapshot", TestSnapshot },
    { "TestHelpers", TestHelpers },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
