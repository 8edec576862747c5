-- The environment variables the env audit knows, as data (docs/stdlib.md, cs.env). Built from
-- NCCL 2.30.7's source and docs/env.rst and PyTorch's ProcessGroupNCCL. The facts the audit
-- relies on are written down in docs/nccl.md, "What the environment audit checks against"; every
-- entry names its section there in its `src` field (a key of M.SECTIONS; "documented, reading"
-- for two), which findings carry as evidence.reference (M.reference: "docs/nccl.md#..."). The
-- comments below cite the sections by the same keys ([reading] = "How NCCL reads a variable").
-- Entries with src = "ucx" (the common UCX names) only make a name "known".
--
-- An NCCL entry (M.nccl[NAME]):
--   type      how NCCL parses the value:
--               "int"     NCCL_PARAM: strtoll(str, NULL, 0) -- hex and octal accepted, no check
--                         of trailing characters, non-numeric text reads as 0 [reading]
--               "bool"    an int parameter used as 0/1 (same strtoll parsing)
--               "enum"    one of `values`; `case` = "insensitive" | "sensitive" | nil (the
--                         sources do not say); `combine` = "|" when values may be OR-ed;
--                         `legacy` = {min, max} when old integer values are still accepted
--               "level"   ncclGetLevel (P2P_LEVEL, NET_GDR_LEVEL): case-sensitive tokens or
--                         legacy integers 0-4 (>=4 = SYS)
--               "algo"    NCCL_ALGO / NCCL_PROTO list, `tokens` = the accepted names
--               "list"    comma list of `values`, `negate` = a leading ^ inverts it
--               "iflist"  NCCL_SOCKET_IFNAME: prefixes, ^ excludes, = exact
--               "hcalist" NCCL_IB_HCA: [^][=]hca[:port[:rail[:plane]]],... (max 32)
--               "path", "string", "hostport", "cidr", "netdevs"
--   min, max  valid range (ints); `values` = the only valid ints when given
--   default   documented default (text, for messages)
--   since     first NCCL version that reads it ("2.3" stands for "<=2.3", the oldest tag)
--   status    "current" | "debug" (env.rst's Debugging section: not for production)
--             | "experimental" | "internal" (undocumented but read, [internal])
--   deprecated = { since =, by = replacement, note = }
--   removed    = { last = last version that read it, by = replacement, note = }
--   alias_of  the variable this one is an alias of
local M = {}

M.NCCL_LATEST = "2.30.7"  -- the newest NCCL source this data was taken from

-- The sections of docs/nccl.md that `src` names (each a heading of that file; the anchors are
-- GitHub's for those headings).
M.DOC = "docs/nccl.md"
M.SECTIONS = {
  reading = "how-nccl-reads-a-variable",
  documented = "the-variables-nccl-documents",
  internal = "internal-variables",
  not_core = "names-core-nccl-does-not-read",
  pytorch = "pytorch-processgroupnccl-variables",
  ucx = "ucx-names",
}
-- evidence.reference of a finding about an entry: "documented, reading" ->
-- "docs/nccl.md#the-variables-nccl-documents, docs/nccl.md#how-nccl-reads-a-variable".
function M.reference(src)
  local out = {}
  for key in tostring(src):gmatch("[^,%s]+") do
    local anchor = M.SECTIONS[key]
    if not anchor then error("env_registry: no section " .. key .. " in " .. M.DOC, 2) end
    out[#out + 1] = M.DOC .. "#" .. anchor
  end
  return table.concat(out, ", ")
end

-- ---------------------------------------------------------------------------------------------
-- NCCL's documented set ([documented], env.rst at 2.30.7), with the parsing rules of [reading].
-- ---------------------------------------------------------------------------------------------
local LEVELS = { "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS" }  -- [reading]
M.LEVELS = LEVELS
M.LEGACY_LEVELS = { [0] = "LOC", [1] = "PIX", [2] = "PXB", [3] = "PHB", [4] = "SYS" }      -- [reading]
M.ALGOS = { "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT" }  -- [reading]
M.PROTOS = { "LL", "LL128", "Simple" }                                                     -- [reading]
M.FUNCS = { "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce" }            -- [reading]
M.DEBUG_LEVELS = { "VERSION", "WARN", "INFO", "ABORT", "TRACE" }                           -- [documented]
-- [documented]: NCCL_DEBUG_SUBSYS names with the first tag each appeared in.
M.SUBSYS = {
  INIT = "2.5", COLL = "2.5", P2P = "2.5", SHM = "2.5", NET = "2.5", GRAPH = "2.5", TUNING = "2.5",
  ALL = "2.5", ENV = "2.7", ALLOC = "2.9.9", CALL = "2.13", NVLS = "2.17", PROXY = "2.18",
  BOOTSTRAP = "2.21", REG = "2.21", PROFILE = "2.22", RAS = "2.24", DESTROY = "2.30.3",
  ALLOC_HOST = "2.30.7",
}

local nccl = {
  -- sockets and bootstrap
  NCCL_SOCKET_IFNAME = { type = "iflist", since = "2.3", default = "auto (skips lo, docker*, prefers ib*)", src = "documented" },
  NCCL_SOCKET_FAMILY = { type = "enum", values = { "AF_INET", "AF_INET6" }, since = "2.3", default = "auto", src = "documented" },
  NCCL_SOCKET_MAGIC = { type = "int", since = "2.30.7", default = "built-in", src = "documented" },
  NCCL_SOCKET_RETRY_CNT = { type = "int", min = 1, since = "2.24", default = "34", src = "documented" },
  NCCL_SOCKET_RETRY_SLEEP_MSEC = { type = "int", min = 1, since = "2.24", default = "100", src = "documented" },
  NCCL_SOCKET_POLL_TIMEOUT_MSEC = { type = "int", min = 0, since = "2.28", default = "0", src = "documented" },
  NCCL_SOCKET_NTHREADS = { type = "int", min = 1, max = 16, since = "2.4.8", default = "1", src = "documented" },
  NCCL_NSOCKS_PERTHREAD = { type = "int", min = 1, since = "2.4.8", default = "1", src = "documented" },
  NCCL_CROSS_NIC = { type = "int", values = { 0, 1, 2 }, since = "2.5", default = "2", src = "documented" },
  NCCL_UID_STAGGER_THRESHOLD = { type = "int", min = 1, since = "2.23", default = "256", src = "documented" },
  NCCL_UID_STAGGER_RATE = { type = "int", min = 1, since = "2.23", default = "7000", src = "documented" },
  NCCL_OOB_NET_ENABLE = { type = "bool", since = "2.23", default = "0", src = "documented" },
  NCCL_OOB_NET_IFNAME = { type = "hcalist", since = "2.23", src = "documented" },
  -- InfiniBand / RoCE
  NCCL_IB_HCA = { type = "hcalist", since = "2.3", default = "all", src = "documented" },
  NCCL_IB_TIMEOUT = { type = "int", min = 0, max = 31, infinite = true, since = "2.3",
                      default = "20 (2.23+; 18 from 2.14; 14 before)", src = "documented" },
  NCCL_IB_RETRY_CNT = { type = "int", min = 0, max = 7, since = "2.1.15", default = "7", src = "documented" },
  NCCL_IB_GID_INDEX = { type = "int", min = -1, since = "2.1.4", default = "-1", dynamic_since = "2.21", src = "documented" },
  NCCL_IB_ADDR_FAMILY = { type = "enum", values = { "AF_INET", "AF_INET6" }, since = "2.21", default = "AF_INET", src = "documented" },
  NCCL_IB_ADDR_RANGE = { type = "cidr", since = "2.21", src = "documented" },
  NCCL_IB_ROCE_VERSION_NUM = { type = "int", values = { 1, 2 }, since = "2.21", default = "2", src = "documented" },
  NCCL_IB_SL = { type = "int", min = 0, max = 15, since = "2.1.4", default = "0", src = "documented" },
  NCCL_IB_TC = { type = "int", min = 0, max = 255, since = "2.1.15", default = "0", src = "documented" },
  NCCL_IB_FIFO_TC = { type = "int", min = 0, max = 255, since = "2.22.3", default = "NCCL_IB_TC", src = "documented" },
  NCCL_IB_RETURN_ASYNC_EVENTS = { type = "bool", since = "2.23", default = "1", src = "documented" },
  NCCL_IB_DISABLE = { type = "bool", since = "2.3", default = "0", status = "debug", src = "documented" },
  NCCL_IB_AR_THRESHOLD = { type = "int", min = 0, unit = "bytes", since = "2.6", default = "8192", src = "documented" },
  NCCL_IB_OOO_RQ = { type = "bool", since = "2.30", default = "0", src = "documented" },
  NCCL_IB_QPS_PER_CONNECTION = { type = "int", min = 1, max = 128, since = "2.10", default = "1", src = "documented" },
  NCCL_IB_SPLIT_DATA_ON_QPS = { type = "bool", since = "2.18", default = "0", src = "documented" },
  NCCL_IB_PCI_RELAXED_ORDERING = { type = "int", values = { 0, 1, 2 }, since = "2.12", default = "2", src = "documented" },
  NCCL_IB_ADAPTIVE_ROUTING = { type = "bool", since = "2.16", default = "1 on IB, 0 on RoCE", src = "documented" },
  NCCL_IB_ECE_ENABLE = { type = "bool", since = "2.23", default = "1", src = "documented" },
  NCCL_IB_MERGE_NICS = { type = "bool", since = "2.20", default = "1", src = "documented" },
  -- network selection and plugins
  NCCL_NET = { type = "string", since = "2.10", default = "auto", src = "documented" },  -- IB, Socket or a plugin name, case-insensitive
  NCCL_NET_PLUGIN = { type = "string", since = "2.11", default = "libnccl-net.so", src = "documented" },
  NCCL_TUNER_PLUGIN = { type = "string", since = "2.19", default = "libnccl-tuner.so", src = "documented" },
  NCCL_PROFILER_PLUGIN = { type = "string", since = "2.23", default = "libnccl-profiler.so", src = "documented" },
  NCCL_ENV_PLUGIN = { type = "string", since = "2.28", default = "libnccl-env.so", src = "documented" },
  NCCL_NET_GDR_LEVEL = { type = "level", since = "2.4.0", default = "auto", src = "documented" },
  NCCL_NET_GDR_C2C = { type = "bool", since = "2.26", default = "1 (2.27+)", src = "documented" },
  NCCL_NET_GDR_READ = { type = "bool", since = "2.3", default = "1 on NVLink platforms", src = "documented" },
  NCCL_NET_SHARED_BUFFERS = { type = "bool", since = "2.8", default = "1", src = "documented" },
  NCCL_NET_SHARED_COMMS = { type = "bool", since = "2.12", default = "1", src = "documented" },
  NCCL_NET_MERGE_POLICY = { type = "enum", values = { "ALL", "RAIL" }, since = "2.30.5", default = "ALL", src = "documented" },
  NCCL_NETDEVS_POLICY = { type = "netdevs", since = "2.28", default = "AUTO", src = "documented" },
  NCCL_IGNORE_NET_MISMATCH = { type = "bool", since = "2.30", default = "1", src = "documented" },
  NCCL_IGNORE_COLLNET_MISMATCH = { type = "bool", since = "2.30", default = "0", src = "documented" },
  -- process, files, logging
  NCCL_IGNORE_CPU_AFFINITY = { type = "bool", since = "2.4.6", default = "0", src = "documented" },
  NCCL_CONF_FILE = { type = "path", since = "2.23", default = "~/.nccl.conf", no_tilde = true, must_exist = true, src = "documented" },
  NCCL_DEBUG = { type = "enum", values = M.DEBUG_LEVELS, case = "insensitive", since = "2.3", default = "no logging",
                 undocumented_values = { ABORT = true }, src = "documented" },
  NCCL_DEBUG_FILE = { type = "path", since = "2.2.12", default = "stdout", src = "documented" },
  NCCL_DEBUG_SUBSYS = { type = "list", values = M.SUBSYS, negate = true, since = "2.3.4",
                        default = "INIT,BOOTSTRAP,ENV", src = "documented" },
  NCCL_DEBUG_TIMESTAMP_FORMAT = { type = "string", since = "2.26", default = "[%F %T] ", src = "documented" },
  NCCL_DEBUG_TIMESTAMP_LEVELS = { type = "list", negate = true, since = "2.26", default = "WARN", src = "documented",
                                  values = { VERSION = "2.26", WARN = "2.26", INFO = "2.26", ABORT = "2.26",
                                             TRACE = "2.26", ALL = "2.26" } },
  NCCL_TOPO_FILE = { type = "path", since = "2.6", must_exist = true,
                     default = "/var/run/nvidia-topologyd/virtualTopology.xml if present", src = "documented" },
  NCCL_TOPO_DUMP_FILE = { type = "path", since = "2.6", src = "documented" },
  NCCL_SET_THREAD_NAME = { type = "bool", since = "2.12", default = "0", src = "documented" },
  -- CollNet, CTAs, NVLS, MNNVL
  NCCL_COLLNET_ENABLE = { type = "bool", since = "2.6", default = "0", src = "documented" },
  NCCL_COLLNET_NODE_THRESHOLD = { type = "int", since = "2.9.9", default = "2", src = "documented" },
  NCCL_CTA_POLICY = { type = "enum", values = { "DEFAULT", "EFFICIENCY", "ZERO" }, combine = "|", legacy = { 0, 2 },
                      names_since = "2.29", since = "2.27", default = "DEFAULT", src = "documented" },
  NCCL_MULTI_RANK_GPU_ENABLE = { type = "bool", since = "2.30", default = "0", status = "experimental", src = "documented" },
  NCCL_CGA_CLUSTER_SIZE = { type = "int", min = 0, max = 8, since = "2.16", src = "documented" },
  NCCL_MAX_CTAS = { type = "int", min = 1, max = 64, max_before = { "2.25", 32 }, since = "2.17", src = "documented" },
  NCCL_MIN_CTAS = { type = "int", min = 1, max = 64, max_before = { "2.25", 32 }, since = "2.17", src = "documented" },
  NCCL_NVLS_ENABLE = { type = "int", values = { 0, 1, 2 }, since = "2.17", default = "2", src = "documented" },
  NCCL_MNNVL_ENABLE = { type = "int", values = { 0, 1, 2 }, since = "2.21", default = "2", src = "documented" },
  NCCL_MNNVL_UUID = { type = "int", since = "2.25", default = "FM-assigned", src = "documented" },
  NCCL_MNNVL_CLIQUE_ID = { type = "int", min = -2147483648, max = 2147483647, since = "2.23", default = "FM-assigned", src = "documented" },
  -- env.rst's debugging section (transports, buffers, algorithms)
  NCCL_P2P_DISABLE = { type = "bool", exactly_one = true, since = "2.3", default = "0", status = "debug", src = "documented, reading" },
  NCCL_P2P_LEVEL = { type = "level", since = "2.3.4", default = "auto", status = "debug", src = "documented, reading" },
  NCCL_P2P_DIRECT_DISABLE = { type = "bool", since = "2.12", default = "0", status = "debug", src = "documented" },
  NCCL_SHM_DISABLE = { type = "bool", since = "2.3", default = "0", status = "debug", src = "documented" },
  NCCL_BUFFSIZE = { type = "int", min = 1, unit = "bytes", pow2 = true, since = "2.3", default = "4194304", status = "debug", src = "documented" },
  NCCL_NTHREADS = { type = "int", values = { 64, 128, 256, 512 }, since = "2.3", default = "512", status = "debug", src = "documented" },
  NCCL_MAX_NCHANNELS = { type = "int", min = 1, since = "2.5", status = "debug", src = "documented",
                         deprecated = { since = "2.17", by = "NCCL_MAX_CTAS" } },
  NCCL_MIN_NCHANNELS = { type = "int", min = 0, max = 32, since = "2.5", status = "debug", src = "documented",
                         deprecated = { since = "2.17", by = "NCCL_MIN_CTAS" } },
  NCCL_CHECK_POINTERS = { type = "bool", since = "2.2.12", default = "0", src = "documented",
                          deprecated = { since = "2.29.7", by = "NCCL_CHECK_MODE" } },
  NCCL_CHECK_MODE = { type = "enum", values = { "DEFAULT", "DEBUG_LOCAL", "DEBUG_GLOBAL" }, since = "2.29.7", default = "DEFAULT", src = "documented" },
  NCCL_LAUNCH_MODE = { type = "enum", values = { "PARALLEL", "GROUP" }, since = "2.1", default = "PARALLEL", src = "documented",
                       deprecated_values = { GROUP = "2.9" } },
  NCCL_ALGO = { type = "algo", tokens = M.ALGOS, since = "2.5", per_function_since = "2.24", status = "debug", src = "documented, reading" },
  NCCL_PROTO = { type = "algo", tokens = M.PROTOS, since = "2.5", per_function_since = "2.24", status = "debug", src = "documented, reading" },
  -- memory, registration, graphs, launch
  NCCL_MEM_SYNC_DOMAIN = { type = "bool", since = "2.16", default = "1", src = "documented" },
  NCCL_CUMEM_ENABLE = { type = "bool", since = "2.18", default = "auto", src = "documented" },
  NCCL_CUMEM_HOST_ENABLE = { type = "bool", since = "2.23", default = "1 if driver >= 12.6", src = "documented" },
  NCCL_NVB_DISABLE = { type = "bool", since = "2.11", default = "0", src = "documented" },
  NCCL_PXN_DISABLE = { type = "bool", since = "2.12", default = "0", src = "documented" },
  NCCL_P2P_PXN_LEVEL = { type = "int", values = { 0, 1, 2 }, since = "2.12", default = "2", src = "documented" },
  NCCL_PXN_C2C = { type = "bool", since = "2.27", default = "1 (2.28+)", src = "documented" },
  NCCL_RUNTIME_CONNECT = { type = "bool", since = "2.22", default = "1", src = "documented" },
  NCCL_GRAPH_REGISTER = { type = "bool", since = "2.11", default = "1", src = "documented" },
  NCCL_LOCAL_REGISTER = { type = "bool", since = "2.19", default = "1", src = "documented" },
  NCCL_LEGACY_CUDA_REGISTER = { type = "bool", since = "2.24", default = "0", src = "documented" },
  NCCL_WIN_ENABLE = { type = "bool", since = "2.27", default = "1", src = "documented" },
  NCCL_SET_STACK_SIZE = { type = "bool", since = "2.9", default = "0", src = "documented" },
  NCCL_GRAPH_MIXING_SUPPORT = { type = "bool", since = "2.13", default = "1", src = "documented" },
  NCCL_GRAPH_STREAM_ORDERING = { type = "bool", since = "2.30", default = "1", src = "documented" },
  NCCL_DMABUF_ENABLE = { type = "bool", since = "2.13", default = "1", src = "documented" },
  NCCL_P2P_NET_CHUNKSIZE = { type = "int", min = 1, unit = "bytes", since = "2.14", default = "131072", src = "documented" },
  NCCL_P2P_LL_THRESHOLD = { type = "int", min = 0, unit = "bytes", since = "2.14", default = "16384", src = "documented" },
  NCCL_ALLOC_P2P_NET_LL_BUFFERS = { type = "bool", since = "2.14", default = "0", src = "documented" },
  NCCL_COMM_BLOCKING = { type = "bool", since = "2.14", default = "unset (blocking)", src = "documented" },
  -- RAS and launch ordering
  NCCL_RAS_ENABLE = { type = "bool", since = "2.24", default = "1", src = "documented" },
  NCCL_RAS_ADDR = { type = "hostport", since = "2.24", default = "localhost:28028", src = "documented" },
  NCCL_RAS_TIMEOUT_FACTOR = { type = "int", min = 1, since = "2.24", default = "1", src = "documented" },
  NCCL_LAUNCH_ORDER_IMPLICIT = { type = "bool", since = "2.26", default = "0", src = "documented" },
  NCCL_LAUNCH_RACE_FATAL = { type = "bool", since = "2.26", default = "1", src = "documented" },
  NCCL_IPC_USE_ABSTRACT_SOCKET = { type = "bool", since = "2.29", default = "1", src = "documented" },
  NCCL_SYM_GIN_KERNELS_ENABLE = { type = "bool", since = "2.29", default = "1", src = "documented" },

  -- Read but deprecated: aliases still read at 2.30.7 (src/graph/connect.cc), ignored when
  -- NCCL_MAX/MIN_NCHANNELS is set.
  NCCL_MAX_NRINGS = { type = "int", min = 1, since = "2.0.5", alias_of = "NCCL_MAX_NCHANNELS", src = "documented",
                      deprecated = { since = "2.5", by = "NCCL_MAX_CTAS",
                                     note = "an alias of NCCL_MAX_NCHANNELS, itself deprecated for NCCL_MAX_CTAS" } },
  NCCL_MIN_NRINGS = { type = "int", min = 0, since = "2.2", alias_of = "NCCL_MIN_NCHANNELS", src = "documented",
                      deprecated = { since = "2.5", by = "NCCL_MIN_CTAS",
                                     note = "an alias of NCCL_MIN_NCHANNELS, itself deprecated for NCCL_MIN_CTAS" } },

  -- Documented as removed, and not read by any tag from 2.3.5 on
  NCCL_CHECKS_DISABLE = { removed = { last = "2.2.12", note = "deprecated 2.2.12; not read by >=2.3" }, src = "documented" },
  NCCL_IB_CUDA_SUPPORT = { removed = { last = "2.3.7", by = "NCCL_NET_GDR_LEVEL", note = "removed 2.4.0" }, src = "documented" },
  NCCL_IB_GDR_LEVEL = { removed = { last = "2.3.7", by = "NCCL_NET_GDR_LEVEL", note = "renamed 2.4.0" }, src = "documented" },
  NCCL_SINGLE_RING_THRESHOLD = { removed = { last = "2.2", note = "removed 2.3" }, src = "documented" },
  NCCL_LL_THRESHOLD = { removed = { last = "2.4.8", note = "removed 2.5" }, src = "documented" },
  NCCL_TREE_THRESHOLD = { removed = { last = "2.4.8", note = "2.4 only; removed 2.5" }, src = "documented" },
  -- Dropped from the source without documentation (last tag that read them)
  NCCL_RINGS = { removed = { last = "2.4.8" }, src = "documented" },
  NCCL_THREAD_THRESHOLD = { removed = { last = "2.4.8", by = "NCCL_THREAD_THRESHOLDS" }, src = "documented" },
  NCCL_GRAPH = { removed = { last = "2.5.7" }, src = "documented" },
  NCCL_SHARED_BUFF_COUNT = { removed = { last = "2.8.4" }, src = "documented" },
  NCCL_GDRCOPY_TAIL_ENABLE = { removed = { last = "2.11" }, src = "documented" },
  NCCL_AGG_ALLOC_MODE = { removed = { last = "2.12" }, src = "documented" },
  NCCL_NCCL_ALLOC_P2P_NET_LL_BUFFERS = { removed = { last = "2.16", by = "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
                                                     note = "a typo NCCL read in 2.14-2.16" }, src = "documented" },
  NCCL_AGG_CHANNEL_SIZE = { removed = { last = "2.19" }, src = "documented" },
  NCCL_CUDA_PATH = { removed = { last = "2.20" }, src = "documented" },
  NCCL_MNNVL = { removed = { last = "2.20", by = "NCCL_MNNVL_ENABLE" }, src = "documented" },
  NCCL_WORK_FIFO_DEPTH = { removed = { last = "2.21", by = "NCCL_WORK_FIFO_BYTES" }, src = "documented" },
  NCCL_PROXY_PROFILE = { removed = { last = "2.22" }, src = "documented" },
  NCCL_GIN_NCONTEXTS = { removed = { last = "2.29.7" }, src = "documented" },
  NCCL_GIN_SIGNAL_POOL_SIZE = { removed = { last = "2.29.7" }, src = "documented" },
  NCCL_GIN_COUNTER_POOL_SIZE = { removed = { last = "2.29.7" }, src = "documented" },
  NCCL_GIN_EXCLUSIVE_CONTEXTS = { removed = { last = "2.29.7" }, src = "documented" },
  NCCL_SHM_USE_CUDA_MEMCPY = { removed = { last = "2.30.4" }, src = "documented" },
  NCCL_SHM_MEMCPY_MODE = { removed = { last = "2.30.4" }, src = "documented" },
  NCCL_CREATE_THREAD_CONTEXT = { removed = { last = "2.30.4" }, src = "documented" },
}

-- [internal] Undocumented but read by NCCL 2.30.7: known, internal; warn rather than error.
-- Grouped by first tag; `t` gives the parser where it is clear from the name (b = 0/1 int,
-- i = int, s = text), nil where the sources do not say (then only the name is checked).
local internal = {
  { "2.3", "s", "NCCL_COMM_ID" }, { "2.5.6", "s", "NCCL_HOSTID" },
  { "2.6.4", "s", "NCCL_GRAPH_FILE NCCL_GRAPH_DUMP_FILE" }, { "2.6.4", "i", "NCCL_GRAPH_DUMP_FILE_RANK NCCL_TOPO_DUMP_FILE_RANK" },
  { "2.8.3", "i", "NCCL_IB_PKEY" }, { "2.8.3", "b", "NCCL_IB_USE_INLINE" }, { "2.18.1", "b", "NCCL_IB_MERGE_VFS" },
  { "2.22.3", "i", "NCCL_IB_ROUTABLE_FLID_GID_INDEX" },
  { "2.24.3", "b", "NCCL_IB_MQP_RETRY_ALL NCCL_IB_WARN_RAIL_LOCAL" }, { "2.24.3", "i", "NCCL_IB_MQP_RETRY_CNT NCCL_IB_MQP_RETRY_SLEEP_MSEC" },
  { "2.27.3", nil, "NCCL_IB_DATA_DIRECT" },
  { "2.29.7", nil, "NCCL_IB_DEVICE_PCI_ORDER NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME" },
  { "2.30.7", "b", "NCCL_IB_QUERY_PORT_SPEED NCCL_IB_SUBNET_AWARE_ROUTING" }, { "2.30.7", "i", "NCCL_IB_SUBNET_PREFIX_LEN" },
  { "2.30.3", "s", "NCCL_IBVERBS_LIB" },
  -- IB link resiliency
  { "2.29.7", "b", "NCCL_IB_RESILIENCY_PORT_FAILOVER" },
  { "2.29.7", "i", "NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY" },
  { "2.30.3", "b", "NCCL_IB_RESILIENCY_PORT_RECOVERY" },
  { "2.30.3", "i", "NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT " ..
                   "NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT " ..
                   "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL " ..
                   "NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE" },
  -- sockets
  { "2.27.3", "i", "NCCL_SOCKET_INLINE NCCL_SOCKET_MIN_TASKSIZE NCCL_SOCKET_RCVBUF NCCL_SOCKET_SNDBUF" },
  -- net
  { "2.12.7", "b", "NCCL_NET_DISABLE_INTRA" }, { "2.12.7", "i", "NCCL_NCHANNELS_PER_NET_PEER" },
  { "2.15.1", "b", "NCCL_NET_FORCE_FLUSH" }, { "2.18.1", "i", "NCCL_NET_OVERHEAD" },
  { "2.24.3", nil, "NCCL_NET_FORCE_MERGE NCCL_NET_MERGE_LEVEL" }, { "2.24.3", "b", "NCCL_NET_OPTIONAL_RECV_COMPLETION" },
  { "2.26.2", "i", "NCCL_NET_PLUGIN_REF_COUNT" }, { "2.30.7", nil, "NCCL_NET_GDR_MLOPART" },
  -- GDR / GDRCOPY
  { "2.3", "b", "NCCL_GDR_FLUSH_DISABLE" }, { "2.9.6", "b", "NCCL_GDRCOPY_ENABLE NCCL_GDRCOPY_FIFO_ENABLE NCCL_GDRCOPY_FLUSH_ENABLE" },
  { "2.12.7", "b", "NCCL_GDRCOPY_SYNC_ENABLE" },
  -- buffers, chunks, P2P
  { "2.7.3", "i", "NCCL_LL_BUFFSIZE NCCL_LL128_BUFFSIZE" }, { "2.5.6", "i", "NCCL_LL128_NTHREADS" }, { "2.27.3", "b", "NCCL_LL128_C2C" },
  { "2.12.7", "i", "NCCL_CHUNK_SIZE" }, { "2.16.2", "i", "NCCL_P2P_NVL_CHUNKSIZE NCCL_P2P_PCI_CHUNKSIZE" },
  { "2.7.3", "b", "NCCL_P2P_READ_ENABLE" }, { "2.13.4", "b", "NCCL_P2P_USE_CUDA_MEMCPY" },
  { "2.7.3", "i", "NCCL_MIN_P2P_NCHANNELS NCCL_MAX_P2P_NCHANNELS" }, { "2.28.7", "i", "NCCL_P2P_SCHEDULE_GROUP_SIZE" },
  { "2.29.2", "b", "NCCL_P2P_EPOCH_ENABLE" }, { "2.29.2", nil, "NCCL_P2P_PER_CHANNEL_NET_BW" }, { "2.30.3", "i", "NCCL_P2P_MAX_PEERS" },
  -- NVLS, algorithms, kernels
  { "2.17.1", "i", "NCCL_NVLS_NCHANNELS" }, { "2.20.3", "i", "NCCL_NVLSTREE_MAX_CHUNKSIZE" }, { "2.21.5", "i", "NCCL_NVLS_CHUNKSIZE" },
  { "2.23.4", "b", "NCCL_PAT_ENABLE" }, { "2.29.2", "b", "NCCL_ALLGATHERV_ENABLE" }, { "2.9.9", "b", "NCCL_NVB_PRECONNECT" },
  { "2.12.7", "b", "NCCL_IGNORE_DISABLED_P2P" }, { "2.13.4", nil, "NCCL_SHM_LOCALITY" }, { "2.5.6", "s", "NCCL_THREAD_THRESHOLDS" },
  { "2.3", "b", "NCCL_GROUP_CUDA_STREAM" }, { "2.11.4", "b", "NCCL_GRAPH_HELPER_DISABLE" },
  { "2.12.10", "i", "NCCL_L1_SHARED_MEMORY_CARVEOUT" },
  { "2.22.3", "i", "NCCL_UNPACK_DOUBLE_NCHANNELS NCCL_WORK_ARGS_BYTES NCCL_WORK_FIFO_BYTES" },
  -- proxy and connection
  { "2.14.3", "i", "NCCL_PROXY_DUMP_SIGNAL" }, { "2.16.2", "i", "NCCL_PROXY_APPEND_BATCH_SIZE" },
  { "2.16.5", "i", "NCCL_PROGRESS_APPENDOP_FREQ" }, { "2.28.3", "s", "NCCL_PROXY_CPUSET" },
  { "2.19.4", "b", "NCCL_REPORT_CONNECT_PROGRESS NCCL_WARN_ENABLE_DEBUG_INFO" }, { "2.19.4", "i", "NCCL_CONNECT_ROUND_MAX_PEERS" },
  -- communicators, symmetric memory, RMA
  { "2.18.1", "b", "NCCL_COMM_SPLIT_SHARE_RESOURCES" },
  { "2.27.3", "b", "NCCL_COMM_SHRINK_SHARE_RESOURCES NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE" },
  { "2.27.3", nil, "NCCL_SYM_KERNEL NCCL_SYM_CTAS NCCL_WIN_STRIDE" },
  { "2.29.2", nil, "NCCL_SYM_CE_THRESHOLD NCCL_NUM_RMA_CTX" },
  { "2.29.2", "b", "NCCL_SYM_NOWIN_ENABLE NCCL_MULTI_SEGMENT_REGISTER NCCL_ENABLE_VERSION_CHECK" },
  { "2.29.7", nil, "NCCL_LSA_TEAM_SIZE NCCL_NO_CACHE" }, { "2.29.7", "b", "NCCL_DISABLE_MEM_MANAGER NCCL_GDAKI_USE_RELIABLE_DB" },
  { "2.30.3", "b", "NCCL_SYM_TMA_ENABLE NCCL_ELASTIC_BUFFER_REGISTER NCCL_MNNVL_CROSS_CLIQUE NCCL_PARAM_DUMP_ALL" },
  { "2.30.4", "b", "NCCL_SYM_REUSE_SYSMEM_HANDLES" },
  { "2.30.7", nil, "NCCL_SYM_RS_GIN_CHUNK_SIZE NCCL_SHADOW_MEMPOOL_MAX_SIZE NCCL_DEV_API_JIT NCCL_TOPO_SPLIT_MLOPART" },
  { "2.30.7", "b", "NCCL_MLOPART_RDMA_ENABLE NCCL_RMA_DISABLE" }, { "2.30.7", "s", "NCCL_RMA_PLUGIN" },
  { "2.30.7", "i", "NCCL_RMA_PLUGIN_REF_COUNT" }, { "2.29.2", "i", "NCCL_RMA_PROXY_QUEUE_SIZE NCCL_RMA_PROXY_DUMP_SIGNAL" },
  -- GIN
  { "2.28.7", "b", "NCCL_GIN_ENABLE" }, { "2.28.7", nil, "NCCL_GIN_TYPE NCCL_GIN_GDAKI_NIC_HANDLER" },
  { "2.28.7", "i", "NCCL_GIN_PROXY_QUEUE_SIZE NCCL_GIN_ERROR_QUERY_SEC NCCL_GIN_GDAKI_QP_DEPTH" },
  { "2.29.7", "s", "NCCL_GIN_PLUGIN" }, { "2.29.7", "i", "NCCL_GIN_PLUGIN_REF_COUNT NCCL_GIN_NCONNECTIONS" },
  { "2.30.3", "i", "NCCL_GIN_GDAKI_MAX_QP_RD_ATOMIC NCCL_GIN_GDAKI_MAX_DEST_RD_ATOMIC" },
  { "2.30.7", "i", "NCCL_GIN_IB_TC" }, { "2.30.7", nil, "NCCL_GIN_CONNECTION_RAIL" },
  -- MNNVL, misc
  { "2.27.5", "b", "NCCL_MNNVL_SCATTER_NETS_ENABLE" }, { "2.28.7", nil, "NCCL_MNNVL_RAIL_PER_HOST" },
  { "2.28.3", nil, "NCCL_SET_CPU_STACK_SIZE" }, { "2.28.3", "b", "NCCL_SINGLE_PROC_MEM_REG_ENABLE NCCL_NVTX_DISABLE" },
}
local TYPE_OF = { b = "bool", i = "int", s = "string" }
for _, g in ipairs(internal) do
  for name in g[3]:gmatch("%S+") do
    assert(nccl[name] == nil, "env_registry: duplicate " .. name)
    nccl[name] = { type = TYPE_OF[g[2] or ""], since = g[1], status = "internal", src = "internal" }
  end
end
M.nccl = nccl

-- ---------------------------------------------------------------------------------------------
-- NCCL_* names NCCL never reads ([not_core]), and names that belong to someone else.
-- ---------------------------------------------------------------------------------------------
-- kind: "folklore" (read by nothing official), "typo" (a misspelling of a real alias).
M.not_nccl = {
  NCCL_TIMEOUT = { kind = "folklore", src = "not_core",
    message = "NCCL has no collective timeout and no tag from 2.3.5 to 2.30.7 reads NCCL_TIMEOUT; PyTorch does not read it either",
    remedy = "set the timeout where it is read: init_process_group(timeout=timedelta(...)) in PyTorch, or your own deadline; remove NCCL_TIMEOUT" },
  NCCL_IB_MTU = { kind = "folklore", by = "UCX_IB_MTU", src = "not_core",
    message = "not an NCCL variable: NCCL takes the MTU from the port's active_mtu (the smaller of both ends)",
    remedy = "set the MTU on the port (the subnet manager / ibv_devinfo's active_mtu); UCX_IB_MTU is the UCX knob" },
  NCCL_NVLS_RANGE = { kind = "folklore", src = "not_core",
    message = "does not exist anywhere; the NVLS variables are NCCL_NVLS_ENABLE (and the internal NCCL_NVLS_NCHANNELS, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE)",
    remedy = "remove it; use NCCL_NVLS_ENABLE=0|1|2 to control NVLink SHARP" },
  NCCL_MAX_RINGS = { kind = "typo", by = "NCCL_MAX_NRINGS", src = "not_core",
    message = "a typo: the (deprecated) alias is NCCL_MAX_NRINGS, and the current name NCCL_MAX_CTAS",
    remedy = "use NCCL_MAX_CTAS" },
  NCCL_MIN_RINGS = { kind = "typo", by = "NCCL_MIN_NRINGS", src = "not_core",
    message = "a typo: the (deprecated) alias is NCCL_MIN_NRINGS, and the current name NCCL_MIN_CTAS",
    remedy = "use NCCL_MIN_CTAS" },
}

-- ---------------------------------------------------------------------------------------------
-- Set by NVIDIA's container images, read by nothing at run time ([not_core]). The CUDA images'
-- Dockerfiles (gitlab.com/nvidia/container-images/cuda, dist/<version>/<os>/{base,runtime,
-- devel,cudnn}) export, as `ENV NAME value`: NVARCH, NVIDIA_REQUIRE_CUDA, NV_CUDA_CUDART_VERSION,
-- NV_CUDA_COMPAT_PACKAGE, CUDA_VERSION, NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES,
-- NV_CUDA_LIB_VERSION, NV_NVTX_VERSION, NV_LIBNPP_*, NV_LIBCUSPARSE_*, NV_LIBCUBLAS_*,
-- NV_LIBNCCL_PACKAGE_NAME / _VERSION / NV_LIBNCCL_PACKAGE, NCCL_VERSION (the libnccl2 package
-- the image installs, "2.21.5-1"), NV_LIBNCCL_DEV_PACKAGE*, NV_CUDA_CUDART_DEV_VERSION,
-- NV_NVML_DEV_VERSION, NV_CUDA_NSIGHT_COMPUTE_*, NV_NVPROF_*, NV_CUDNN_*, NVIDIA_PRODUCT_NAME;
-- NGC framework images add NVIDIA_BUILD_ID, NVIDIA_*_VERSION and the like. NCCL_VERSION is the
-- only one in a family the audit lints: NCCL does not read it, and it names the NCCL the image
-- packages, not the one a process loads (a pip or conda NCCL comes first on the library path of
-- most framework installs). cs.env.checks.container_facts compares the two.
-- ---------------------------------------------------------------------------------------------
M.container = {
  NCCL_VERSION = "the NCCL package (libnccl2) the NVIDIA CUDA image installs; informational, NCCL does not read it",
  NV_LIBNCCL_PACKAGE_VERSION = "the libnccl2 package version the image installs",
  NV_LIBNCCL_PACKAGE = "the libnccl2 apt package (name=version+cudaX.Y) the image installs",
  NV_LIBNCCL_PACKAGE_NAME = "the image's NCCL runtime package name (libnccl2)",
  NV_LIBNCCL_DEV_PACKAGE = "the libnccl-dev apt package the devel image installs",
  NV_LIBNCCL_DEV_PACKAGE_NAME = "the image's NCCL headers package name (libnccl-dev)",
  NV_LIBNCCL_DEV_PACKAGE_VERSION = "the libnccl-dev package version the devel image installs",
  CUDA_VERSION = "the CUDA toolkit version the image was built with",
  NVIDIA_REQUIRE_CUDA = "the driver constraint the NVIDIA container runtime checks at start",
  NVIDIA_VISIBLE_DEVICES = "the GPUs the NVIDIA container runtime mounts into the container",
  NVIDIA_DRIVER_CAPABILITIES = "the driver libraries the NVIDIA container runtime mounts (compute, utility, ...)",
  NVARCH = "the image's CPU architecture (x86_64, sbsa)",
  NV_CUDA_CUDART_VERSION = "the cuda-cudart package version of the image",
  NV_CUDA_COMPAT_PACKAGE = "the forward-compatibility package (cuda-compat) of the image",
  NV_CUDA_LIB_VERSION = "the cuda-libraries package version of the image",
  NVIDIA_PRODUCT_NAME = "the NVIDIA image's product name",
}
-- Prefixes of the same images' package variables (NV_LIBCUBLAS_VERSION, NV_CUDNN_PACKAGE, ...).
M.container_prefixes = { "NV_CUDA_", "NV_LIB", "NV_NVTX_", "NV_NVML_", "NV_NVPROF_", "NV_CUDNN_", "NVIDIA_" }

-- PyTorch's legacy NCCL_* aliases ([not_core], [pytorch]): NCCL ignores them, PyTorch reads them and warns
-- that they are deprecated.
M.pytorch_alias = {
  NCCL_BLOCKING_WAIT = "TORCH_NCCL_BLOCKING_WAIT",
  NCCL_ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING",
  NCCL_DESYNC_DEBUG = "TORCH_NCCL_DESYNC_DEBUG",
  NCCL_ENABLE_TIMING = "TORCH_NCCL_ENABLE_TIMING",
  NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK = "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
}

-- Read by a plugin, not by core NCCL ([not_core]: the nccl-rdma-sharp-plugins names and the
-- Inspector profiler plugin's).
local SHARP = "the Mellanox nccl-rdma-sharp-plugins net plugin (IBext); it only matters if libnccl-net.so is that plugin"
local INSPECTOR = "the NCCL Inspector profiler plugin (plugins/profiler/inspector); it only matters if NCCL_PROFILER_PLUGIN loads it"
M.plugin = {
  NCCL_IBEXT_DISABLE = { plugin = SHARP, src = "not_core" },
  NCCL_SHARP_DISABLE = { plugin = SHARP, src = "not_core" },
  NCCL_UCX_DISABLE = { plugin = SHARP, src = "not_core" },
  NCCL_UCX_RMA_DISABLE = { plugin = SHARP, src = "not_core" },
}
M.plugin_prefixes = {
  { prefix = "NCCL_SHARP_", plugin = SHARP, src = "not_core" },
  { prefix = "NCCL_INSPECTOR_", plugin = INSPECTOR, src = "not_core" },
}

-- ---------------------------------------------------------------------------------------------
-- PyTorch ProcessGroupNCCL ([pytorch]). type "pbool" = a PyTorch boolean flag.
-- ---------------------------------------------------------------------------------------------
M.torch = {
  TORCH_NCCL_ASYNC_ERROR_HANDLING = { type = "int", values = { 0, 1, 2, 3 }, default = "3", src = "pytorch",
    meaning = "0 none, 1 abort communicator and tear down, 2 abort communicator only, 3 tear down without abort" },
  TORCH_NCCL_BLOCKING_WAIT = { type = "pbool", default = "false", src = "pytorch" },
  TORCH_NCCL_PROPAGATE_ERROR = { type = "pbool", default = "false", src = "pytorch" },
  TORCH_NCCL_RETHROW_CUDA_ERRORS = { type = "pbool", default = "true", src = "pytorch" },
  TORCH_NCCL_USE_COMM_NONBLOCKING = { type = "pbool", src = "pytorch" },
  TORCH_NCCL_ENABLE_MONITORING = { type = "pbool", default = "true", src = "pytorch" },
  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = { type = "int", min = 1, default = "480 (older releases 600)", src = "pytorch" },
  TORCH_NCCL_DESYNC_DEBUG = { type = "pbool", default = "false", src = "pytorch" },
  TORCH_NCCL_ENABLE_TIMING = { type = "pbool", default = "false", src = "pytorch" },
  TORCH_NCCL_NAN_CHECK = { type = "pbool", default = "false", src = "pytorch" },
  TORCH_NCCL_DUMP_ON_TIMEOUT = { type = "pbool", default = "true (false in older releases)", src = "pytorch" },
  TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC = { type = "int", min = 0, default = "15000", src = "pytorch" },
  TORCH_NCCL_COORD_CHECK_MILSEC = { type = "int", min = 1, default = "1000", src = "pytorch" },
  TORCH_FR_BUFFER_SIZE = { type = "int", min = 0, default = "2000", src = "pytorch" },
  TORCH_NCCL_TRACE_BUFFER_SIZE = { type = "int", min = 0, alias_of = "TORCH_FR_BUFFER_SIZE", src = "pytorch",
    deprecated = { by = "TORCH_FR_BUFFER_SIZE",
                   note = "PyTorch warns: Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE instead" } },
  TORCH_FR_CPP_STACK = { type = "pbool", src = "pytorch" },
  TORCH_NCCL_TRACE_CPP_STACK = { type = "pbool", alias_of = "TORCH_FR_CPP_STACK", older_name = true, src = "pytorch" },
  TORCH_FR_DUMP_TEMP_FILE = { type = "string", default = "/tmp/nccl_trace_rank_", src = "pytorch" },
  TORCH_NCCL_DEBUG_INFO_TEMP_FILE = { type = "string", alias_of = "TORCH_FR_DUMP_TEMP_FILE", older_name = true, src = "pytorch" },
  TORCH_NCCL_DEBUG_INFO_PIPE_FILE = { type = "string", src = "pytorch" },
  -- The target of PyTorch's NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK alias ([not_core]).
  TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK = { type = "pbool", src = "pytorch" },
}

-- ---------------------------------------------------------------------------------------------
-- UCX: the common names ([ucx]: UCX's docs / `ucx_info -f`). Only the
-- names are checked; UCX itself warns about unused UCX_* variables (UCX_WARN_UNUSED_ENV_VARS).
-- ---------------------------------------------------------------------------------------------
M.ucx = {}
for name in ([[
  UCX_TLS UCX_NET_DEVICES UCX_IB_MTU UCX_IB_GID_INDEX UCX_IB_SL UCX_IB_TRAFFIC_CLASS
  UCX_IB_GPU_DIRECT_RDMA UCX_IB_PCI_RELAXED_ORDERING UCX_IB_REG_METHODS UCX_IB_NUM_PATHS
  UCX_IB_ADAPTIVE_ROUTING UCX_RC_TIMEOUT UCX_RC_RETRY_COUNT UCX_RC_PATH_MTU UCX_UD_TIMEOUT
  UCX_RNDV_THRESH UCX_RNDV_SCHEME UCX_ZCOPY_THRESH UCX_MAX_RNDV_RAILS UCX_MAX_EAGER_RAILS
  UCX_MEMTYPE_CACHE UCX_MEMTYPE_REG_WHOLE_ALLOC_TYPES UCX_CUDA_COPY_MAX_REG_RATIO UCX_FRAG_MEM_TYPE
  UCX_PROTO_ENABLE UCX_PROTO_INFO UCX_LOG_LEVEL UCX_LOG_FILE UCX_WARN_UNUSED_ENV_VARS
  UCX_HANDLE_ERRORS UCX_ERROR_SIGNALS UCX_SOCKADDR_TLS_PRIORITY UCX_POSIX_USE_PROC_LINK
  UCX_UNIFIED_MODE UCX_TCP_CM_REUSEADDR UCX_RCACHE_ENABLE UCX_MM_FIFO_SIZE
]]):gmatch("%S+") do
  M.ucx[name] = { src = "ucx" }
end

-- The engine's one policy (engine/core/env_policy.hpp): the prefixes the audit looks at (the
-- topology records the same families for every rank, so cs.topo.check compares what is audited;
-- everything else is only snapshotted), the prefixes env.snapshot keeps (also report.json's
-- "env" section), and the names whose values are never copied into a snapshot or a report
-- (credentials the launcher or a plugin may export).
local policy = require("commscript.native").env_policy()
M.AUDITED_PREFIXES = policy.audited_prefixes
M.SNAPSHOT_PREFIXES = policy.snapshot_prefixes
M.SECRET_PATTERNS = policy.secret_patterns
function M.is_secret(name)
  for _, p in ipairs(M.SECRET_PATTERNS) do
    if name:find(p, 1, true) then return true end
  end
  return false
end

return M
