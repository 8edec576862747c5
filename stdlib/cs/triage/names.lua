-- cs.triage.names: the names and counts triage translates (docs/triage.md): a Flight Recorder
-- profiling name or a watchdog OpType as commscript's op, a c10::ScalarType as commscript's
-- dtype, a record's element count as commscript's call takes it, and the small text helpers the
-- other parts share. Pure functions.
local P = require "cs.triage.parse"
local text = require "cs.text"

local M = {}

-- The op of a Flight Recorder profiling name ("nccl:_all_gather_base", "nccl:send 0->1") or a
-- watchdog OpType ("_ALLGATHER_BASE"), as commscript calls it (nil for point-to-point).
function M.op_of(name)
  local n = tostring(name):gsub("^%w+:", ""):gsub(" .*$", ""):lower():gsub("_", "")
  if n:find("allgather", 1, true) then return "allgather" end
  if n:find("reducescatter", 1, true) then return "reduce_scatter" end
  if n:find("alltoall", 1, true) then return "alltoall" end
  if n:find("allreduce", 1, true) then return "allreduce" end
  if n:find("broadcast", 1, true) then return "broadcast" end
  if n:find("barrier", 1, true) then return "barrier" end
  if n:find("reduce", 1, true) then return "reduce" end
  if n:find("gather", 1, true) then return "gather" end
  if n:find("scatter", 1, true) then return "scatter" end
  if n:find("coalesced", 1, true) then return "coalesced" end
  return nil  -- send, recv, unknown
end

-- fr_trace's op type (types.py Op: the profiling name after "nccl:" up to a space).
local function fr_type(profiling_name)
  return (profiling_name:match("^[^:]*:([^ ]+)") or profiling_name)
end

-- c10::toString(ScalarType) -> commscript dtype.
local DTYPES = { Float = "float32", Double = "float64", Half = "float16", BFloat16 = "bfloat16", Int = "int32",
  Long = "int64", Byte = "uint8", Char = "int8", Bool = "uint8", Short = "int32", UInt32 = "uint32", UInt64 = "uint64" }
function M.dtype_of(torch_dtype)
  return DTYPES[torch_dtype] or "float32"
end

-- The element count commscript's call takes (lua-api.md, Collectives) for a record.
function M.count_of(rec, group_size)
  local op = rec.op
  local nin = rec.numel_in or P.total(rec.in_sizes)
  local nout = rec.numel_out or P.total(rec.out_sizes)
  if op == "allgather" then
    if rec.in_sizes and #rec.in_sizes > 0 then return P.numel(rec.in_sizes[1]) end
    return nin
  elseif op == "reduce_scatter" then
    if rec.out_sizes and #rec.out_sizes > 0 then return P.numel(rec.out_sizes[1]) end
    return nout
  elseif op == "scatter" then
    return nout
  elseif op == "alltoall" then  -- per peer
    return math.floor(nin / math.max(1, group_size))
  elseif op == "barrier" then
    return 0
  end
  return nin
end

local function ranks_text(list)
  local c = require "cs.text"
  return c.ranges(list)
end

M.fr_type, M.ranks_text, M.sorted_keys = fr_type, ranks_text, text.sorted_keys

return M
