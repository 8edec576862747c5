-- report.html's topology section (cs.html): each host drawn as its GPUs, NICs and NUMA nodes with
-- the links between them (kind, generation, width; the measured copy rate beside the nominal one),
-- then an `nvidia-smi topo -m`-like matrix with numbers, findings marked on the GPU or NIC they
-- name. Many hosts: one table row per host (hosts with findings first), and one drawing per
-- distinct host layout plus one per host with findings, so 128 hosts read at a glance.
-- topology(report) -> html or nil. Pure; every string from the report is escaped.
local U = require "cs.html.util"
local G = require "cs.topo.gpu"
local esc, T, num, str, keys, section, ranges, kvtable, islist = U.esc, U.T, U.num, U.str, U.keys, U.section,
  U.ranges, U.kvtable, U.islist
local fmt, concat = string.format, table.concat
local M = {}

local DRAWN_MAX = 6   -- host drawings at most (layouts + hosts with findings)
local GAP = 8
local PAGE_W = 1060  -- what fits the page (cs.html: max-width 1080)

local at = G.at  -- list[i], also after a JSON round trip turned a sparse list into an object

local function f1(x) return num(x) and fmt("%.1f", x) or "?" end

-- findings by host, and by host + bus id (GPU or NIC)
local function index_findings(r)
  local by_host, by_dev = {}, {}
  for _, f in ipairs(T(r.findings)) do
    local s = T(T(f).subject)
    local h = str(s.host)
    if h then
      by_host[h] = by_host[h] or {}
      table.insert(by_host[h], f)
      local key = str(s.bdf) or str(T(f.evidence).bdf)
      if key then
        by_dev[h .. "|" .. key] = by_dev[h .. "|" .. key] or {}
        table.insert(by_dev[h .. "|" .. key], f)
      end
    end
  end
  return by_host, by_dev
end

local function copies_of(r)
  local out = {}
  for _, c in ipairs(T(T(r.gpu_links).copies)) do
    if str(T(c).host) then out[c.host] = c end
  end
  return out
end

local function pcie_label(p)
  p = T(p)
  if not num(p.gen) then return nil end
  local s = fmt("gen%d x%s", p.gen, tostring(p.width or "?"))
  if p.below_max_width or p.below_max_speed then
    s = s .. fmt(" (max gen%s x%s)", tostring(p.max_gen or "?"), tostring(p.max_width or "?"))
  end
  return s
end

-- The per-GPU facts a drawing and a row need.
local function gpu_facts(h, copy)
  local out = {}
  for pos, g in ipairs(T(h.gpus)) do
    g = T(g)
    local i = num(g.cuda_index) or (pos - 1)
    local nom = G.pcie_nominal(g.pcie)
    local d = { pos = pos - 1, index = i, bdf = str(g.bdf) or "?", name = str(g.name), numa = num(g.numa_node),
                pcie = pcie_label(g.pcie), pcie_nom = nom, degraded = T(g.pcie).below_max_width or T(g.pcie).below_max_speed,
                nv_active = num(g.nvlinks_active), nv_present = num(g.nvlinks_present), nv_ver = num(g.nvlink_version),
                nvswitch = (num(g.nvswitch_links) or 0) > 0, nv_down = T(g.nvlinks_down) }
    if copy then
      d.h2d = num(at(T(copy.host_to_device).pinned, i + 1))
      d.d2h = num(at(T(copy.device_to_host).pinned, i + 1))
    end
    out[#out + 1] = d
  end
  return out
end

local function marks(by_dev, host, bdf)
  local l = by_dev[host .. "|" .. tostring(bdf)]
  if not l then return nil end
  local m = {}
  for _, f in ipairs(l) do m[#m + 1] = tostring(T(f).severity) .. ": " .. tostring(T(f).message) end
  return concat(m, "\n")
end

local function rdma_nics(h)
  local out = {}
  for _, nic in ipairs(T(h.nics)) do
    nic = T(nic)
    local pci = T(nic.pci)
    if nic.kind == "rdma" or (nic.kind == "net" and pci.bdf and nic.operstate == "up") then
      local rate, down = 0, false
      for _, p in ipairs(T(nic.ports)) do
        p = T(p)
        if p.state == "ACTIVE" and num(p.rate_gbps) then rate = rate + p.rate_gbps end
        if p.state ~= nil and p.state ~= "ACTIVE" then down = true end
      end
      if nic.kind == "net" and num(nic.speed_mbps) then rate = nic.speed_mbps / 1000 end
      out[#out + 1] = { name = str(nic.name) or "?", bdf = str(pci.bdf), numa = num(pci.numa_node),
                        pcie = pcie_label(pci.pcie), rate = rate,
                        down = down }
    end
  end
  return out
end

-- One host as an SVG: NUMA nodes on top, their GPUs and NICs below (PCIe edges labelled), the
-- GPUs' NVLinks below them (to an NVSwitch bar, or between pairs).
local function short_bdf(b) return (tostring(b or ""):gsub("^0000:", "")) end

local Y_NODE, Y_DEV, Y_SW = 8, 104, 206  -- rows of draw_host: NUMA nodes, devices, NVSwitch

-- One GPU or NIC box (d.gpu or d.nic) at dx, with its PCIe edge up to its NUMA node; a GPU's
-- centre goes into gx by its position, for the NVLink edges.
local function draw_device(s, d, dx, GPU_W, name, by_dev, gx)
  local y_node, y_dev = Y_NODE, Y_DEV
  local cx = dx + GPU_W / 2
  local item = d.gpu or d.nic
  local warn = marks(by_dev, name, item.bdf)
  local bad = warn or (d.gpu and d.gpu.degraded) or (d.nic and d.nic.down)
  -- the PCIe edge up to the node
  local label = item.pcie or "PCIe ?"
  local now, max = label:match("^(.-) (%(max .*%))$")
  local deg = d.gpu and d.gpu.degraded
  s[#s + 1] = fmt('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"/>', dx + 8, y_node + 34, dx + 8,
    y_dev, deg and "#d73027" or "#888", deg and "3" or "1.5")
  s[#s + 1] = fmt('<text x="%d" y="%d" class="ts%s">%s</text>', dx + 14, y_node + 48, deg and " hot" or "",
    esc(now or label))
  if max then s[#s + 1] = fmt('<text x="%d" y="%d" class="ts hot">%s</text>', dx + 14, y_node + 59, esc(max)) end
  if d.gpu and (d.gpu.h2d or d.gpu.pcie_nom) then
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">%s / %s</text>', dx + 14, y_node + 70,
      d.gpu.h2d and f1(d.gpu.h2d) or "-", f1(d.gpu.pcie_nom))
  end
  s[#s + 1] = fmt('<g><title>%s</title><rect x="%d" y="%d" width="%d" height="58" rx="5" fill="%s" stroke="%s" stroke-width="%s"/>',
    esc(warn or (d.gpu and (d.gpu.name or "GPU") or ("NIC " .. item.name))), dx, y_dev, GPU_W,
    d.gpu and "#f4f9ee" or "#fdf6e8", bad and "#d73027" or "#777", bad and "2.5" or "1")
  if d.gpu then
    local g = d.gpu
    gx[g.pos] = cx
    s[#s + 1] = fmt('<text x="%d" y="%d" class="tn">GPU%d%s</text>', dx + 6, y_dev + 15, g.index, warn and " ⚠" or "")
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">%s</text>', dx + 6, y_dev + 29, esc(short_bdf(g.bdf)))
    if g.nv_active or g.nv_present then
      s[#s + 1] = fmt('<text x="%d" y="%d" class="ts%s">NV%s %s/%s up</text>', dx + 6, y_dev + 43,
        #g.nv_down > 0 and " hot" or "", g.nv_ver and tostring(g.nv_ver) or "", tostring(g.nv_active or 0),
        tostring(g.nv_present or g.nv_active or 0))
    end
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">&#8645; %s/%s</text>', dx + 6, y_dev + 54, g.h2d and f1(g.h2d) or "-",
      g.d2h and f1(g.d2h) or "-")
  else
    local n = d.nic
    s[#s + 1] = fmt('<text x="%d" y="%d" class="tn">%s%s</text>', dx + 6, y_dev + 15, esc(n.name), warn and " ⚠" or "")
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">%s</text>', dx + 6, y_dev + 29, esc(short_bdf(n.bdf)))
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts%s">%s</text>', dx + 6, y_dev + 43, n.down and " hot" or "",
      esc(n.rate > 0 and fmt("%g Gb/s", n.rate) or (n.down and "port down" or "rate ?")))
  end
end

-- The GPUs' NVLinks below them: to an NVSwitch bar (measured copy / nominal GB/s per GPU), or
-- between pairs; then the legend.
local function draw_nvlinks(s, h, gpus, gx, copy, H)
  local y_dev, y_sw = Y_DEV, Y_SW
  local switched = false
  for _, g in ipairs(gpus) do if g.nvswitch then switched = true end end
  local copy_peer = copy and copy.peer
  if switched then
    local lo, hi = math.huge, 0
    for _, cx in pairs(gx) do lo, hi = math.min(lo, cx), math.max(hi, cx) end
    s[#s + 1] = fmt('<rect x="%d" y="%d" width="%d" height="22" rx="4" fill="#e8f4ea" stroke="#1a9850"/>', lo - 40, y_sw,
      hi - lo + 80)
    s[#s + 1] = fmt('<text x="%d" y="%d" class="tn">NVSwitch</text>', lo - 34, y_sw + 15)
    for _, g in ipairs(gpus) do
      if gx[g.pos] and g.nvswitch then
        local nom = G.gpu_nvlink_nominal({ nvlinks_active = g.nv_active, nvlink_version = g.nv_ver, nvswitch_links = 1 })
        local vals = {}
        for _, v in pairs(T(at(copy_peer, g.index + 1))) do if num(v) then vals[#vals + 1] = v end end
        local med = require("cs.stats").median(vals)
        local down = #g.nv_down > 0
        s[#s + 1] = fmt('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"/>', gx[g.pos], y_dev + 58,
          gx[g.pos], y_sw, down and "#d73027" or "#1a9850", down and "3" or "2.5")
        s[#s + 1] = fmt('<text x="%d" y="%d" class="ts%s">NV%d</text><text x="%d" y="%d" class="ts%s">%s/%s</text>',
          gx[g.pos] + 4, y_dev + 72, down and " hot" or "", g.nv_active or 0, gx[g.pos] + 4, y_dev + 84,
          down and " hot" or "", med and fmt("%.0f", med) or "-", num(nom) and fmt("%.0f", nom) or "?")
      end
    end
  else
    for _, l in ipairs(T(h.gpu_links)) do
      l = T(l)
      if l.kind == "NVLink" and gx[l.a] and gx[l.b] then
        local a, b = gx[l.a], gx[l.b]
        s[#s + 1] = fmt('<path d="M%d %d Q %d %d %d %d" fill="none" stroke="#1a9850" stroke-width="2.5"/>', a, y_dev + 58,
          (a + b) / 2, y_sw + 20, b, y_dev + 58)
        s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">NV%s</text>', (a + b) / 2 - 10, y_sw - 4, tostring(l.links or "?"))
      end
    end
  end
  s[#s + 1] = fmt('<text x="10" y="%d" class="ts">NVLink edges: links up, measured GPU-&gt;GPU copy / nominal GB/s one way; '
    .. 'PCIe edges: link, pinned host-&gt;GPU copy / nominal GB/s; &#8645; pinned host-&gt;GPU / GPU-&gt;host GB/s; '
    .. 'NV4: NVLink generation</text>', H - 6)
end

local function draw_host(name, h, copy, by_dev)
  local gpus, nics = gpu_facts(h, copy), rdma_nics(h)
  -- boxes as wide as fit the page (12 devices of an HGX host: 80 px), 104 at most
  local GPU_W = math.max(80, math.min(104, math.floor((PAGE_W - 40) / math.max(#gpus + #nics, 1)) - GAP))
  local nodes, order = {}, {}
  local function node(n)
    local k = n or -1
    if not nodes[k] then nodes[k] = { id = k, devs = {} }; order[#order + 1] = k end
    return nodes[k]
  end
  for _, n in ipairs(T(h.numa)) do node(num(T(n).node)).cpus = str(T(n).cpus) end
  -- a device whose NUMA node reads -1 (sysfs: no affinity, as in VMs) sits on the host's only
  -- node when it has one; beside several it gets a box of its own
  local only = #T(h.numa) == 1 and num(T(T(h.numa)[1]).node) or nil
  local function home(k) return ((k == nil or k < 0) and only) or k end
  for _, g in ipairs(gpus) do table.insert(node(home(g.numa)).devs, { gpu = g }) end
  for _, n in ipairs(nics) do table.insert(node(home(n.numa)).devs, { nic = n }) end
  table.sort(order)
  local ndev = #gpus + #nics
  if ndev == 0 then return nil end
  local W = 20
  for _, k in ipairs(order) do W = W + math.max(#nodes[k].devs, 1) * (GPU_W + GAP) - GAP + 2 * GAP end
  W = math.max(W, 300)
  local y_node = Y_NODE
  local any_nv = false
  for _, g in ipairs(gpus) do if (g.nv_active or 0) > 0 or (g.nv_present or 0) > 0 then any_nv = true end end
  local H = any_nv and 250 or 170
  local s = { fmt('<svg class="hostdraw" width="%d" height="%d" role="img" aria-label="host %s">', W, H, esc(name)) }
  local x, gx = 10, {}
  for _, k in ipairs(order) do
    local nd = nodes[k]
    local w = math.max(#nd.devs, 1) * (GPU_W + GAP) - GAP
    s[#s + 1] = fmt('<rect x="%d" y="%d" width="%d" height="34" rx="4" fill="#eef3fb" stroke="#4e79a7"/>', x, y_node, w)
    s[#s + 1] = fmt('<text x="%d" y="%d" class="tn">%s</text>', x + 6, y_node + 15,
      esc(k >= 0 and fmt("NUMA node %d", k) or "no NUMA affinity"))
    s[#s + 1] = fmt('<text x="%d" y="%d" class="ts">CPUs %s</text>', x + 6, y_node + 28, esc(nd.cpus or (k >= 0 and "?" or "any")))
    for j, d in ipairs(nd.devs) do
      local dx = x + (j - 1) * (GPU_W + GAP)
      draw_device(s, d, dx, GPU_W, name, by_dev, gx)
    end
    x = x + w + 2 * GAP
  end
  if any_nv then draw_nvlinks(s, h, gpus, gx, copy, H) end
  s[#s + 1] = "</svg>"
  return concat(s)
end

-- `nvidia-smi topo -m` with numbers: per pair of GPUs the path (NV18, PIX, SYS, ...) and the
-- measured copy GB/s; per GPU its NUMA node, PCIe link and pinned copies.
local function matrix_table(name, h, copy, by_dev)
  local gpus = gpu_facts(h, copy)
  if #gpus == 0 then return "" end
  local path = {}
  for _, l in ipairs(T(h.gpu_links)) do
    l = T(l)
    if num(l.a) and num(l.b) then
      local k = l.kind == "NVLink" and ("NV" .. tostring(l.links or "")) or tostring(l.kind or "?")
      path[l.a .. "," .. l.b], path[l.b .. "," .. l.a] = k, k
    end
  end
  local rows = { '<div class="scroll"><table class="grid topo"><tr><th></th>' }
  for _, g in ipairs(gpus) do rows[#rows + 1] = fmt("<th>GPU%d</th>", g.index) end
  rows[#rows + 1] = "<th>NUMA</th><th>PCIe</th><th>h2d / d2h / nominal GB/s</th></tr>"
  for _, a in ipairs(gpus) do
    local warn = marks(by_dev, name, a.bdf)
    rows[#rows + 1] = fmt('<tr><th%s title="%s">GPU%d%s</th>', warn and ' class="hot"' or "", esc(warn or a.bdf), a.index,
      warn and " ⚠" or "")
    for _, b in ipairs(gpus) do
      if a == b then
        rows[#rows + 1] = "<td>X</td>"
      else
        local v = copy and num(at(at(copy.peer, a.index + 1), b.index + 1))
        rows[#rows + 1] = fmt("<td>%s%s</td>", esc(path[a.pos .. "," .. b.pos] or "?"), v and fmt(" <small>%.0f</small>", v) or "")
      end
    end
    rows[#rows + 1] = fmt('<td>%s</td><td%s>%s</td><td>%s / %s / %s</td></tr>', a.numa and tostring(a.numa) or "?",
      a.degraded and ' class="hot"' or "", esc(a.pcie or "?"), a.h2d and f1(a.h2d) or "-", a.d2h and f1(a.d2h) or "-",
      f1(a.pcie_nom))
  end
  rows[#rows + 1] = "</table></div>"
  return concat(rows)
end

-- What makes two hosts look the same at a glance.
local function layout_key(h)
  local parts = { fmt("%d GPU", #T(h.gpus)) }
  for _, g in ipairs(T(h.gpus)) do
    g = T(g)
    parts[#parts + 1] = fmt("%s/%s/%s/%s", tostring(g.numa_node), pcie_label(g.pcie) or "", tostring(g.nvlinks_active),
      tostring(g.nvlink_version))
  end
  for _, n in ipairs(rdma_nics(h)) do parts[#parts + 1] = fmt("%s/%s/%g", n.name, tostring(n.numa), n.rate) end
  return concat(parts, ";")
end

-- A host's row: its cells after the first two (host, ranks), and whether it has findings.
local function host_cells(name, h, copy, by_host)
  local gpus, nics = gpu_facts(h, copy), rdma_nics(h)
  local nv, nvp, pcie, rates = 0, 0, {}, {}
  local lo
  for _, g in ipairs(gpus) do
    nv, nvp = nv + (g.nv_active or 0), nvp + (g.nv_present or g.nv_active or 0)
    if g.pcie then pcie[g.pcie] = (pcie[g.pcie] or 0) + 1 end
    if g.h2d and (not lo or g.h2d < lo) then lo = g.h2d end
  end
  local pl = {}
  for k, c in pairs(pcie) do pl[#pl + 1] = fmt("%d&times; %s", c, esc(k)) end
  table.sort(pl)
  local by_rate, rate_order = {}, {}
  for _, n in ipairs(nics) do
    local k = n.rate > 0 and fmt("%g", n.rate) or "down"
    if not by_rate[k] then by_rate[k] = 0; rate_order[#rate_order + 1] = k end
    by_rate[k] = by_rate[k] + 1
  end
  for _, k in ipairs(rate_order) do rates[#rates + 1] = fmt("%d&times; %s", by_rate[k], k) end
  local nf = #(by_host[name] or {})
  return fmt('<td>%d</td><td%s>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>', #gpus,
    nvp > nv and ' class="hot"' or "", nvp > 0 and fmt("%d/%d", nv, nvp) or "-", concat(pl, ", "),
    lo and f1(lo) or "-", concat(rates, ", "), nf > 0 and fmt('<span class="hot">%d</span>', nf) or "0"), nf

end

-- "0-7", or "252 ranks" (the list on hover) when the ranges would not fit a cell
local function rank_cell(list)
  local r = ranges(list)
  if #r <= 24 then return esc(r) end
  return fmt('<span title="%s">%d ranks</span>', esc(r), #list)
end

-- The host table: hosts with findings first, one row each; the others grouped where their
-- rows are the same (one row for 126 identical healthy hosts).
local function host_table(names, hosts, copies, by_host)
  local rows = { '<div class="scroll"><table class="grid"><tr><th>host</th><th>ranks</th><th>GPUs</th><th>NVLinks up</th>'
    .. "<th>GPU PCIe</th><th>lowest h2d GB/s</th><th>NICs &times; Gb/s</th><th>findings</th></tr>" }
  local groups, order = {}, {}
  for _, n in ipairs(names) do
    local h = T(hosts[n])
    local cells, nf = host_cells(n, h, copies[n], by_host)
    if nf > 0 then
      rows[#rows + 1] = fmt('<tr class="hotrow"><td>%s</td><td>%s</td>%s</tr>', esc(n), rank_cell(T(h.ranks)), cells)
    else
      if not groups[cells] then groups[cells] = { hosts = {}, ranks = {} }; order[#order + 1] = cells end
      local g = groups[cells]
      g.hosts[#g.hosts + 1] = n
      for _, r in ipairs(T(h.ranks)) do g.ranks[#g.ranks + 1] = r end
    end
  end
  for _, cells in ipairs(order) do
    local g = groups[cells]
    table.sort(g.ranks)
    local label = #g.hosts == 1 and esc(g.hosts[1])
      or fmt("%s &hellip; %s <small>(%d hosts)</small>", esc(g.hosts[1]), esc(g.hosts[#g.hosts]), #g.hosts)
    rows[#rows + 1] = fmt('<tr><td title="%s">%s</td><td>%s</td>%s</tr>', esc(concat(g.hosts, " ")), label,
      rank_cell(g.ranks), cells)
  end
  rows[#rows + 1] = "</table></div>"
  return concat(rows)
end

function M.topology(r)
  local topo = T(r.topology)
  if next(topo) == nil then return nil end
  local hosts = T(topo.hosts)
  local names = type(topo.host_order) == "table" and islist(topo.host_order) and topo.host_order or keys(hosts)
  -- An older shape (host -> list of ranks): the plain table.
  local modelled = true
  for _, n in ipairs(names) do if type(hosts[n]) ~= "table" or islist(hosts[n]) then modelled = false end end
  if not modelled then
    local rows = { '<table class="grid"><tr><th>host</th><th>ranks</th><th>count</th></tr>' }
    for _, h in ipairs(names) do
      local rs = T(hosts[h])
      rows[#rows + 1] = fmt("<tr><td>%s</td><td>%s</td><td>%d</td></tr>", esc(h), esc(ranges(rs)), #rs)
    end
    rows[#rows + 1] = "</table>"
    local rest = {}
    for k, v in pairs(topo) do if k ~= "hosts" then rest[k] = v end end
    return section("topology", "Topology", concat(rows) .. kvtable(rest))
  end
  local by_host, by_dev = index_findings(r)
  local copies = copies_of(r)
  local out = {}
  local sm = T(topo.summary)
  out[#out + 1] = fmt('<p class="note">%s on %s; hosts with findings are marked in red (⚠ on the GPU or NIC a finding '
    .. 'names; hover for the finding).</p>', esc(U.fnum(num(sm.ranks) or #T(topo.ranks)) .. " rank" .. ((num(sm.ranks) or #T(topo.ranks)) == 1 and "" or "s")),
    esc(#names .. " host" .. (#names == 1 and "" or "s")))
  -- the host table: findings first
  local sorted = {}
  for i, n in ipairs(names) do sorted[i] = n end
  table.sort(sorted, function(a, b)
    local fa, fb = #(by_host[a] or {}), #(by_host[b] or {})
    if fa ~= fb then return fa > fb end
    return a < b
  end)
  if #names > 1 then out[#out + 1] = host_table(sorted, hosts, copies, by_host) end
  -- drawings: every host with findings, then one per layout not drawn yet
  local drawn, layouts, plan, shown = 0, {}, {}, {}
  local same = {}
  for _, n in ipairs(names) do
    local k = layout_key(T(hosts[n]))
    same[k] = (same[k] or 0) + 1
  end
  for _, n in ipairs(sorted) do
    local k = layout_key(T(hosts[n]))
    if #(by_host[n] or {}) > 0 or not layouts[k] then
      if not layouts[k] or #(by_host[n] or {}) > 0 then plan[#plan + 1] = { n, k } end
      layouts[k] = true
    end
  end
  for _, p in ipairs(plan) do
    if drawn >= DRAWN_MAX then
      out[#out + 1] = fmt('<p class="note">%d more host drawing%s left out: see the table above.</p>', #plan - drawn,
        #plan - drawn == 1 and "" or "s")
      break
    end
    local n, k = p[1], p[2]
    local h = T(hosts[n])
    local svg = draw_host(n, h, copies[n], by_dev)
    local others = (same[k] or 1) - 1
    local first_of_layout = not shown[k]
    shown[k] = true
    out[#out + 1] = fmt("<h3>host %s%s</h3>", esc(n), others > 0 and first_of_layout
      and fmt(' <span class="note">(and %d more host%s laid out the same)</span>', others, others == 1 and "" or "s") or "")
    if svg then
      out[#out + 1] = '<div class="scroll">' .. svg .. "</div>" .. matrix_table(n, h, copies[n], by_dev)
    else
      out[#out + 1] = '<p class="note">no GPU or NIC found on this host</p>'
    end
    for _, f in ipairs(by_host[n] or {}) do
      out[#out + 1] = fmt('<div class="finding sev-%s"><span class="sev">%s</span> %s</div>', esc(tostring(T(f).severity)),
        esc(tostring(T(f).severity)), esc(tostring(T(f).message)))
    end
    drawn = drawn + 1
  end
  local rest = {}
  for _, k in ipairs({ "summary", "host_order" }) do rest[k] = topo[k] end
  out[#out + 1] = "<details><summary>Topology facts (summary, versions)</summary>" .. kvtable(rest) .. "</details>"
  return section("topology", "Topology", concat(out, "\n"))
end

M.CSS = [[
svg.hostdraw .tn{font-size:12px;font-weight:600;fill:#222}svg.hostdraw .ts{font-size:10px;fill:#444}svg.hostdraw .hot{fill:#d73027;font-weight:600}
table.topo td,table.topo th{text-align:center}table.topo small{color:#1a6e3a}tr.hotrow td{background:#fdf0ef}
]]

return M
