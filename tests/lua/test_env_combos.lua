-- LuaUnit tests of cs.env.combos: names (folklore, typos, deprecated), TORCH_NCCL_/UCX_, the combination rules, a realistic good set.
-- Run: commscript --backend self --trusted tests/lua/test_env_combos.lua
local cs = require "commscript"
local lu = require "luaunit"
local env = require "cs.env"
local R = require "cs.env.registry"
package.path = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "?.lua;" .. package.path
local H = require "env_testlib"
local NO_FILES, audit, with_rule, one, none, clean, nothing, tmpdir, write =
  H.NO_FILES, H.audit, H.with_rule, H.one, H.none, H.clean, H.nothing, H.tmpdir, H.write

local recipe = cs.recipe {
  name = "test_env_combos",
  version = "0.1.0",
  summary = "LuaUnit tests of cs.env.combos",
}

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
  lu.assertEquals(f.evidence.reference, "docs/nccl.md#internal-variables")
  -- internal boolean parameters are still parsed
  one(audit { NCCL_NVTX_DISABLE = "true" }, "int-word", "error")
end

function TestNames:test_debug_and_experimental_status()
  local f = one(audit { NCCL_IB_DISABLE = "1" }, "debug-variable", "info")
  lu.assertEquals(#audit { NCCL_IB_DISABLE = "1" }, 1)
  lu.assertEquals(f.evidence.reference, "docs/nccl.md#the-variables-nccl-documents")
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
-- References: every finding about a known name cites a section of docs/nccl.md that exists.
TestReferences = {}

-- GitHub's anchor of a heading: lower case, punctuation other than - and _ dropped, spaces -> -.
local function anchor_of(heading)
  return (heading:lower():gsub("[^%w%s_-]", ""):gsub("%s", "-"))
end

function TestReferences:test_every_source_is_a_section_of_the_doc()
  local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
  local f = assert(io.open(dir .. "../../" .. R.DOC, "r"))
  local anchors = {}
  for line in f:lines() do
    local h = line:match("^#+%s+(.-)%s*$")
    if h then anchors[anchor_of(h)] = true end
  end
  f:close()
  for key, a in pairs(R.SECTIONS) do lu.assertTrue(anchors[a], ("%s: no heading #%s in %s"):format(key, a, R.DOC)) end
  local n = 0
  for _, t in ipairs { R.nccl, R.not_nccl, R.plugin, R.plugin_prefixes, R.torch, R.ucx } do
    for name, e in pairs(t) do
      lu.assertNotNil(e.src, tostring(name))
      for ref in R.reference(e.src):gmatch("[^,%s]+") do
        lu.assertEquals(ref:match("^(.-)#"), R.DOC)
        lu.assertTrue(anchors[ref:match("#(.*)$")], ref)
        n = n + 1
      end
    end
  end
  lu.assertTrue(n > 150)
  lu.assertErrorMsgContains("no section 1.5", R.reference, "1.5")
end

function TestReferences:test_findings_cite_the_doc()
  lu.assertEquals(one(audit { NCCL_P2P_DISABLE = "2" }, "exactly-one", "error").evidence.reference,
    "docs/nccl.md#the-variables-nccl-documents, docs/nccl.md#how-nccl-reads-a-variable")
  lu.assertEquals(one(audit { NCCL_TIMEOUT = "1" }, "not-nccl-folklore", "error").evidence.reference,
    "docs/nccl.md#names-core-nccl-does-not-read")
  lu.assertEquals(one(audit { TORCH_NCCL_ASYNC_ERROR_HANDLING = "0" }, "torch-no-error-handling", "warn").evidence.reference,
    "docs/nccl.md#pytorch-processgroupnccl-variables")
  for _, fs in ipairs { audit { NCCL_DEBUG = "WARNING", TORCH_FR_BUFFER_SIZE = "x", NCCL_COMM_ID = "h:1" } } do
    for _, x in ipairs(fs) do
      if x.evidence.reference then lu.assertStrMatches(x.evidence.reference, "docs/nccl%.md#[%w_-]+.*") end
    end
  end
end

function recipe.run(ctx)
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestNames", TestNames },
    { "TestTorchUcx", TestTorchUcx },
    { "TestCombos", TestCombos },
    { "TestGoodSet", TestGoodSet },
    { "TestReferences", TestReferences },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
