-- cs.topo: the job's topology (DESIGN.md, Topology; reference/scorecard.md, step 1): every
-- rank's host, CPU binding, NUMA nodes, NICs and their speeds, PCIe links, GPUs, binary hash,
-- NCCL-related environment and library versions, gathered so that every rank holds all of it;
-- checked for the inconsistencies that hang or slow a job; rendered as the text rank 0 prints.
--
--   local topo = require "cs.topo"          -- or cs.topo
--   local t = topo.collect(ctx)             -- every rank calls it (two allgathers)
--   for _, f in ipairs(topo.check(t)) do ctx.report:finding(f) end
--   ctx.log(topo.render(t))
--   topo.report(ctx, t)                     -- the three above: report key "topology", the
--                                           -- findings, the text on rank 0; returns findings
--
-- topo.collect(ctx [, {sysfs_root=}]) -> t; topo.build(list) builds the same t from a list of
-- per-rank tables (what native.topology() returns, plus `rank`), which is what the tests use.
--
-- t = {
--   size = n,
--   ranks = { {rank, host, local_rank, local_size, pid, cpu = {affinity, count, bound,
--              numa_nodes, online}, env = {NAME = value}, versions = {...}, exe = {path, size,
--              sha256}}, ... }                        -- ranks[i] is rank i-1
--   hosts = { [name] = {name, ranks = {world ranks; ranks[k] has local rank k-1}, local_size,
--              first_rank, numa = {{node, cpus, count}}, nics = {...}, gpus = {...},
--              gpu_links = {...}, hwloc = {...}, cpu_online, cpu_online_count} },
--   host_order = { names, by their first rank },
--   summary = { ranks, hosts, ranks_per_host = {min, max}, uniform, gpus, numa_nodes,
--               ib_ports_active, ib_ports_down, versions = {label = value of rank 0},
--               binaries = number of distinct binary hashes },
-- }
-- NICs, GPUs and PCIe links: engine/topology.cpp describes their fields.
--
-- topo.check(t [, opts]) -> list of findings, each ready for ctx.report:finding (extra field
-- `kind`): version (a library differs between ranks), binary (the binary's hash differs),
-- env (an NCCL_*/TORCH_NCCL_*/UCX_* variable differs), nic_down (an IB port not ACTIVE, an
-- Ethernet NIC down), pcie (a link trained below its width or speed), nic_speed (the same NIC
-- runs at different speeds on different hosts), cpu_overlap (ranks of a host bound to shared
-- CPUs), unbound, oversubscribed, ranks_per_host. opts: env_prefixes (the variables compared).
local native = require "commscript.native"

local M = {}

local fmt = string.format

-- Host-level keys: sent by the first rank of each host only (they are the same for all of a
-- host's ranks), so the gathered data grows with hosts, not ranks.
local HOST_KEYS = { "numa", "hwloc", "nics", "gpus", "gpu_links", "sysfs_root", "gpu_probe_error" }

-- ---- small helpers ----

local function array(t) return native.array(t) end

-- {0,1,2,3,5} -> "0-3,5" (sorted first; a copy is sorted)
local function ranges(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local out, i = {}, 1
  while i <= #s do
    local j = i
    while j < #s and s[j + 1] == s[j] + 1 do j = j + 1 end
    out[#out + 1] = j > i and fmt("%d-%d", s[i], s[j]) or tostring(s[i])
    i = j + 1
  end
  return table.concat(out, ",")
end
M.ranges = ranges

-- "0-3,8" -> set {[0]=true, ...}, count
local function cpu_set(s)
  local set, n = {}, 0
  for part in tostring(s or ""):gmatch("[^,]+") do
    local a, b = part:match("^%s*(%d+)%s*%-%s*(%d+)%s*$")
    if a then
      for c = tonumber(a), tonumber(b) do
        if not set[c] then set[c], n = true, n + 1 end
      end
    else
      local c = tonumber(part:match("^%s*(%d+)%s*$"))
      if c and not set[c] then set[c], n = true, n + 1 end
    end
  end
  return set, n
end

local function rank_word(list)
  return (#list == 1 and "rank " or "ranks ") .. ranges(list)
end

local function host_word(list)
  return (#list == 1 and "host " or "hosts ") .. table.concat(list, ", ")
end

-- ---- build ----

local function copy_cpu(cpu)
  if type(cpu) ~= "table" then return {} end
  local c = {}
  for k, v in pairs(cpu) do
    if k ~= "cpus" then c[k] = v end  -- the list is the affinity string again; keep t small
  end
  return c
end

function M.build(list)
  local sorted = {}
  for i, r in ipairs(list) do sorted[i] = r end
  table.sort(sorted, function(a, b) return (a.rank or 0) < (b.rank or 0) end)
  local t = { size = #sorted, ranks = array {}, hosts = {}, host_order = array {} }
  for i, r in ipairs(sorted) do
    local name = r.host or "?"
    local h = t.hosts[name]
    if not h then
      h = { name = name, ranks = array {}, first_rank = r.rank or (i - 1) }
      t.hosts[name] = h
      t.host_order[#t.host_order + 1] = name
    end
    for _, k in ipairs(HOST_KEYS) do
      if h[k] == nil and r[k] ~= nil then h[k] = r[k] end
    end
    if h.cpu_online == nil and type(r.cpu) == "table" then
      h.cpu_online, h.cpu_online_count = r.cpu.online, r.cpu.online_count
    end
    local rank = r.rank or (i - 1)
    t.ranks[i] = {
      rank = rank, host = name, local_rank = #h.ranks, pid = r.pid, cpu = copy_cpu(r.cpu),
      env = r.env or {}, versions = r.versions or {}, exe = r.exe,
    }
    h.ranks[#h.ranks + 1] = rank
  end
  for _, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    h.local_size = #h.ranks
    h.numa = h.numa or array {}
    h.nics = h.nics or array {}
    h.gpus = h.gpus or array {}
    h.gpu_links = h.gpu_links or array {}
  end
  for _, e in ipairs(t.ranks) do e.local_size = t.hosts[e.host].local_size end
  t.summary = M.summarize(t)
  return t
end

-- ---- versions ----

-- Known version fields: a label for messages and how bad a difference between ranks is.
local VERSION_FIELDS = {
  ["version"] = { label = "commscript", severity = "warn" },
  ["backends.mpi.library"] = { label = "MPI library", severity = "error" },
  ["backends.nccl.library"] = { label = "NCCL library", severity = "error" },
  ["backends.nccl.header"] = { label = "NCCL headers built with", severity = "warn" },
  ["backends.nccl.built"] = { label = "NCCL backend built", severity = "warn" },
  ["backends.nccl.cuda_runtime"] = { label = "CUDA runtime", severity = "warn" },
  ["backends.nccl.cuda_driver"] = { label = "CUDA driver", severity = "warn" },
  ["luajit"] = { label = "LuaJIT", severity = "warn" },
}
local VERSION_ORDER = {
  "version", "backends.mpi.library", "backends.nccl.library", "backends.nccl.header",
  "backends.nccl.cuda_runtime", "backends.nccl.cuda_driver", "luajit",
}
local REMEDY = {
  ["backends.nccl.library"] = "Run every rank with the same NCCL: check LD_LIBRARY_PATH, the container image and "
    .. "the Python environment (torch bundles its own NCCL) on the ranks named. Ranks with different NCCL "
    .. "versions are a classic cause of hangs and of 'unhandled system error'.",
  ["backends.mpi.library"] = "Run every rank with the same MPI library (same module/image on every host); "
    .. "mixed MPI libraries fail at start-up or hang.",
  ["backends.nccl.cuda_driver"] = "Install the same GPU driver on every host (nvidia-smi shows it).",
  ["backends.nccl.cuda_runtime"] = "Use the same CUDA toolkit/runtime on every rank.",
}

-- {"a.b" = leaf} for every string/number/boolean leaf of a nested table.
local function flatten(tbl, prefix, out)
  out = out or {}
  for k, v in pairs(tbl or {}) do
    local key = prefix and (prefix .. "." .. tostring(k)) or tostring(k)
    if type(v) == "table" then flatten(v, key, out)
    else out[key] = tostring(v) end
  end
  return out
end

local function version_label(key)
  local f = VERSION_FIELDS[key]
  if f then return f.label end
  local backend, field = key:match("^backends%.([%w_]+)%.([%w_]+)$")
  if backend then return fmt("%s %s", backend, field) end
  return key
end

-- ---- summary ----

function M.summarize(t)
  local s = { ranks = t.size, hosts = #t.host_order, gpus = 0, numa_nodes = 0,
              ib_ports_active = 0, ib_ports_down = 0 }
  local mn, mx
  for _, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    mn = mn and math.min(mn, h.local_size) or h.local_size
    mx = mx and math.max(mx, h.local_size) or h.local_size
    s.gpus = s.gpus + #h.gpus
    s.numa_nodes = s.numa_nodes + #h.numa
    for _, nic in ipairs(h.nics) do
      if nic.kind == "rdma" then
        for _, p in ipairs(nic.ports or {}) do
          if p.state == "ACTIVE" then s.ib_ports_active = s.ib_ports_active + 1
          else s.ib_ports_down = s.ib_ports_down + 1 end
        end
      end
    end
  end
  s.ranks_per_host = { min = mn or 0, max = mx or 0 }
  s.uniform = mn == mx
  s.versions = {}
  local r0 = t.ranks[1]
  if r0 then
    local flat = flatten(r0.versions)
    for _, key in ipairs(VERSION_ORDER) do
      if flat[key] then s.versions[VERSION_FIELDS[key].label] = flat[key] end
    end
  end
  local hashes, nh = {}, 0
  for _, e in ipairs(t.ranks) do
    local hsh = e.exe and e.exe.sha256
    if hsh and not hashes[hsh] then hashes[hsh], nh = true, nh + 1 end
  end
  s.binaries = nh
  return s
end

-- ---- collect ----

function M.collect(ctx, opts)
  opts = opts or {}
  local comm = ctx.comm
  -- The first rank of each host sends the host-level part (and alone asks hwloc for it); the
  -- others only their own.
  local me = native.hostname()
  local hosts = comm:allgather_value(me)
  local first
  for i, h in ipairs(hosts) do
    if h == me then first = i - 1; break end
  end
  local mine = native.topology(opts.sysfs_root, { hwloc = first == ctx.rank })
  mine.rank = ctx.rank
  if first ~= ctx.rank then
    for _, k in ipairs(HOST_KEYS) do mine[k] = nil end
  end
  return M.build(comm:allgather_value(mine))
end

-- ---- check ----

-- Groups the ranks by value_of(rank entry): the largest group first (ties: the one with the
-- lowest rank), so groups[1] is "the rest of the job" and the others are the odd ones out.
local function groups_of(t, value_of)
  local by, order = {}, {}
  for _, e in ipairs(t.ranks) do
    local v = value_of(e)
    v = v == nil and "(unset)" or tostring(v)
    local g = by[v]
    if not g then
      g = { value = v, ranks = array {}, hosts = array {}, seen = {} }
      by[v] = g
      order[#order + 1] = g
    end
    g.ranks[#g.ranks + 1] = e.rank
    if not g.seen[e.host] then g.seen[e.host] = true; g.hosts[#g.hosts + 1] = e.host end
  end
  table.sort(order, function(a, b)
    if #a.ranks ~= #b.ranks then return #a.ranks > #b.ranks end
    return a.ranks[1] < b.ranks[1]
  end)
  for _, g in ipairs(order) do g.seen = nil end
  return order
end

-- "2.21.5 on ranks 0-2 (host a), 2.19.3 on rank 3 (host b)" (at most 4 groups named)
local function describe_groups(groups)
  local parts = {}
  for i, g in ipairs(groups) do
    if i > 4 then parts[#parts + 1] = fmt("and %d more values", #groups - 4); break end
    local hosts = #g.hosts <= 3 and table.concat(g.hosts, ", ") or fmt("%d hosts", #g.hosts)
    parts[#parts + 1] = fmt("%s on %s (%s)", g.value, rank_word(g.ranks), hosts)
  end
  return table.concat(parts, ", ")
end

-- The ranks and hosts outside the largest group.
local function odd_ones(groups)
  local ranks, hosts, seen = array {}, array {}, {}
  for i = 2, #groups do
    for _, r in ipairs(groups[i].ranks) do ranks[#ranks + 1] = r end
    for _, h in ipairs(groups[i].hosts) do
      if not seen[h] then seen[h] = true; hosts[#hosts + 1] = h end
    end
  end
  table.sort(ranks)
  return ranks, hosts
end

local function check_versions(t, out)
  local keys, seen = {}, {}
  for _, e in ipairs(t.ranks) do
    for k in pairs(flatten(e.versions)) do
      if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local groups = groups_of(t, function(e) return flatten(e.versions)[key] end)
    if #groups > 1 then
      local f = VERSION_FIELDS[key] or { severity = "warn" }
      local label = version_label(key)
      local ranks, hosts = odd_ones(groups)
      out[#out + 1] = {
        kind = "version", severity = f.severity,
        subject = { ranks = ranks, hosts = hosts, variable = label },
        message = fmt("%s differs between ranks: %s", label, describe_groups(groups)),
        evidence = { field = key, groups = groups },
        remedy = REMEDY[key] or fmt("Run every rank with the same %s.", label),
      }
    end
  end
end

local function check_binary(t, out)
  local groups = groups_of(t, function(e)
    if type(e.exe) ~= "table" then return nil end
    return e.exe.sha256 or "(unreadable)"
  end)
  if #groups > 1 then
    local ranks, hosts = odd_ones(groups)
    local short = {}
    for i, g in ipairs(groups) do
      short[i] = { value = g.value:sub(1, 12), ranks = g.ranks, hosts = g.hosts }
    end
    out[#out + 1] = {
      kind = "binary", severity = "warn",
      subject = { ranks = ranks, hosts = hosts },
      message = fmt("the commscript binary differs between ranks (sha256 %s)", describe_groups(short)),
      evidence = { groups = groups },
      remedy = "Run the same build on every host (a shared install, or the same image); results of "
        .. "different builds are not comparable.",
    }
  end
end

local DEFAULT_ENV_PREFIXES = { "NCCL_", "TORCH_NCCL_", "UCX_" }

local function check_env(t, out, prefixes)
  local names, seen = {}, {}
  for _, e in ipairs(t.ranks) do
    for name in pairs(e.env or {}) do
      for _, p in ipairs(prefixes) do
        if not seen[name] and name:sub(1, #p) == p then seen[name] = true; names[#names + 1] = name end
      end
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local groups = groups_of(t, function(e) return (e.env or {})[name] end)
    if #groups > 1 then
      local ranks, hosts = odd_ones(groups)
      out[#out + 1] = {
        kind = "env", severity = "warn",
        subject = { variable = name, ranks = ranks, hosts = hosts },
        message = fmt("%s differs between ranks: %s", name, describe_groups(groups)),
        evidence = { variable = name, groups = groups },
        remedy = fmt("Set %s the same way on every rank (the launcher's -x / --export, the job script, "
          .. "the container's environment); ranks that disagree on NCCL settings may pick different "
          .. "transports or protocols and hang.", name),
      }
    end
  end
end

local function pcie_text(l)
  if type(l) ~= "table" then return nil end
  local s = (l.gen and fmt("gen%d", l.gen) or (l.speed or "?")) .. (l.width and fmt(" x%d", l.width) or "")
  if l.below_max_width or l.below_max_speed then
    s = s .. fmt(" (max %s x%s)", l.max_gen and fmt("gen%d", l.max_gen) or (l.max_speed or "?"),
      l.max_width and tostring(l.max_width) or "?")
  end
  return s
end

-- A host's PCI devices with a link: NICs (once per PCI address) and GPUs.
local function host_devices(h)
  local out, seen = {}, {}
  for _, nic in ipairs(h.nics) do
    local pci = nic.pci
    if type(pci) == "table" and pci.bdf and not seen[pci.bdf] then
      seen[pci.bdf] = true
      out[#out + 1] = { what = "NIC " .. nic.name, kind = "nic", pci = pci }
    end
  end
  for _, g in ipairs(h.gpus) do
    if type(g) == "table" and g.bdf and not seen[g.bdf] then
      seen[g.bdf] = true
      out[#out + 1] = { what = "GPU " .. (g.name or g.bdf), kind = "gpu", pci = g }
    end
  end
  return out
end

local function check_nics(t, out)
  for _, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    for _, nic in ipairs(h.nics) do
      if nic.kind == "rdma" then
        for _, p in ipairs(nic.ports or {}) do
          if p.state ~= nil and p.state ~= "ACTIVE" then
            out[#out + 1] = {
              kind = "nic_down", severity = "warn",
              subject = { host = name, nic = nic.name, port = p.port },
              message = fmt("host %s: %s port %d is %s%s", name, nic.name, p.port or 0, p.state,
                p.phys_state and fmt(" (physical state %s)", p.phys_state) or ""),
              evidence = { host = name, nic = nic.name, port = p.port, state = p.state,
                           phys_state = p.phys_state, rate = p.rate, link_layer = p.link_layer },
              remedy = fmt("Check the cable, the switch port and the subnet manager (ibstat %s, "
                .. "ibportstate); if the port is not meant to be used, leave it out with NCCL_IB_HCA "
                .. "(e.g. NCCL_IB_HCA==%s:<active port>) so that NCCL does not try it.", nic.name, nic.name),
            }
          end
        end
      elseif nic.kind == "net" and type(nic.pci) == "table" and nic.operstate == "down" then
        out[#out + 1] = {
          kind = "nic_down", severity = "info",
          subject = { host = name, nic = nic.name },
          message = fmt("host %s: network interface %s is down", name, nic.name),
          evidence = { host = name, nic = nic.name, operstate = nic.operstate, pci = nic.pci.bdf },
          remedy = fmt("If %s should carry traffic, check its cable and switch port (ip link, ethtool %s); "
            .. "otherwise keep it out of NCCL_SOCKET_IFNAME.", nic.name, nic.name),
        }
      end
    end
  end
end

local function check_pcie(t, out)
  for _, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    for _, d in ipairs(host_devices(h)) do
      local l = d.pci.pcie
      if type(l) == "table" and (l.below_max_width or l.below_max_speed) then
        local gpu_speed_only = d.kind == "gpu" and not l.below_max_width
        local share = (l.gbytes_per_s and l.max_gbytes_per_s and l.max_gbytes_per_s > 0)
          and fmt("; %.1f of %.1f GB/s per direction", l.gbytes_per_s, l.max_gbytes_per_s) or ""
        out[#out + 1] = {
          kind = "pcie", severity = gpu_speed_only and "info" or "warn",
          subject = { host = name, device = d.what, bdf = d.pci.bdf },
          message = fmt("host %s: %s (PCI %s) has its PCIe link trained below its maximum: %s%s",
            name, d.what, d.pci.bdf, pcie_text(l), share),
          evidence = { host = name, device = d.what, bdf = d.pci.bdf, pcie = l },
          remedy = gpu_speed_only
            and "GPUs lower their PCIe speed when idle: check it again under load (nvidia-smi -q, "
              .. "'PCIe Generation Current'); if it stays low, reseat the card or check the slot and riser."
            or "Reseat the card, check the slot, riser and BIOS PCIe settings (lspci -vv: LnkSta against "
              .. "LnkCap). A link below its width or speed caps what the device can move.",
        }
      end
    end
  end
end

-- The same NIC (name/port) running at different speeds on different hosts.
local function check_nic_speeds(t, out)
  local by, order = {}, {}
  local function add(key, host, value, text)
    local e = by[key]
    if not e then e = { key = key, values = {} }; by[key] = e; order[#order + 1] = e end
    e.values[#e.values + 1] = { host = host, value = value, text = text }
  end
  for _, name in ipairs(t.host_order) do
    for _, nic in ipairs(t.hosts[name].nics) do
      if nic.kind == "rdma" then
        for _, p in ipairs(nic.ports or {}) do
          if p.state == "ACTIVE" and p.rate_gbps then
            add(fmt("%s port %d", nic.name, p.port or 0), name, p.rate_gbps, fmt("%g Gb/s", p.rate_gbps))
          end
        end
      elseif nic.kind == "net" and nic.operstate == "up" and nic.speed_mbps then
        add(nic.name, name, nic.speed_mbps / 1000, fmt("%g Gb/s", nic.speed_mbps / 1000))
      end
    end
  end
  for _, e in ipairs(order) do
    local best = 0
    for _, v in ipairs(e.values) do best = math.max(best, v.value) end
    local slow, slow_text = array {}, {}
    for _, v in ipairs(e.values) do
      if v.value < best then
        slow[#slow + 1] = v.host
        slow_text[#slow_text + 1] = fmt("%s on %s", v.text, v.host)
      end
    end
    if #slow > 0 then
      out[#out + 1] = {
        kind = "nic_speed", severity = "warn",
        subject = { hosts = slow, nic = e.key },
        message = fmt("%s runs slower on %s than elsewhere (%g Gb/s): %s", e.key, host_word(slow), best,
          table.concat(slow_text, ", ")),
        evidence = { nic = e.key, best_gbps = best, values = e.values },
        remedy = "Check the cable, transceiver and switch port of the slow hosts (ibstat / ethtool); one slow "
          .. "link slows every ring and tree that crosses it.",
      }
    end
  end
end

local function check_cpus(t, out)
  local mn, mx = t.summary.ranks_per_host.min, t.summary.ranks_per_host.max
  if mn ~= mx then
    local counts = array {}
    for _, name in ipairs(t.host_order) do counts[#counts + 1] = { host = name, ranks = t.hosts[name].local_size } end
    out[#out + 1] = {
      kind = "ranks_per_host", severity = "info", subject = "job",
      message = fmt("hosts run different numbers of ranks (%d to %d)", mn, mx),
      evidence = { per_host = counts },
      remedy = "Give every host the same number of ranks (mpirun --map-by ppr:N:node, srun "
        .. "--ntasks-per-node) unless the imbalance is meant.",
    }
  end
  for _, name in ipairs(t.host_order) do
    local h = t.hosts[name]
    local entries = {}
    for _, e in ipairs(t.ranks) do
      if e.host == name then entries[#entries + 1] = e end
    end
    local online = h.cpu_online_count
    if online and #entries > online then
      out[#out + 1] = {
        kind = "oversubscribed", severity = "info", subject = { host = name },
        message = fmt("host %s runs %d ranks on %d CPUs: timings include waiting for a CPU", name, #entries, online),
        evidence = { host = name, ranks = h.ranks, cpus = online },
        remedy = "Run at most one rank per CPU core when measuring.",
      }
    end
    if #entries >= 2 then
      local unbound = true
      for _, e in ipairs(entries) do
        if e.cpu.bound ~= false then unbound = false end
      end
      if unbound then
        out[#out + 1] = {
          kind = "unbound", severity = "info", subject = { host = name, ranks = h.ranks },
          message = fmt("host %s: its %d ranks are not bound to CPUs (each may run on any of %s)", name,
            #entries, entries[1].cpu.online or entries[1].cpu.affinity or "its CPUs"),
          evidence = { host = name, ranks = h.ranks, affinity = entries[1].cpu.affinity },
          remedy = "Bind each rank to its cores and NUMA node (mpirun --bind-to core|numa, srun "
            .. "--cpu-bind=cores): unbound ranks move between cores and NUMA nodes and their timings are noisy.",
        }
      else
        -- Ranks bound to the same set of CPUs are fine while the set has a CPU for each of
        -- them (--bind-to numa|socket); more ranks than CPUs in the set, or two different sets
        -- that share CPUs, are not.
        local groups, order = {}, {}
        for _, e in ipairs(entries) do
          local aff = e.cpu.affinity or ""
          if not groups[aff] then
            local set, n = cpu_set(aff)
            groups[aff] = { affinity = aff, set = set, n = n, ranks = array {} }
            order[#order + 1] = groups[aff]
          end
          local g = groups[aff]
          g.ranks[#g.ranks + 1] = e.rank
        end
        local problems, texts = array {}, {}
        local function note(p, text)
          problems[#problems + 1] = p
          if #texts < 4 then texts[#texts + 1] = text end
        end
        for _, g in ipairs(order) do
          if #g.ranks > 1 and #g.ranks > g.n then
            note({ ranks = g.ranks, cpus = g.affinity, shared = g.affinity },
              fmt("%s are all bound to CPU%s %s (%d ranks on %d CPU%s)", rank_word(g.ranks), g.n == 1 and "" or "s",
                g.affinity, #g.ranks, g.n, g.n == 1 and "" or "s"))
          end
        end
        for i = 1, #order do
          for j = i + 1, #order do
            local a, b = order[i], order[j]
            local shared = {}
            for c in pairs(a.set) do
              if b.set[c] then shared[#shared + 1] = c end
            end
            if #shared > 0 then
              local cpus = ranges(shared)
              note({ ranks = a.ranks, other_ranks = b.ranks, shared = cpus },
                fmt("%s (CPUs %s) and %s (CPUs %s) share CPU%s %s", rank_word(a.ranks), a.affinity, rank_word(b.ranks),
                  b.affinity, #shared == 1 and "" or "s", cpus))
            end
          end
        end
        if #problems > 0 then
          local binding = array {}
          for _, e in ipairs(entries) do binding[#binding + 1] = { rank = e.rank, affinity = e.cpu.affinity } end
          out[#out + 1] = {
            kind = "cpu_overlap", severity = "warn", subject = { host = name },
            message = fmt("host %s: ranks are bound to overlapping CPUs: %s%s", name, table.concat(texts, "; "),
              #problems > #texts and fmt(" (%d overlaps in all)", #problems) or ""),
            evidence = { host = name, overlaps = problems, binding = binding },
            remedy = "Bind each rank to its own cores (mpirun --bind-to core --map-by ppr:N:node:pe=M, srun "
              .. "--cpu-bind=cores); ranks that share cores slow each other down.",
          }
        end
      end
    end
  end
end

function M.check(t, opts)
  opts = opts or {}
  local out = array {}
  check_versions(t, out)
  check_binary(t, out)
  check_env(t, out, opts.env_prefixes or DEFAULT_ENV_PREFIXES)
  check_nics(t, out)
  check_pcie(t, out)
  check_nic_speeds(t, out)
  check_cpus(t, out)
  return out
end

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

-- opts: max_hosts (hosts shown in full; more get one line each, default 8), max_ranks (ranks
-- listed per host, default 16).
function M.render(t, opts)
  opts = opts or {}
  local max_hosts, max_ranks = opts.max_hosts or 8, opts.max_ranks or 16
  local s = t.summary or M.summarize(t)
  local L = {}
  local function add(line) L[#L + 1] = line end
  local per = s.uniform and fmt("%d per host", s.ranks_per_host.max)
    or fmt("%d to %d per host", s.ranks_per_host.min, s.ranks_per_host.max)
  add(fmt("Topology: %d rank%s on %d host%s (%s)", s.ranks, s.ranks == 1 and "" or "s", s.hosts,
    s.hosts == 1 and "" or "s", per))
  -- versions of rank 0, and whether all ranks agree
  local v = {}
  local r0 = t.ranks[1]
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
    add("  versions: " .. table.concat(v, ", ") .. (differ and " -- DIFFER between ranks (see findings)"
      or (#t.ranks > 1 and " -- same on all ranks" or "")))
  end
  -- the NCCL-related variables of rank 0, and whether all ranks agree
  if r0 then
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
    add(fmt("  environment: %s%s", #kv > 0 and table.concat(kv, " ") or "no NCCL_*/TORCH_NCCL_*/UCX_* variables set",
      not same and " -- DIFFERS between ranks (see findings)" or (#t.ranks > 1 and " -- same on all ranks" or "")))
  end
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
      add(fmt("host %s: %s (%d), %d GPUs, %d active IB ports %s", name, rank_word(h.ranks), h.local_size, #h.gpus,
        active, #speeds > 0 and ("(" .. table.concat(speeds, " ") .. ")") or ""))
    end
  end
  return table.concat(L, "\n")
end

-- Sets the report's "topology" section, reports the findings and prints the summary on rank 0.
-- Every rank calls it with the same t (the findings are the same on every rank, so every rank's
-- exit code agrees; only rank 0 writes the report); returns the findings.
function M.report(ctx, t, opts)
  local findings = M.check(t, opts)
  ctx.report:set("topology", t)
  for _, f in ipairs(findings) do ctx.report:finding(f) end
  ctx.log(M.render(t, opts))
  return findings
end

return M
