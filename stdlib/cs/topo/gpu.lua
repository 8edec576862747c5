-- cs.topo.gpu: the GPU path of a job, from the topology's link facts (NVML and sysfs, gathered by
-- cs.topo) and the copies gpu_copy_bw's method measures (docs/full_diag-and-scorecard.md, "GPU
-- nodes"). Pure functions over cs.topo's model; no communication.
--
--   nvlink_link_gbps(version)     -> GB/s one way per NVLink of that generation
--   pcie_nominal(pcie)            -> GB/s one way of a PCIe link as trained, its text ("gen5 x16")
--   gpu_nvlink_nominal(gpu)       -> GB/s one way over the GPU's active NVLinks, text
--   rank_gpus(t)                  -> rank -> {host, gpu} (the GPU each rank uses: CUDA index
--                                    local_rank % GPUs of its host, as the NCCL backend picks it)
--   reference(t, copies)          -> { gbps, source, nominal_gbps, nominal, measured_gbps, scope }
--   copy_lines(t, copies)         -> { "host h: GPU i (bdf) pinned host->GPU x, GPU->host y GB/s: p % ..." }
--                                    the bus bandwidth a GPU job's path should give, or nil, why
--   check_links(t [, opts])       -> findings: NVLinks present but down, the ranks' GPUs and NICs
--                                    on another NUMA node than the ranks' CPUs (not when
--                                    opts.gpus_used is false: the ranks use no GPU)
--   check_copies(t, copies)       -> findings: a GPU's pinned host<->GPU copy below its PCIe
--                                    link's expectation, GPU<->GPU copies over NVLink below theirs
--   check_utilisation(card)       -> a finding when the scorecard's all-reduce busbw is under the
--                                    utilisation target of the GPU path's reference
-- `copies` is { [host] = what cs.gpu.copy_bandwidth returned on that host }.
local M = {}
local fmt = string.format

-- One NVLink, one direction, GB/s, by the generation NVML reports (nvmlDeviceGetNvLinkVersion):
-- NVLink 1 (P100) 20; 2 (V100), 3 (A100), 4 (H100/H200) 25; 5 (B200) 50 (the benchmarks reference, section 6:
-- H100 18 links x 50 GB/s both directions = 450 one way; A100 12 x 50 = 600 both ways).
M.NVLINK_GBPS = { [1] = 20, [2] = 25, [3] = 25, [4] = 25, [5] = 50 }
-- What a healthy link reaches, as a fraction of its nominal one-way rate (the benchmarks reference, section 6):
-- PCIe copies 80-87 % (gen4 x16 ~25-26 of 31.5 GB/s; gen5 x16 55 of 63 GB/s on an H200), NVLink
-- ~80 % (H100: ~370 of 450 GB/s). A value under these is a finding.
M.EXPECT = { pcie_copy = 0.7, nvlink_copy = 0.7 }
-- PCIe lane, one direction, GB/s after encoding (engine/host/topology.cpp, pcie_lane_gbytes).
local LANE = { 0.25, 0.5, 8 * 128 / 130 / 8, 16 * 128 / 130 / 8, 32 * 128 / 130 / 8, 64 * 242 / 256 / 8,
               128 * 242 / 256 / 8 }

-- at(list, i): list[i], also when a sparse list came through a JSON round trip (keys "2", "3",
-- ...); nil when list is not a table (cs.html.topo reads the copies with it too)
function M.at(list, i)
  if type(list) ~= "table" then return nil end
  local v = list[i]
  if v == nil then v = list[tostring(i)] end
  return v
end
local at = M.at

function M.nvlink_link_gbps(version) return M.NVLINK_GBPS[tonumber(version) or 0] end

function M.pcie_nominal(p)
  if type(p) ~= "table" or not p.gen or not p.width then return nil end
  local g = p.gbytes_per_s or ((LANE[p.gen] or 0) * p.width)
  if not (g > 0) then return nil end
  return g, fmt("PCIe gen%d x%d", p.gen, p.width)
end

function M.gpu_nvlink_nominal(g)
  local n, per = tonumber(g.nvlinks_active) or 0, M.nvlink_link_gbps(g.nvlink_version)
  if n <= 0 or not per then return nil end
  return n * per, fmt("NVLink%s x%d%s", tostring(g.nvlink_version), n, (g.nvswitch_links or 0) > 0 and " to NVSwitch" or "")
end

local function label(g)
  return fmt("GPU %s (%s)", tostring(g.cuda_index or "?"), tostring(g.bdf or "?"))
end
M.label = label

local function by_cuda_index(h)
  local out, n = {}, 0
  for pos, g in ipairs(h.gpus or {}) do
    if type(g) == "table" and g.cuda_index then out[g.cuda_index] = { gpu = g, pos = pos - 1 }; n = n + 1 end
  end
  return out, n
end

function M.rank_gpus(t)
  local out, idx = {}, {}
  for _, e in ipairs(t.ranks or {}) do
    local h = t.hosts[e.host]
    if h then
      idx[e.host] = idx[e.host] or { by_cuda_index(h) }
      local map, n = idx[e.host][1], idx[e.host][2]
      if n > 0 then
        local x = map[(e.local_rank or 0) % n]
        if x then out[e.rank] = { host = e.host, gpu = x.gpu, pos = x.pos } end
      end
    end
  end
  return out
end

-- The nominal one-way rate between two GPUs of a host: NVLink (direct or through NVSwitches)
-- when they have it, else the slower of their PCIe links.
local function pair_nominal(h, a, b)
  for _, l in ipairs(h.gpu_links or {}) do
    if ((l.a == a.pos and l.b == b.pos) or (l.a == b.pos and l.b == a.pos)) and l.kind == "NVLink" then
      local via_switch = (a.gpu.nvswitch_links or 0) > 0 and (b.gpu.nvswitch_links or 0) > 0
      local per = M.nvlink_link_gbps(l.version or a.gpu.nvlink_version)
      if per then
        return l.links * per, fmt("NVLink%s x%d%s", tostring(l.version or a.gpu.nvlink_version), l.links,
          via_switch and " through NVSwitch" or "")
      end
    end
  end
  local ga, ta = M.pcie_nominal(a.gpu.pcie)
  local gb, tb = M.pcie_nominal(b.gpu.pcie)
  if ga and gb then
    if gb < ga then return gb, tb .. " (no NVLink)" end
    return ga, ta .. " (no NVLink)"
  end
  return nil
end
M.pair_nominal = pair_nominal

-- The job's GPUs per host (rank_gpus), distinct.
local function used_gpus(t)
  local per, seen = {}, {}
  local rg = M.rank_gpus(t)
  for r = 0, #(t.ranks or {}) - 1 do
    local x = rg[r]
    if x then
      local key = x.host .. "/" .. x.pos
      if not seen[key] then
        seen[key] = true
        per[x.host] = per[x.host] or {}
        table.insert(per[x.host], x)
      end
    end
  end
  return per
end

-- A host's line rate to other hosts, GB/s: its active RDMA ports, else its Ethernet NICs that
-- are up (a PCI device with a speed).
local function nic_line_rate(h)
  local rdma, eth, names = 0, 0, {}
  for _, nic in ipairs(h.nics or {}) do
    if nic.kind == "rdma" then
      for _, p in ipairs(nic.ports or {}) do
        if p.state == "ACTIVE" and p.rate_gbps then
          rdma = rdma + p.rate_gbps / 8
          names[#names + 1] = fmt("%s/%s %g Gb/s", nic.name, tostring(p.port), p.rate_gbps)
        end
      end
    end
  end
  if rdma > 0 then return rdma, table.concat(names, " + ") end
  for _, nic in ipairs(h.nics or {}) do
    if nic.kind == "net" and type(nic.pci) == "table" and nic.operstate == "up" and (nic.speed_mbps or 0) > 0 then
      eth = eth + nic.speed_mbps / 8000
      names[#names + 1] = fmt("%s %g Gb/s", nic.name, nic.speed_mbps / 1000)
    end
  end
  if eth > 0 then return eth, table.concat(names, " + ") end
  return nil
end

function M.reference(t, copies)
  copies = copies or {}
  local nranks = #(t.ranks or {})
  if nranks < 2 then return nil, "one rank: busbw is 0 by definition ((n-1)/n), nothing moves between GPUs" end
  local per = used_gpus(t)
  local best, parts = nil, {}
  local out = { scope = #(t.host_order or {}) > 1 and "inter-node" or "intra-node", hosts = {} }
  local function take(gbps, text, extra)
    parts[#parts + 1] = text
    if not best or gbps < best then
      best = gbps
      for k, v in pairs(extra or {}) do out[k] = v end
    end
  end
  for _, name in ipairs(t.host_order or {}) do
    local h, used = t.hosts[name], per[name] or {}
    if #used >= 2 then
      local nom, nom_text
      for i = 1, #used do
        for j = i + 1, #used do
          local g, tx = pair_nominal(h, used[i], used[j])
          if g and (not nom or g < nom) then nom, nom_text = g, tx end
        end
      end
      local c, vals = copies[name], {}
      if type(c) == "table" and type(c.peer) == "table" then
        for _, a in ipairs(used) do
          for _, b in ipairs(used) do
            local row = at(c.peer, a.gpu.cuda_index + 1)
            local v = a ~= b and at(row, b.gpu.cuda_index + 1)
            if type(v) == "number" then vals[#vals + 1] = v end
          end
        end
      end
      local measured = require("cs.stats").median(vals)
      local host_ref = measured and (nom and math.min(measured, nom) or measured) or nom
      if host_ref then
        local what = {}
        if measured then
          what[#what + 1] = fmt("measured GPU->GPU copy %.1f GB/s (median of %d pairs, gpu_copy_bw's method)", measured, #vals)
        end
        if nom then what[#what + 1] = fmt("nominal %s = %.1f GB/s one way (NVML)", nom_text, nom) end
        local text = fmt("host %s: %s", name, table.concat(what, "; "))
        take(host_ref, text, { nominal_gbps = nom, nominal = nom_text, measured_gbps = measured })
        out.hosts[#out.hosts + 1] = { host = name, gbps = host_ref, nominal_gbps = nom, nominal = nom_text,
                                      measured_gbps = measured, pairs = #vals }
      end
    end
  end
  if #(t.host_order or {}) > 1 then
    for _, name in ipairs(t.host_order) do
      local g, tx = nic_line_rate(t.hosts[name])
      if g then
        take(g, fmt("host %s: NIC line rate %s = %.1f GB/s", name, tx, g),
          { nominal_gbps = g, nominal = "NIC line rate " .. tx, measured_gbps = false })
      end
    end
  end
  if not best then return nil, "no GPU link facts (NVML) and no GPU->GPU copy measured" end
  out.gbps = best
  out.source = "GPU path, the slowest of: " .. table.concat(parts, "; ")
  if out.measured_gbps == false then out.measured_gbps = nil end
  return out
end

-- ---- checks ----

local function finding(kind, sev, host, g, message, evidence, remedy)
  evidence.host, evidence.bdf, evidence.gpu = host, g.bdf, g.cuda_index
  return { kind = kind, severity = sev, subject = { host = host, gpu = g.cuda_index, bdf = g.bdf },
           message = message, evidence = evidence, remedy = remedy }
end

function M.check_links(t, opts)
  opts = opts or {}
  local out = {}
  for _, name in ipairs(t.host_order or {}) do
    for _, g in ipairs(t.hosts[name].gpus or {}) do
      local down = type(g.nvlinks_down) == "table" and g.nvlinks_down or {}
      if #down > 0 then
        local l = {}
        for i, x in ipairs(down) do l[i] = tostring(x) end
        out[#out + 1] = finding("nvlink_down", "warn", name, g,
          fmt("host %s: %s has NVLink%s %s down: %d of %d links active", name, label(g), #down == 1 and "" or "s",
            table.concat(l, ","), g.nvlinks_active or 0, g.nvlinks_present or (#down + (g.nvlinks_active or 0))),
          { nvlinks_active = g.nvlinks_active, nvlinks_present = g.nvlinks_present, down = down },
          "Check the link's state and error counters (nvidia-smi nvlink -s / -e); a link that stays down needs the "
          .. "GPU or baseboard serviced (drain the node): NCCL runs, slower, over the remaining links.")
      end
    end
  end
  -- the ranks' GPUs against the ranks' CPUs, and the NICs near those GPUs
  if opts.gpus_used == false then return out end  -- the ranks use no GPU (not --backend nccl)
  local rg = M.rank_gpus(t)
  local seen = {}
  for _, e in ipairs(t.ranks or {}) do
    local x = rg[e.rank]
    local nodes = e.cpu and e.cpu.numa_nodes
    if x and type(nodes) == "table" and #nodes > 0 and x.gpu.numa_node and x.gpu.numa_node >= 0 then
      local near = false
      for _, n in ipairs(nodes) do if n == x.gpu.numa_node then near = true end end
      if not near then
        local l = {}
        for i, n in ipairs(nodes) do l[i] = tostring(n) end
        out[#out + 1] = finding("gpu_numa", "warn", e.host, x.gpu,
          fmt("host %s: rank %d uses %s on NUMA node %d, but runs on CPUs of NUMA node %s: its host<->GPU copies "
            .. "cross the inter-socket link", e.host, e.rank, label(x.gpu), x.gpu.numa_node, table.concat(l, ",")),
          { rank = e.rank, gpu_numa_node = x.gpu.numa_node, rank_numa_nodes = nodes, affinity = e.cpu.affinity },
          fmt("Bind rank %d to the CPUs of NUMA node %d (nvidia-smi topo -m, 'CPU Affinity'; mpirun --bind-to "
            .. "numa, or numactl --cpunodebind=%d), or give it the GPU of its own node.", e.rank, x.gpu.numa_node,
            x.gpu.numa_node))
      end
    end
    if x and #(t.host_order or {}) > 1 and x.gpu.numa_node and not seen[e.host .. "/" .. x.pos] then
      seen[e.host .. "/" .. x.pos] = true
      local nics, any_near = {}, false
      for _, nic in ipairs(t.hosts[e.host].nics or {}) do
        local node = type(nic.pci) == "table" and nic.pci.numa_node
        if nic.kind == "rdma" and node and node >= 0 then
          nics[#nics + 1] = fmt("%s (node %d)", nic.name, node)
          if node == x.gpu.numa_node then any_near = true end
        end
      end
      if #nics > 0 and not any_near then
        out[#out + 1] = finding("nic_numa", "warn", e.host, x.gpu,
          fmt("host %s: %s is on NUMA node %d, and no RDMA NIC is (%s): its traffic to other hosts crosses the "
            .. "inter-socket link", e.host, label(x.gpu), x.gpu.numa_node, table.concat(nics, ", ")),
          { gpu_numa_node = x.gpu.numa_node, nics = nics },
          "Put a NIC on the GPU's node (the server's rail layout), or check that NCCL_IB_HCA does not leave "
          .. "the near NIC out (NCCL picks the NIC nearest each GPU).")
      end
    end
  end
  return out
end

-- What the seed guide's PCIe and NVLink figures mean for this link (said once per finding).
local function pcie_seed_note(p)
  if p and p.gen == 4 and p.width == 16 then
    return "the seed guide's '>= 48 GB/s for PCIe Gen4 x16' is above the link's one-way 31.5 GB/s: it can "
      .. "only mean both directions at once (63 GB/s); one way, ~25-26 GB/s is what a healthy gen4 x16 copy reaches"
  end
end
local function nvlink_seed_note(version)
  if tonumber(version) == 3 then
    return "the seed guide's '>= 300 GB/s NVLink on A100/H100' is A100's whole one-way NVLink3 rate (12 x 25 GB/s); "
      .. "a copy reaches ~80 % of it"
  elseif tonumber(version) == 4 then
    return "the seed guide's '>= 300 GB/s NVLink on A100/H100' is under the ~370 GB/s an H100/H200 reaches over "
      .. "NVLink4 x18 (450 GB/s one way)"
  end
end

-- Calls f(name, c, i, d, x, map) for every measured GPU of every host in host order: c the host's
-- copies, d its i-th device, x that GPU's topology entry (nil when unknown), map the host's GPUs
-- by CUDA index.
local function each_measured_gpu(t, copies, f)
  for _, name in ipairs(t.host_order or {}) do
    local c = (copies or {})[name]
    if type(c) == "table" then
      local map = by_cuda_index(t.hosts[name])
      for i, d in ipairs(c.devices or {}) do f(name, c, i, d, map[d.index or (i - 1)], map) end
    end
  end
end

local function pinned(c, dir, i) return type(c[dir]) == "table" and at(c[dir].pinned, i) end

-- A GPU's pinned copies against its PCIe link
local function pcie_copy_findings(out, name, c, i, x)
  local nom, nom_text = M.pcie_nominal(x.gpu.pcie)
  if not nom then return end
  for _, dir in ipairs { { "host_to_device", "host->GPU" }, { "device_to_host", "GPU->host" } } do
    local v = pinned(c, dir[1], i)
    if type(v) == "number" and v < M.EXPECT.pcie_copy * nom then
      out[#out + 1] = finding("pcie_copy", "warn", name, x.gpu,
        fmt("host %s: %s pinned %s copy %.1f GB/s, below %.0f %% of its %s's %.1f GB/s one way", name,
          label(x.gpu), dir[2], v, 100 * M.EXPECT.pcie_copy, nom_text, nom),
        { direction = dir[1], memory = "pinned", gbps = v, nominal_gbps = nom, link = nom_text,
          expected_gbps = M.EXPECT.pcie_copy * nom, seed_note = pcie_seed_note(x.gpu.pcie) },
        "Check what shares the link (another GPU or NIC behind the same PCIe switch), the host buffer's "
        .. "NUMA node (nvidia-smi topo -m), IOMMU/ACS settings and the link's error counters (lspci -vv).")
    end
  end
end

-- GPU -> GPU over NVLink: the median of a GPU's copies to its NVLink peers, against the median of
-- those pairs' nominal rates (a pair without NVLink goes over PCIe)
local function nvlink_copy_findings(out, name, c, i, x, map, h)
  local row = at(c.peer, i)
  if type(row) ~= "table" then return end
  local vals, noms, text = {}, {}, nil
  for j, v in pairs(row) do
    local y = map[(tonumber(j) or 0) - 1]
    if y and y ~= x and type(v) == "number" then
      local nom, tx = pair_nominal(h, x, y)
      if nom and tx:match("^NVLink") then
        vals[#vals + 1], noms[#noms + 1], text = v, nom, tx
      end
    end
  end
  local st = require("cs.stats")
  local m, nom = st.median(vals), st.median(noms)
  if m and nom and m < M.EXPECT.nvlink_copy * nom then
    out[#out + 1] = finding("nvlink_copy", "warn", name, x.gpu,
      fmt("host %s: %s copies to its NVLink peers at %.1f GB/s (median), below %.0f %% of their %s's %.1f GB/s one way",
        name, label(x.gpu), m, 100 * M.EXPECT.nvlink_copy, text, nom),
      { gbps = m, nominal_gbps = nom, link = text, expected_gbps = M.EXPECT.nvlink_copy * nom,
        seed_note = nvlink_seed_note(x.gpu.nvlink_version) },
      "Check the NVLink error counters and link speeds (nvidia-smi nvlink -e / -s) and the NVSwitch fabric "
      .. "manager (systemctl status nvidia-fabricmanager).")
  end
end

-- Per host, its GPUs' PCIe copy findings, then their NVLink ones.
function M.check_copies(t, copies)
  local out, nvlink, host = {}, {}, nil
  local function flush()
    for _, f in ipairs(nvlink) do out[#out + 1] = f end
    nvlink = {}
  end
  each_measured_gpu(t, copies, function(name, c, i, _, x, map)
    if name ~= host then flush(); host = name end
    if x then
      pcie_copy_findings(out, name, c, i, x)
      nvlink_copy_findings(nvlink, name, c, i, x, map, t.hosts[name])
    end
  end)
  flush()
  return out
end

-- One line per measured GPU of each host: its pinned copies both ways against its PCIe link's
-- nominal one-way rate, what check_copies judges, so that a healthy link is shown, not only a slow one.
function M.copy_lines(t, copies)
  local out = {}
  each_measured_gpu(t, copies, function(name, c, i, d, x)
    local up, down = pinned(c, "host_to_device", i), pinned(c, "device_to_host", i)
    if type(up) ~= "number" or type(down) ~= "number" then return end
    local what = x and label(x.gpu) or ("GPU " .. tostring(d.pci_bus_id or d.index or i - 1))
    local nom, text = nil, nil
    if x then nom, text = M.pcie_nominal(x.gpu.pcie) end
    out[#out + 1] = nom and fmt("host %s: %s pinned host->GPU %.1f, GPU->host %.1f GB/s: %.0f %% and %.0f %% of its "
        .. "%s's %.1f GB/s one way (healthy from %.0f %%)", name, what, up, down, 100 * up / nom, 100 * down / nom,
        text, nom, 100 * M.EXPECT.pcie_copy)
      or fmt("host %s: %s pinned host->GPU %.1f, GPU->host %.1f GB/s (its PCIe link is not known: not judged)",
        name, what, up, down)
  end)
  return out
end

function M.check_utilisation(card)
  for _, p in ipairs((card or {}).parts or {}) do
    local u, good = p.name == "bandwidth" and p.measured.utilisation, p.reference and p.reference.good_utilisation
    if u and good and u < good then
      return { {
        kind = "utilisation", severity = u < 0.6 and "warn" or "info",
        subject = { op = p.measured.op },
        message = fmt("all-reduce busbw %.1f GB/s at %s B is %.0f %% of the GPU path's %.1f GB/s, under the %.0f %% "
          .. "utilisation target", p.measured.busbw_gbps, tostring(p.measured.bytes), 100 * u, p.reference.busbw_gbps,
          100 * good),
        evidence = { busbw_gbps = p.measured.busbw_gbps, reference_gbps = p.reference.busbw_gbps,
                     source = p.reference.source, utilisation = u, target = good,
                     note = "the seed guide's targets: utilisation >= 85 % ([scorecard] bandwidth_good); all-reduce "
                       .. ">= 80 / 120 GB/s are its 7B / 235B clusters' targets ([thresholds] busbw_min_gbps)" },
        remedy = "Check the sizes reach the bandwidth-bound range (--tier standard/long), NCCL_ALGO/NCCL_PROTO "
          .. "overrides, and the link findings above; under 60 % for long is an alert.",
      } }
    end
  end
  return {}
end

return M
