-- cs.env.ranks, part 5 of 5 of cs.env: across ranks. snapshot (the variables worth comparing, secrets left
-- out), compare (what differs between ranks), dedupe (one finding for the same finding on
-- several ranks), collect (the whole audit over a job, collective), and this host's network
-- interfaces and RDMA devices (from the engine: native.interfaces, native.topology's NICs).
local R = require "cs.env.registry"
local P = require "cs.env.parse"
local A = require "cs.env.combos"
local F = require "cs.env.conf"
local text = require "cs.text"
local findings_mod = require "cs.findings"
local set_of, show, has_prefix = P.internal.set_of, P.internal.show, P.internal.has_prefix
local sort_findings, is_audited = A.sort_findings, A.internal.is_audited
local native = require "commscript.native"
local M = {}

-- ---------------------------------------------------------------------------------------------
-- snapshot and cross-rank comparison
-- ---------------------------------------------------------------------------------------------

function M.snapshot(vars)
  local s = {}
  for k, v in pairs(vars) do
    if type(k) == "string" and not R.is_secret(k) then
      for _, p in ipairs(R.SNAPSHOT_PREFIXES) do
        if has_prefix(k, p) then s[k] = v; break end
      end
    end
  end
  return s
end

-- Variables that differ between ranks by design (launcher bookkeeping, one GPU per rank).
local function per_rank_by_design(name)
  if name == "CUDA_VISIBLE_DEVICES" then return true end
  if has_prefix(name, "OMPI_MCA_") then
    local p = name:sub(10)
    return has_prefix(p, "orte_") or has_prefix(p, "ess") or has_prefix(p, "pmix") or has_prefix(p, "prte_")
      or p == "initial_wdir" or has_prefix(p, "shmem_")
  end
  if has_prefix(name, "OMPI_") then return true end  -- OMPI_COMM_WORLD_*, OMPI_ARGV, OMPI_COMMAND ...
  return false
end

-- Settings that change which algorithm, protocol, channels, buffers or transports a
-- communicator uses: ranks that disagree on them can mismatch and hang (our judgment: differing
-- environments between ranks are a classic cause of hangs).
M.MUST_AGREE = set_of {
  "NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE", "NCCL_NTHREADS",
  "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",
  "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL",
  "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_PXN_DISABLE", "NCCL_P2P_NET_CHUNKSIZE",
  "NCCL_CHUNK_SIZE", "NCCL_RUNTIME_CONNECT", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS",
  "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD", "NCCL_MNNVL_ENABLE", "NCCL_PAT_ENABLE",
}

local function compare_severity(name)
  if per_rank_by_design(name) then return nil end
  if has_prefix(name, "NCCL_") then
    if M.MUST_AGREE[name] then return "error" end
    if has_prefix(name, "NCCL_DEBUG") then return "info" end
    return "warn"
  end
  if has_prefix(name, "TORCH_NCCL_") or has_prefix(name, "TORCH_FR_") or has_prefix(name, "UCX_")
      or has_prefix(name, "OMPI_MCA_") then return "warn" end
  return "info"
end

-- "0-3,5,7-8" (cs.text.ranges)
M.rank_ranges = text.ranges

-- compare(snapshots [, opts]) -> findings. snapshots[r + 1] is rank r's snapshot (NAME ->
-- value); opts.hosts[r + 1] its host (named in the evidence). One finding per variable that is
-- not the same on every rank (unset counts as a value); subject.ranks lists the ranks outside
-- the largest group, or every rank when no group is larger than all others.
function M.compare(snaps, opts)
  opts = opts or {}
  local names, seen = {}, {}
  for _, s in ipairs(snaps) do
    for k in pairs(s) do if not seen[k] then seen[k] = true; names[#names + 1] = k end end
  end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local sev = compare_severity(name)
    if sev then
      local groups, order = {}, {}
      for i, s in ipairs(snaps) do
        local v = s[name]
        local key = v == nil and "\0unset" or ("=" .. v)
        if not groups[key] then groups[key] = { value = v, ranks = {} }; order[#order + 1] = key end
        local g = groups[key]
        g.ranks[#g.ranks + 1] = i - 1
      end
      if #order > 1 then
        -- Largest group first (the majority), then by first rank.
        table.sort(order, function(a, b)
          local ga, gb = groups[a], groups[b]
          if #ga.ranks ~= #gb.ranks then return #ga.ranks > #gb.ranks end
          return ga.ranks[1] < gb.ranks[1]
        end)
        local parts, values, minority = {}, {}, {}
        for gi, key in ipairs(order) do
          local g = groups[key]
          local rs = text.ranges(g.ranks)
          parts[#parts + 1] = ("%s on rank%s %s"):format(g.value == nil and "unset" or ("'" .. g.value .. "'"),
            #g.ranks > 1 and "s" or "", rs)
          local hosts
          if opts.hosts then
            local hs, hseen = {}, {}
            for _, r in ipairs(g.ranks) do
              local h = opts.hosts[r + 1]
              if h and not hseen[h] then hseen[h] = true; hs[#hs + 1] = h end
            end
            hosts = hs
          end
          values[#values + 1] = { value = g.value, set = g.value ~= nil, ranks = g.ranks, hosts = hosts }
          if gi > 1 then for _, r in ipairs(g.ranks) do minority[#minority + 1] = r end end
        end
        table.sort(minority)
        -- No strict majority: every rank is involved (which side is "wrong" is unknown).
        if #groups[order[1]].ranks == #groups[order[2]].ranks then
          minority = {}
          for i = 1, #snaps do minority[i] = i - 1 end
        end
        out[#out + 1] = {
          severity = sev,
          subject = { variable = name, ranks = minority },
          message = ("%s differs between ranks: %s"):format(name, table.concat(parts, "; ")),
          evidence = { values = values, rule = "differs-between-ranks", ranks = #snaps },
          remedy = sev == "error"
            and "give every rank the same value (a communicator whose ranks disagree on it can mismatch or hang)"
            or "give every rank the same value (export it from the launcher, e.g. mpirun -x NAME)",
        }
      end
    end
  end
  return sort_findings(out)
end

-- ---------------------------------------------------------------------------------------------
-- merging per-rank findings
-- ---------------------------------------------------------------------------------------------
-- dedupe(per_rank, opts) -> findings. per_rank[r + 1] is rank r's list of findings. The same
-- finding (severity, variable, message, remedy) on several ranks becomes one, with
-- subject.ranks listing them (and subject.hosts when opts.hosts is given).
function M.dedupe(per_rank, opts)
  opts = opts or {}
  local by, order = {}, {}
  for i, list in ipairs(per_rank) do
    for _, f in ipairs(list) do
      local subj = type(f.subject) == "table" and f.subject or { variable = tostring(f.subject) }
      local key = table.concat({ f.severity, tostring(subj.variable), f.message, f.remedy or "" }, "\0")
      local m = by[key]
      if not m then
        local s = {}
        for k, v in pairs(subj) do s[k] = v end
        m = { severity = f.severity, subject = s, message = f.message, evidence = f.evidence or {}, remedy = f.remedy or "",
              _ranks = {} }
        by[key] = m
        order[#order + 1] = m
      end
      m._ranks[#m._ranks + 1] = i - 1
    end
  end
  local out = {}
  for _, m in ipairs(order) do
    m.subject.ranks = m._ranks
    if opts.hosts then
      local hs, seen = {}, {}
      for _, r in ipairs(m._ranks) do
        local h = opts.hosts[r + 1]
        if h and not seen[h] then seen[h] = true; hs[#hs + 1] = h end
      end
      m.subject.hosts = hs
    end
    m._ranks = nil
    out[#out + 1] = m
  end
  return sort_findings(out)
end

-- format_table(findings, nranks) -> the lines of the table env_audit prints (cs.findings.table).
M.format_table = findings_mod.table

-- ---------------------------------------------------------------------------------------------
-- the whole audit over a job (collective: every rank calls it)
-- ---------------------------------------------------------------------------------------------
-- collect(ctx, opts) -> { findings, counts = {error, warn, info}, files, audited, from_files,
-- hosts, nhosts }. Every rank audits its own environment and NCCL config files (full_audit),
-- the results are gathered with ctx.comm:allgather_value, the same finding on several ranks
-- becomes one with the ranks listed (dedupe), and variables that differ between ranks are
-- added (compare). Every rank returns the same findings, so reporting them on every rank gives
-- every rank the same exit code. opts: nccl_version, strict, extra (conf files), host_checks
-- (default true: NCCL_SOCKET_IFNAME / NCCL_IB_HCA against this host), nics (this host's NIC
-- list from a topology already collected; default native.topology's), vars (default
-- cs.environ()), root (a rank: the results are gathered to it alone, and the other ranks get
-- no findings and their own counts). `files`, `audited` and `from_files` are rank 0's.
function M.collect(ctx, opts)
  opts = opts or {}
  local vars = opts.vars or require("commscript").environ()
  local sources = {}
  local cfg_env = type(ctx.config) == "table" and ctx.config.env
  if type(cfg_env) == "table" then
    for k in pairs(cfg_env) do if vars[k] ~= nil then sources[k] = "config [env]" end end
  end
  for k in pairs(vars) do sources[k] = sources[k] or "environment" end
  local libraries = opts.libraries
  if libraries == nil and ctx.report and ctx.report.get then
    local c = ctx.report:get("commscript")  -- the NCCL and CUDA this process loaded (container_facts)
    libraries = type(c) == "table" and type(c.backends) == "table" and c.backends.nccl or nil
  end
  local aopts = { nccl_version = opts.nccl_version, strict = opts.strict, sources = sources, extra = opts.extra,
                  home = opts.home, system_file = opts.system_file, nvlink = opts.nvlink, libraries = libraries }
  if opts.host_checks ~= false then
    aopts.interfaces = M.interfaces()
    -- the engine's NIC list: the caller's topology when it has one, else this host's
    aopts.hcas = M.rdma_devices(opts.nics or native.topology(nil, { hwloc = false, exe = false }).nics)
  end
  local findings, conf = F.full_audit(vars, aopts)

  local files = {}
  for _, f in ipairs(conf.files) do
    files[#files + 1] = { path = f.path, role = f.role, exists = f.exists, applied = f.applied, entries = #f.entries }
  end
  local from_files, audited = 0, 0
  for _ in pairs(conf.effective) do from_files = from_files + 1 end
  for k in pairs(conf.merged) do if is_audited(k) then audited = audited + 1 end end

  local mine = { host = ctx.host, findings = findings, snapshot = M.snapshot(conf.merged), files = files,
                 audited = audited, from_files = from_files }
  local all
  if opts.root then
    -- only that rank merges (O(n) there, O(1) elsewhere); the others return no findings
    all = ctx.comm:gather_value(mine, opts.root)
    if not all then
      return { findings = {}, counts = { error = 0, warn = 0, info = 0 }, files = files, audited = audited,
               from_files = from_files, hosts = {}, nhosts = 0 }
    end
  else
    all = ctx.comm:allgather_value(mine)
  end
  local per_rank, snaps, hosts, nhosts, seen = {}, {}, {}, 0, {}
  for i, a in ipairs(all) do
    per_rank[i], snaps[i], hosts[i] = a.findings or {}, a.snapshot or {}, a.host
    if not seen[a.host] then seen[a.host] = true; nhosts = nhosts + 1 end
  end
  local merged = M.dedupe(per_rank, { hosts = hosts })
  for _, f in ipairs(M.compare(snaps, { hosts = hosts })) do merged[#merged + 1] = f end
  merged = sort_findings(merged)
  local counts = { error = 0, warn = 0, info = 0 }
  for _, f in ipairs(merged) do counts[f.severity] = counts[f.severity] + 1 end
  return { findings = merged, counts = counts, files = all[1].files or {}, audited = all[1].audited or 0,
           from_files = all[1].from_files or 0, hosts = hosts, nhosts = nhosts }
end

-- ---------------------------------------------------------------------------------------------
-- what this host has (reads /proc and /sys; for the recipe, not for tests)
-- ---------------------------------------------------------------------------------------------
-- This host's network interface names, sorted: the engine's list (native.interfaces, the
-- kernel's if_nameindex, virtual interfaces included: NCCL_SOCKET_IFNAME may name lo or a bond).
function M.interfaces()
  return native.interfaces()
end

-- The RDMA device names (InfiniBand, RoCE, EFA ...) among a NIC list of the engine's topology
-- (native.topology().nics, or a host's nics in cs.topo's model), sorted. nil when the list is
-- nil or has no RDMA device (nothing to check NCCL_IB_HCA against).
function M.rdma_devices(nics)
  if type(nics) ~= "table" then return nil end
  local l, seen = {}, {}
  for _, nic in ipairs(nics) do
    if nic.kind == "rdma" and type(nic.name) == "string" and not seen[nic.name] then
      seen[nic.name] = true
      l[#l + 1] = nic.name
    end
  end
  if #l == 0 then return nil end
  table.sort(l)
  return l
end

return M
