-- LuaUnit tests of report.html's topology section (cs.html.topo): an 8-GPU NVSwitch host drawn
-- with its NUMA node, PCIe and NVLink edges, measured copies beside the nominal rates and the
-- findings marked on the GPU they name; a 128-host job as one table row per host (hosts with
-- findings first) and a few drawings (one per layout, one per host with findings). Writes both
-- pages to the run's output directory (topo_8gpu.html, topo_128hosts.html) for a browser.
-- Run: commscript --backend self --trusted tests/lua/test_html_topo.lua
local cs = require "commscript"
local lu = require "luaunit"
local html = require "cs.html"
local CTX

local recipe = cs.recipe {
  name = "test_html_topo",
  version = "0.1.0",
  summary = "LuaUnit tests of report.html's host drawings",
}

local BUS = { "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
              "0000:ba:00.0", "0000:db:00.0" }

-- One HGX host as cs.topo models it: 8 GPUs (NVLink4 x18 to NVSwitches, PCIe gen5 x16), GPUs
-- 0-3 on NUMA node 0 and 4-7 on node 1, four 400 Gb/s HCAs; `down` takes NVLinks off a GPU.
local function hgx(name, ranks, down)
  local gpus, links = {}, {}
  for i = 0, 7 do
    local active = 18 - ((down or {})[i] or 0)
    gpus[i + 1] = { bdf = BUS[i + 1], cuda_index = i, name = "NVIDIA H100 80GB HBM3", numa_node = i < 4 and 0 or 1,
                    pcie = { gen = 5, width = 16, max_gen = 5, max_width = 16, gbytes_per_s = 63.0 },
                    nvlinks_active = active, nvlinks_present = 18, nvlink_version = 4, nvswitch_links = active,
                    nvlinks_down = active < 18 and { 5 } or nil }
  end
  for a = 0, 7 do
    for b = a + 1, 7 do links[#links + 1] = { a = a, b = b, kind = "NVLink", links = 18 } end
  end
  local nics = {}
  for k = 0, 3 do
    nics[#nics + 1] = { name = "mlx5_" .. k, kind = "rdma", pci = { bdf = ("0000:%02x:00.0"):format(0x20 + k),
                        numa_node = k < 2 and 0 or 1, pcie = { gen = 5, width = 16 } },
                        ports = { { port = 1, state = "ACTIVE", rate_gbps = 400 } } }
  end
  return { name = name, ranks = ranks, gpus = gpus, gpu_links = links, nics = nics,
           numa = { { node = 0, cpus = "0-55" }, { node = 1, cpus = "56-111" } } }
end

local function copies(host)
  local peer = {}
  for a = 1, 8 do
    peer[a] = {}
    for b = 1, 8 do if a ~= b then peer[a][b] = 390.5 end end
  end
  local pinned = { 55.1, 55.1, 55.1, 55.1, 55.1, 55.1, 55.1, 55.1 }
  return { host = host, peer = peer, host_to_device = { pinned = pinned }, device_to_host = { pinned = pinned } }
end

local function page(hosts, findings, cps)
  local order, h = {}, {}
  for i, x in ipairs(hosts) do order[i] = x.name; h[x.name] = x end
  return html.render { recipe = { name = "full_diag" }, run = { ranks = 8 * #hosts, hosts = #hosts },
    topology = { hosts = h, host_order = order, summary = { ranks = 8 * #hosts, hosts = #hosts } },
    findings = findings, gpu_links = { copies = cps } }
end

local function save(name, text)
  local f = assert(io.open(CTX.out_dir .. "/" .. name, "wb"))
  f:write(text)
  f:close()
end

local function topo_section(text)
  local a = text:find('id="topology"', 1, true)
  lu.assertNotNil(a, "no topology section")
  return text:sub(a, (text:find("</section>", a, true) or #text))
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

TestDraw = {}

function TestDraw:test_an_hgx_host_is_drawn_with_numbers_and_its_finding()
  local f = { severity = "warn", subject = { host = "node-a", gpu = 3, bdf = BUS[4] },
              message = "host node-a: GPU 3 (0000:5d:00.0) has NVLink 5 down: 17 of 18 links active" }
  local text = page({ hgx("node-a", { 0, 1, 2, 3, 4, 5, 6, 7 }, { [3] = 1 }) }, { f }, { copies("node-a") })
  save("topo_8gpu.html", text)
  local s = topo_section(text)
  lu.assertNotStrContains(s, "could not be drawn")
  for i = 0, 7 do lu.assertStrContains(s, ">GPU" .. i) end
  lu.assertStrContains(s, "NUMA node 0")
  lu.assertStrContains(s, "NUMA node 1")
  lu.assertStrContains(s, "NVSwitch")
  lu.assertStrContains(s, ">NV18</text>")       -- links up, then measured beside nominal, one way
  lu.assertStrContains(s, ">391/450</text>")
  lu.assertStrContains(s, 'class="ts hot">NV17</text>')  -- the GPU with a link down
  lu.assertStrContains(s, ">391/425</text>")
  lu.assertStrContains(s, "55.1 / 63.0<")        -- pinned host->GPU beside PCIe gen5 x16's nominal
  lu.assertStrContains(s, "GPU3 ⚠")             -- the finding marked on its GPU
  lu.assertEquals(count(s, "GPU%d ⚠"), 2)       -- in the drawing and the matrix, no other GPU
  lu.assertStrContains(s, "mlx5_3")
  lu.assertStrContains(s, "400 Gb/s")
  lu.assertNotStrContains(s, "[[{")             -- no raw dump
end

function TestDraw:test_a_vm_gpu_without_numa_affinity_sits_on_the_only_node()
  -- the H200 VM of 2026-11-27: one NUMA node (CPUs 0-15); sysfs gives the GPU and the NIC -1.
  -- It was drawn as a "NUMA ?" box beside an empty node 0 cut off at the picture's edge.
  local h = { name = "vm", ranks = { 0 }, numa = { { node = 0, cpus = "0-15" } },
              gpus = { { bdf = "0000:00:06.0", cuda_index = 0, name = "NVIDIA H200", numa_node = -1,
                         pcie = { gen = 5, width = 16, max_gen = 5, max_width = 16 }, nvlinks_active = 0,
                         nvlinks_present = 0 } },
              nics = { { name = "eth0", kind = "ethernet", pci = { bdf = "0000:00:03.0", numa_node = -1 } } } }
  local c = { host = "vm", devices = { { index = 0 } }, host_to_device = { pinned = { 54.3 } },
              device_to_host = { pinned = { 55.0 } } }
  local text = page({ h }, {}, { c })
  save("topo_h200_vm.html", text)
  local s = topo_section(text)
  lu.assertNotStrContains(s, "NUMA ?")
  lu.assertEquals(count(s, ">NUMA node 0<"), 1)
  lu.assertStrContains(s, "CPUs 0-15")
  lu.assertStrContains(s, "54.3 / 63.0")
  -- the picture is as wide as its boxes: one node, two devices
  local w = tonumber(s:match('<svg class="hostdraw" width="(%d+)"'))
  local right = 0
  for x, rw in s:gmatch('<rect x="(%d+)" y="%d+" width="(%d+)"') do right = math.max(right, tonumber(x) + tonumber(rw)) end
  lu.assertTrue(right <= w, ("a box ends at %d, past the picture's %d"):format(right, w))
  -- beside two nodes, a device without affinity gets its own box, named so
  h.numa[2] = { node = 1, cpus = "16-31" }
  s = topo_section(page({ h }, {}, { c }))
  lu.assertStrContains(s, "no NUMA affinity")
end

function TestDraw:test_128_hosts_read_at_a_glance()
  local hosts, cps = {}, {}
  for i = 1, 128 do
    local name = ("node-%03d"):format(i)
    hosts[i] = hgx(name, { 8 * (i - 1), 8 * (i - 1) + 1 }, i == 77 and { [6] = 1 } or nil)
    cps[i] = copies(name)
  end
  local findings = {
    { severity = "warn", subject = { host = "node-077", bdf = BUS[7] }, message = "host node-077: GPU 6 NVLink 5 down" },
    { severity = "warn", subject = { host = "node-100", bdf = BUS[1] }, message = "host node-100: GPU 0 PCIe gen3 x8" },
  }
  local text = page(hosts, findings, cps)
  save("topo_128hosts.html", text)
  local s = topo_section(text)
  lu.assertStrContains(s, "1024 ranks on 128 hosts")
  -- hosts with findings first, one row each; the 126 identical healthy hosts in one row
  lu.assertEquals(count(s, '<tr class="hotrow"><td>node%-'), 2)
  local first = s:find('<tr class="hotrow"><td>', 1, true)
  lu.assertEquals(s:sub(first + 23, first + 30), "node-077")
  lu.assertStrContains(s, "node-001 &hellip; node-128 <small>(126 hosts)</small>")
  lu.assertEquals(count(s, "<tr><td title="), 1)
  -- the two with findings (one of each layout: node-077 has a link down), nothing else
  lu.assertEquals(count(s, '<svg class="hostdraw"'), 2)
  lu.assertStrContains(s, "(and 126 more hosts laid out the same)")
  lu.assertTrue(#s < 400000, "section of " .. #s .. " bytes")
end

function recipe.run(ctx)
  CTX = ctx
  local rc = lu.LuaUnit.run("--verbose")
  if rc ~= 0 then error("test_html_topo: " .. rc .. " test(s) failed") end
end

return recipe
