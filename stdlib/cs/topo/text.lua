-- cs.topo.text, part 3 of 3 of cs.topo: render(t [, opts]) -> the text rank 0 prints (hosts, NICs, GPUs, ranks,
-- versions).
local model = require "cs.topo.model"
local checks = require "cs.topo.checks"
local fmt, ranges, rank_word, flatten = model.internal.fmt, model.internal.ranges, model.internal.rank_word,
  model.internal.flatten
local pcie_text, DEFAULT_ENV_PREFIXES = checks.internal.pcie_text, checks.internal.DEFAULT_ENV_PREFIXES
local text = require "cs.text"

local M = {}

-- ---- render ----

local function nic_lines(h)
  local lines = {}
  for _, nic in ipairs(h.nics) do
    local pci = type(nic.pci) == "table" and nic.pci or {}
    local where = {}
    if pci.pcie then where[#where + 1] = "PCIe " .. pcie_text(pci.pcie) end
    if pci.numa_node then where[#where + 1] = "NUMA " .. pci.numa_node end
    if pci.bdf then where[#where + 1] = pci.bdf end
    local tail = #where > 0 and ("; " .. table.concat(where, ", ")) or ""
    if nic.kind == "rdma" then
      local ports = nic.ports or {}
      if #ports == 0 then lines[#lines + 1] = fmt("NIC %s: no ports%s", nic.name, tail) end
      for _, p in ipairs(ports) do
        lines[#lines + 1] = fmt("NIC %s port %d: %s, %s, %s%s", nic.name, p.port or 0, p.state or "?",
          p.rate or "rate ?", p.link_layer or "?", tail)
      end
    else
      local speed = nic.speed_mbps and fmt("%d Mb/s", nic.speed_mbps) or "speed unknown"
      lines[#lines + 1] = fmt("NIC %s (%s%s): %s, %s%s", nic.name, tostring(nic.type or "net"),
        nic.rdma_device and (", " .. nic.rdma_device) or "", nic.operstate or "?", speed, tail)
    end
  end
  return lines
end

local function gpu_lines(h)
  local lines = {}
  for _, g in ipairs(h.gpus) do
    local where = {}
    if g.pcie then where[#where + 1] = "PCIe " .. pcie_text(g.pcie) end
    if g.nvlinks_present or g.nvlinks_active then
      where[#where + 1] = fmt("NVLink%s %d/%d up%s", g.nvlink_version and tostring(g.nvlink_version) or "",
        g.nvlinks_active or 0, g.nvlinks_present or g.nvlinks_active or 0,
        (g.nvswitch_links or 0) > 0 and " to NVSwitch" or "")
    end
    if g.numa_node then where[#where + 1] = "NUMA " .. g.numa_node end
    lines[#lines + 1] = fmt("GPU %s: %s%s%s", g.bdf or "?", g.name or ((g.vendor or "?") .. " " .. (g.device_id or "")),
      #where > 0 and ", " or "", table.concat(where, ", "))
  end
  return lines
end

local function host_header(h)
  local parts = { fmt("host %s: %s (%d)", h.name, rank_word(h.ranks), h.local_size) }
  if h.cpu_online then parts[#parts + 1] = fmt("CPUs %s", h.cpu_online) end
  if #h.numa > 0 then parts[#parts + 1] = fmt("%d NUMA node%s", #h.numa, #h.numa == 1 and "" or "s") end
  local hw = h.hwloc
  if type(hw) == "table" and hw.available then
    parts[#parts + 1] = fmt("%d package%s, %d cores, %d PUs", hw.packages or 0, hw.packages == 1 and "" or "s",
      hw.cores or 0, hw.pus or 0)
    if hw.cpu_model then parts[#parts + 1] = hw.cpu_model end
  end
  if #h.gpus > 0 then parts[#parts + 1] = fmt("%d GPU%s", #h.gpus, #h.gpus == 1 and "" or "s") end
  return table.concat(parts, ", ")
end

local function rank_line(e)
  local c = e.cpu or {}
  local numa = type(c.numa_nodes) == "table" and #c.numa_nodes > 0 and (" (NUMA " .. ranges(c.numa_nodes) .. ")") or ""
  return fmt("rank %d (local %d) pid %s: CPUs %s%s%s", e.rank, e.local_rank, tostring(e.pid or "?"),
    c.affinity or "?", numa, c.bound == false and ", not bound" or "")
end

-- The versions of rank 0 (commscript, MPI, NCCL, LuaJIT), and whether all ranks agree; nil when
-- none is known.
local function versions_line(t, r0)
  local v = {}
  local f0 = r0 and flatten(r0.versions) or {}
  if f0.version then v[#v + 1] = "commscript " .. f0.version end
  if f0["backends.mpi.library"] then v[#v + 1] = "MPI " .. f0["backends.mpi.library"] end
  if f0["backends.nccl.library"] then
    local extra = {}
    local hdr = f0["backends.nccl.header"]
    if hdr and hdr ~= f0["backends.nccl.library"] then extra[#extra + 1] = "headers " .. hdr end
    if f0["backends.nccl.cuda_runtime"] then extra[#extra + 1] = "CUDA runtime " .. f0["backends.nccl.cuda_runtime"] end
    if f0["backends.nccl.cuda_driver"] then extra[#extra + 1] = "driver " .. f0["backends.nccl.cuda_driver"] end
    v[#v + 1] = "NCCL " .. f0["backends.nccl.library"] .. (#extra > 0 and (" (" .. table.concat(extra, ", ") .. ")") or "")
  elseif f0["backends.nccl.built"] == "false" then
    v[#v + 1] = "NCCL not built"
  end
  if f0.luajit then v[#v + 1] = f0.luajit:match("^LuaJIT") and f0.luajit or ("LuaJIT " .. f0.luajit) end
  local differ = false
  if #t.ranks > 1 then
    for i = 2, #t.ranks do
      local fi = flatten(t.ranks[i].versions)
      for k, x in pairs(f0) do if fi[k] ~= x then differ = true end end
      for k in pairs(fi) do if f0[k] == nil then differ = true end end
    end
  end
  if #v > 0 then
    return "  versions: " .. table.concat(v, ", ") .. (differ and " -- DIFFER between ranks (see findings)"
      or (#t.ranks > 1 and " -- same on all ranks" or ""))
  end
  return nil
end

-- The NCCL-related variables of rank 0 (opts.env_prefixes' families), and whether all ranks agree.
local function env_line(t, r0, opts)
  local names, prefixes = {}, opts.env_prefixes or DEFAULT_ENV_PREFIXES
  for name in pairs(r0.env or {}) do
    for _, p in ipairs(prefixes) do
      if name:sub(1, #p) == p then names[#names + 1] = name; break end
    end
  end
  table.sort(names)
  local same = true
  for i = 2, #t.ranks do
    local e = t.ranks[i].env or {}
    for _, p in ipairs(prefixes) do
      for name, x in pairs(e) do
        if name:sub(1, #p) == p and (r0.env or {})[name] ~= x then same = false end
      end
    end
    for _, name in ipairs(names) do
      if e[name] ~= r0.env[name] then same = false end
    end
  end
  local kv = {}
  for i, name in ipairs(names) do
    if i > 12 then kv[#kv + 1] = fmt("... %d more", #names - 12); break end
    kv[#kv + 1] = fmt("%s=%s", name, r0.env[name])
  end
  local families = {}
  for i, p in ipairs(prefixes) do families[i] = p .. "*" end
  return fmt("  environment: %s%s", #kv > 0 and table.concat(kv, " ")
    or ("no %s variables set"):format(table.concat(families, "/")),
    not same and " -- DIFFERS between ranks (see findings)" or (#t.ranks > 1 and " -- same on all ranks" or ""))
end

-- opts: max_hosts (hosts shown in full; more get one line each, default 8), max_ranks (ranks
-- listed per host, default 16).
function M.render(t, opts)
  opts = opts or {}
  local max_hosts, max_ranks = opts.max_hosts or 8, opts.max_ranks or 16
  local s = t.summary or model.summarize(t)
  local L = {}
  local function add(line) L[#L + 1] = line end
  local per = s.uniform and fmt("%d per host", s.ranks_per_host.max)
    or fmt("%d to %d per host", s.ranks_per_host.min, s.ranks_per_host.max)
  add(fmt("Topology: %d rank%s on %d host%s (%s)", s.ranks, s.ranks == 1 and "" or "s", s.hosts,
    s.hosts == 1 and "" or "s", per))
  -- versions of rank 0, and whether all ranks agree
  local r0 = t.ranks[1]
  local versions = versions_line(t, r0)
  if versions then add(versions) end
  -- the NCCL-related variables of rank 0, and whether all ranks agree
  if r0 then add(env_line(t, r0, opts)) end
  if r0 and type(r0.exe) == "table" and r0.exe.sha256 then
    add(fmt("  binary: %s sha256 %s%s", r0.exe.path or "?", r0.exe.sha256:sub(1, 16),
      s.binaries > 1 and fmt(" -- %d different binaries (see findings)", s.binaries)
      or (#t.ranks > 1 and " -- same on all ranks" or "")))
  end
  for i, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    if i <= max_hosts then
      add(host_header(h))
      for _, n in ipairs(h.numa) do add(fmt("  NUMA node %d: CPUs %s", n.node, n.cpus or "?")) end
      local shown = 0
      for _, e in ipairs(t.ranks) do
        if e.host == name then
          shown = shown + 1
          if shown <= max_ranks then add("  " .. rank_line(e)) end
        end
      end
      if shown > max_ranks then add(fmt("  ... and %d more ranks", shown - max_ranks)) end
      for _, line in ipairs(nic_lines(h)) do add("  " .. line) end
      if #h.nics == 0 then add("  no NICs found in sysfs") end
      for _, line in ipairs(gpu_lines(h)) do add("  " .. line) end
    else
      local active, speeds = 0, {}
      for _, nic in ipairs(h.nics) do
        for _, p in ipairs(nic.ports or {}) do
          if p.state == "ACTIVE" then active = active + 1; speeds[#speeds + 1] = p.rate_gbps and fmt("%gG", p.rate_gbps) or "?" end
        end
      end
      add(fmt("host %s: %s (%d), %s, %s %s", name, rank_word(h.ranks), h.local_size, text.plural(#h.gpus, "GPU"),
        text.plural(active, "active IB port"), #speeds > 0 and ("(" .. table.concat(speeds, " ") .. ")") or ""))
    end
  end
  return table.concat(L, "\n")
end

return M
