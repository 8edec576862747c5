-- cs.topo.checks, part 2 of 3 of cs.topo: check(t [, opts]) -> the findings (versions, binary, env, NICs, PCIe
-- links, NIC speeds, CPU binding, ranks per host). Pure functions over the model.
local model = require "cs.topo.model"
local I = model.internal
local fmt, array, ranges, cpu_set, rank_word, host_word, flatten, version_label, VERSION_FIELDS, REMEDY =
  I.fmt, I.array, I.ranges, I.cpu_set, I.rank_word, I.host_word, I.flatten, I.version_label, I.VERSION_FIELDS,
  I.REMEDY

local M = {}

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

-- The variables compared between ranks by default: the audited prefixes (cs.env.registry).
local DEFAULT_ENV_PREFIXES = require("cs.env.registry").AUDITED_PREFIXES

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
      out[#out + 1] = { what = g.cuda_index and fmt("GPU %d (%s)", g.cuda_index, g.name or "?") or ("GPU " .. (g.name or g.bdf)),
                        kind = "gpu", pci = g }
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


-- Shared with the other parts of cs.topo (not part of its API).
M.internal = { pcie_text = pcie_text, DEFAULT_ENV_PREFIXES = DEFAULT_ENV_PREFIXES }

return M
