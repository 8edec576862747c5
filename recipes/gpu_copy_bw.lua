-- Copy bandwidths of the GPUs of each host, the way NVIDIA nvbandwidth measures them with the
-- copy engines (its *_memcpy_ce test cases): host -> GPU and GPU -> host from pageable and
-- from pinned host memory, a copy inside each GPU's memory, and GPU -> GPU for every pair of GPUs
-- of a host that have peer access, as a matrix; then concurrent copies: both directions of each
-- GPU at once, and every GPU at once in each direction. Host buffers are NUMA-local to each GPU
-- (allocated and copied from the GPU's local CPUs, as nvbandwidth does). Each value is the median
-- of a few samples, each sample a run of copies between two CUDA events; GB/s = 1e9 bytes/s.
--
-- The lowest rank of each host measures its host's GPUs (one pair at a time, nothing else
-- running); the other ranks wait. Rank 0 prints every host. Without a usable GPU on some host,
-- the run stops with exit 1 and says which host.
local cs = require "commscript"
local gpu = require "cs.gpu"

local recipe = cs.recipe {
  name = "gpu_copy_bw",
  version = "1.1.4",
  requires = ">=0.1, <1.0",
  summary = "host<->GPU and GPU<->GPU copy bandwidth of every host (nvbandwidth-style, GB/s)",
  options = {
    bytes = { default = "64M", help = "bytes per copy", type = "size" },
    loops = { 16, "copies per sample (between the two CUDA events)", min = 1 },
    samples = { 3, "samples per value (the median is reported)", min = 1 },
    peer = { true, "also measure GPU -> GPU copies between the GPUs of a host" },
  },
}

local null = cs.json.null

-- What each number is (printed, and report.json gpu_copy_bw.method). nvbandwidth (its
-- *_memcpy_ce cases) allocates every host buffer with cuMemHostAlloc: it has no pageable case.
local METHOD = {
  "pinned: cudaMallocHost memory, nvbandwidth's copy-engine method (cudaMemcpyAsync between two CUDA events, "
    .. "without its spin kernel); compare with nvbandwidth's host_to_device_memcpy_ce / device_to_host_memcpy_ce",
  "pageable: malloc'd memory timed the same way; the driver stages each copy through its own pinned buffer, so "
    .. "the CPU's staging copy is in the time; nvbandwidth has no pageable case; PyTorch's tensor.copy_ from "
    .. "pageable memory takes the same driver path (on an H200 both gave 6-14 GB/s), but such rates move by a "
    .. "quarter from run to run: compare pinned numbers across tools",
}

-- A value below this fraction of its host's median for the same kind of copy is a finding.
local SLOW = 0.5

local function num(v) return type(v) == "number" and v or nil end

-- The stdlib's one median (an even count: the mean of the two middle values; 1.1.0 took the
-- lower one, so a host of 8 GPUs compared with its 4th-lowest value instead of the middle).
local median = cs.stats.median

local function cell(v) return num(v) and ("%10.2f"):format(v) or ("%10s"):format("N/A") end

-- Rows labelled by `labels`, columns by GPU index.
local function matrix(ctx, title, labels, rows, n)
  ctx.log("%s", title)
  local head = { ("%10s"):format("") }
  for j = 1, n do head[#head + 1] = ("%10d"):format(j - 1) end
  ctx.log("%s", table.concat(head))
  for i, row in ipairs(rows) do
    local cells = { ("%10s"):format(labels[i]) }
    for j = 1, n do cells[#cells + 1] = cell(row[j]) end
    ctx.log("%s", table.concat(cells))
  end
end

-- nil holes (no measurement) become JSON nulls, so that the lists keep their length.
local function dense(list, n)
  local out = {}
  for i = 1, n do out[i] = list and list[i] ~= nil and list[i] or null end
  return out
end

-- Each GPU's copies to and from the host and local: a result per value, a finding per value
-- under SLOW of the host's median for the same kind of copy.
local function report_copies(ctx, r, n, host)
  local per_kind = {
    { "host_to_device", "pageable", r.host_to_device.pageable }, { "host_to_device", "pinned", r.host_to_device.pinned },
    { "device_to_host", "pageable", r.device_to_host.pageable }, { "device_to_host", "pinned", r.device_to_host.pinned },
    { "device_local", "device", r.device_local },
  }
  for _, k in ipairs(per_kind) do
    local values = {}
    for i = 1, n do
      local v = num(k[3][i])
      if v then
        values[#values + 1] = v
        ctx.report:result { kind = "gpu_copy", host = host, direction = k[1], memory = k[2], gpu = i - 1,
                            bytes = r.bytes, gbps = v }
      end
    end
    local mid = median(values)
    for i = 1, n do
      local v = num(k[3][i])
      if v and mid and v < SLOW * mid then
        ctx.report:finding {
          severity = "warn",
          subject = { host = host, gpu = i - 1 },
          message = ("host %s GPU %d: %s copy (%s memory) %.1f GB/s, under half of the host's median %.1f GB/s")
            :format(host, i - 1, k[1]:gsub("_", " "), k[2], v, mid),
          evidence = { direction = k[1], memory = k[2], gbps = v, host_median_gbps = mid },
          remedy = "check the GPU's PCIe link width and speed (cs.topo, lspci -vv) and its NUMA placement",
        }
      end
    end
  end
end

-- GPU -> GPU copies: a result per pair, the matrix, a finding per pair under SLOW of the host's
-- median.
local function report_peers(ctx, r, n, host)
  local peer_rows, labels, peer_values, sum = {}, {}, {}, 0
  for a = 1, n do
    labels[a] = tostring(a - 1)
    peer_rows[a] = r.peer and r.peer[a] or {}
    for b = 1, n do
      local v = num(peer_rows[a][b])
      if v then
        sum = sum + v
        peer_values[#peer_values + 1] = v
        ctx.report:result { kind = "gpu_copy", host = host, direction = "device_to_device", memory = "peer",
                            src = a - 1, dst = b - 1, bytes = r.bytes, gbps = v }
      end
    end
  end
  if n > 1 then
    matrix(ctx, "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", labels, peer_rows, n)
    ctx.log("SUM device_to_device_memcpy_write_ce %.2f", sum)
    local mid = median(peer_values)
    for a = 1, n do
      for b = 1, n do
        local v = num(peer_rows[a][b])
        if v and mid and v < SLOW * mid then
          ctx.report:finding {
            severity = "warn",
            subject = { host = host, pair = { a - 1, b - 1 } },
            message = ("host %s GPU %d -> GPU %d: %.1f GB/s, under half of the host's median GPU->GPU %.1f GB/s")
              :format(host, a - 1, b - 1, v, mid),
            evidence = { src = a - 1, dst = b - 1, gbps = v, host_median_gbps = mid },
            remedy = "check the NVLink state of both GPUs (nvidia-smi nvlink -s) or their PCIe path (nvidia-smi topo -m)",
          }
        end
      end
    end
  end
end

-- The host's section of report.json: every list dense (nulls where nothing was measured).
local function host_section(r, n, host, bi, all)
  local peer_dense, access_dense = {}, {}
  for a = 1, n do
    peer_dense[a] = dense(r.peer and r.peer[a], n)
    access_dense[a] = dense(r.peer_access and r.peer_access[a], n)
  end
  return {
    host = host, devices = r.devices, bytes = r.bytes, loops = r.loops, samples = r.samples,
    host_to_device = { pageable = dense(r.host_to_device.pageable, n), pinned = dense(r.host_to_device.pinned, n) },
    device_to_host = { pageable = dense(r.device_to_host.pageable, n), pinned = dense(r.device_to_host.pinned, n) },
    device_local = dense(r.device_local, n), peer = peer_dense, peer_access = access_dense,
    bidirectional = { host_to_device = dense(bi.host_to_device, n), device_to_host = dense(bi.device_to_host, n) },
    all_gpus = { host_to_device = dense(all.host_to_device, n), device_to_host = dense(all.device_to_host, n),
                 host_to_device_total = num(all.host_to_device_total) or null,
                 device_to_host_total = num(all.device_to_host_total) or null },
  }
end

local function report_host(ctx, r)
  local n = #r.devices
  local host = r.host
  ctx.log("#\n# host %s: %d GPU%s", host, n, n == 1 and "" or "s")
  for _, d in ipairs(r.devices) do
    ctx.log("#   GPU %d: %s [%s], NUMA node %s, host buffers %s", d.index, d.name, d.pci_bus_id,
      num(d.numa_node) and tostring(d.numa_node) or "unknown",
      d.host_buffers_local and "on its local CPUs" or "wherever this process runs (locality unknown)")
  end
  matrix(ctx, "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", { "pageable", "pinned" },
         { r.host_to_device.pageable, r.host_to_device.pinned }, n)
  matrix(ctx, "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", { "pageable", "pinned" },
         { r.device_to_host.pageable, r.device_to_host.pinned }, n)
  matrix(ctx, "memcpy local GPU(column) bandwidth (GB/s)", { "local" }, { r.device_local }, n)
  local bi, all = r.bidirectional or {}, r.all_gpus or {}
  matrix(ctx, "memcpy CE CPU <-> GPU(column) at once, pinned (GB/s)", { "to GPU", "from GPU" },
         { bi.host_to_device or {}, bi.device_to_host or {} }, n)
  matrix(ctx, "memcpy CE every GPU at once, pinned (GB/s)", { "to GPU", "from GPU" },
         { all.host_to_device or {}, all.device_to_host or {} }, n)
  ctx.log("SUM host_to_all_memcpy_ce %.2f", num(all.host_to_device_total) or 0)
  ctx.log("SUM all_to_host_memcpy_ce %.2f", num(all.device_to_host_total) or 0)
  for i = 1, n do
    for _, k in ipairs { { "bidirectional", "host_to_device", bi.host_to_device },
                         { "bidirectional", "device_to_host", bi.device_to_host },
                         { "all_gpus", "host_to_device", all.host_to_device },
                         { "all_gpus", "device_to_host", all.device_to_host } } do
      local v = num(k[3] and k[3][i])
      if v then
        ctx.report:result { kind = "gpu_copy", host = host, direction = k[2], memory = "pinned", concurrent = k[1],
                            gpu = i - 1, bytes = r.bytes, gbps = v }
      end
    end
  end

  report_copies(ctx, r, n, host)
  report_peers(ctx, r, n, host)
  return host_section(r, n, host, bi, all)
end

function recipe.run(ctx)
  local o = ctx.opt
  -- Every rank says what it sees first, so that a host without a GPU stops all ranks alike.
  local n, why = gpu.device_count()
  local seen = ctx.comm:allgather_value { host = ctx.host, n = n, why = why or "" }
  for _, s in ipairs(seen) do
    if s.n == 0 then
      cs.raise(cs.exit.bad_input, ("gpu_copy_bw: no usable CUDA device on host %s (cudaGetDeviceCount: %s)")
        :format(s.host, s.why), 0)
    end
  end
  local measures = true  -- the lowest rank of each host
  for r = 1, ctx.rank do
    if seen[r].host == ctx.host then measures = false end
  end
  ctx.log("# commscript gpu_copy_bw %s: %s, %s per copy, %d copies per sample, median of %d samples",
    recipe.version, cs.text.plural(ctx.size, "rank"), cs.format_size(o.bytes), o.loops, o.samples)
  for _, l in ipairs(METHOD) do ctx.log("# %s", l) end
  local mine = false
  if measures then
    mine = gpu.copy_bandwidth { bytes = o.bytes, loops = o.loops, samples = o.samples, peer = o.peer }
  end
  local all = ctx.comm:allgather_value(mine)
  local hosts = {}
  for _, r in ipairs(all) do
    if r then hosts[#hosts + 1] = report_host(ctx, r) end
  end
  ctx.report:set("gpu_copy_bw", { unit = "GB/s", hosts = hosts, method = METHOD })
end

return recipe
