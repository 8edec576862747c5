-- Message-size sweeps (nccl-tests -b/-e/-f/-i semantics).
local native = require "commscript.native"
local M = {}

local function size_arg(v, what)
  local n = native.parse_size(v)
  if n == nil then error(("sweep: %s '%s' is not a size (like 8, 64K, 1M)"):format(what, tostring(v)), 3) end
  return n
end

-- sizes{min=, max=, factor=} (multiplicative) or sizes{min=, max=, step=} (additive).
-- Sizes are bytes; min and max may be strings like "64K". max is always included when reached.
function M.sizes(t)
  local lo, hi = size_arg(t.min or 8, "min"), size_arg(t.max or t.min or 8, "max")
  if lo > hi then error(("sweep: min (%s) is larger than max (%s)"):format(native.format_size(lo), native.format_size(hi)), 2) end
  local out = {}
  if t.step then
    local step = size_arg(t.step, "step")
    if step < 1 then error("sweep: step must be at least 1 byte", 2) end
    local s = lo
    while s <= hi do out[#out + 1] = s; s = s + step end
  else
    local f = t.factor or 2
    if type(f) ~= "number" or f <= 1 then error("sweep: factor must be a number above 1", 2) end
    local s = lo
    if s == 0 then out[1] = 0; s = 1 end
    while s <= hi do
      out[#out + 1] = s
      local nxt = math.floor(s * f)
      if nxt <= s then nxt = s + 1 end
      s = nxt
    end
  end
  return out
end

-- check_memory(ctx, bytes, what) -> the host of every rank (1-based list). Collective.
-- Refuses (exit 1), before anything is allocated, when this host cannot hold `bytes` per local
-- rank: the ranks of a host share its memory.
function M.check_memory(ctx, bytes, what)
  local hosts = ctx.comm:allgather_value({ host = ctx.host, mem = native.memory_available() })
  local local_ranks, mem = 0, math.huge
  for _, h in ipairs(hosts) do
    if h.host == ctx.host then
      local_ranks = local_ranks + 1
      if h.mem > 0 and h.mem < mem then mem = h.mem end
    end
  end
  local need = bytes * local_ranks
  if mem ~= math.huge and need > mem then
    error({ code = require("commscript").exit.bad_input, message = ("%s needs %s of memory on host %s (%d ranks x %s), only %s is available"):format(
      what, native.format_size(need), ctx.host, local_ranks, native.format_size(bytes),
      native.format_size(math.floor(mem / 1048576) * 1048576)) }, 0)
  end
  local names = {}
  for i, h in ipairs(hosts) do names[i] = h.host end
  return names
end

-- bandwidth_bound(results) -> true when the last BOUND.run results of a sweep (ascending sizes,
-- each with bytes, time_us, busbw) say that larger sizes would only repeat the bandwidth already
-- measured: each doubling of the size took at least BOUND.ratio times as long, their busbw is
-- within BOUND.spread of each other, and the smallest of them is at least BOUND.min_bytes. Below
-- that floor a collective is latency-bound on any fabric, and a noisy machine can make three
-- small sizes look like a bandwidth ramp (a healthy 2-core CI run stopped all-reduce at 128 B).
M.BOUND = { run = 3, ratio = 1.6, spread = 0.15, min_bytes = 65536 }
function M.bandwidth_bound(rs)
  local B = M.BOUND
  if #rs < B.run then return false end
  local first = #rs - B.run + 1
  if not (rs[first].bytes >= B.min_bytes) then return false end
  local lo, hi = math.huge, 0
  for i = first, #rs do
    local r = rs[i]
    if not (r.busbw and r.busbw > 0) then return false end
    lo, hi = math.min(lo, r.busbw), math.max(hi, r.busbw)
    if i > first then
      local p = rs[i - 1]
      if not (r.time_us >= B.ratio * p.time_us * (r.bytes / p.bytes) / 2) then return false end
    end
  end
  return hi <= lo * (1 + B.spread)
end

return M
