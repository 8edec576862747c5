-- cs.topo.model, part 1 of 3 of cs.topo: the model. build (the job's topology from per-rank tables), summarize,
-- collect (gather every rank's, collective), oversubscribed, and the helpers the other parts
-- share. Recipes use cs.topo, which re-exports this part's public functions.
local native = require "commscript.native"
local text = require "cs.text"

local M = {}

local fmt = string.format

-- Host-level keys: sent by the first rank of each host only (they are the same for all of a
-- host's ranks), so the gathered data grows with hosts, not ranks.
local HOST_KEYS = { "numa", "hwloc", "nics", "gpus", "gpu_links", "sysfs_root", "gpu_probe_error" }

-- ---- small helpers ----

local function array(t) return native.array(t) end

-- {0,1,2,3,5} -> "0-3,5" (cs.text.ranges)
local ranges = text.ranges
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
  -- others only their own. ctx.hosts (the job's host list) says who is first, else one allgather.
  local me = native.hostname()
  local hosts = ctx.hosts or comm:allgather_value(me)
  local first
  for i, h in ipairs(hosts) do
    if h == me then first = i - 1; break end
  end
  local mine = native.topology(opts.sysfs_root, { hwloc = first == ctx.rank })
  mine.rank = ctx.rank
  if first ~= ctx.rank then
    for _, k in ipairs(HOST_KEYS) do mine[k] = nil end
  end
  -- opts.root: only that rank gets (and builds) the topology; the others get nil.
  if opts.root then
    local all = comm:gather_value(mine, opts.root)
    return all and M.build(all) or nil
  end
  return M.build(comm:allgather_value(mine))
end

-- oversubscribed(t) -> { [host] = true } for the hosts that run more ranks than they have
-- online CPUs (two ranks may then share a core: what the rules' straggler verdicts take into
-- account).
function M.oversubscribed(t)
  local out = {}
  for name, h in pairs(t.hosts or {}) do
    if type(h) == "table" and h.local_size and h.cpu_online_count and h.local_size > h.cpu_online_count then
      out[name] = true
    end
  end
  return out
end


-- Shared with the other parts of cs.topo (not part of its API).
M.internal = { fmt = fmt, array = array, ranges = ranges, cpu_set = cpu_set, rank_word = rank_word,
               host_word = host_word, flatten = flatten, version_label = version_label,
               VERSION_FIELDS = VERSION_FIELDS, REMEDY = REMEDY }

return M
