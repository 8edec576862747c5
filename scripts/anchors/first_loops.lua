-- Several timed loops in one commscript process, in an order given on the command line: a plain
-- MPI loop called through LuaJIT's FFI (MPI_Allreduce on MPI_COMM_WORLD, none of commscript's
-- code in it), comm:bench, or a pause. It separates what a process's history does to a loop
-- from what commscript's loop does (docs/timing.md, "The thirty-first stop"). Open MPI only (it
-- names Open MPI's predefined handles); not a recipe of its own: it needs --trusted (ffi).
--   mpirun -np 4 build/commscript --trusted scripts/anchors/first_loops.lua --bytes 8 --order sfbf
-- --order: one letter per step, in turn:
--   f  the plain loop: warm-up (a tenth, at least 5, as compare_anchors.sh), MPI_Barrier, ITERS
--      calls between two clock reads; the mean over ranks of each rank's time per call
--   b  comm:bench{op = "allreduce", check = false}, its headline time_us (the same counts)
--   s  every rank spins for 0.5 s (no MPI call)      z  every rank sleeps for 0.5 s
-- --iters: calls per loop (default: compare_anchors.sh's count for the size, 10-5000).
-- Prints on rank 0: "first_loops BYTES f=US b=US ..." (one figure per f or b, in order).
local cs = require "commscript"
local ffi = require "ffi"
ffi.cdef [[
typedef struct ompi_communicator_t *MPI_Comm;
typedef struct ompi_datatype_t *MPI_Datatype;
typedef struct ompi_op_t *MPI_Op;
extern struct ompi_predefined_communicator_t ompi_mpi_comm_world;
extern struct ompi_predefined_datatype_t ompi_mpi_float;
extern struct ompi_predefined_op_t ompi_mpi_op_sum;
int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype d, MPI_Op op, MPI_Comm c);
int MPI_Barrier(MPI_Comm c);
void *aligned_alloc(size_t align, size_t n);
int usleep(unsigned int us);
]]
local C = ffi.C

local recipe = cs.recipe {
  name = "first_loops",
  version = "1.0.0",
  summary = "plain MPI loops (FFI), comm:bench and pauses in one process, in a given order",
  options = {
    bytes = { 8, "bytes per rank (a multiple of 4)" },
    order = { "ff", "f = plain loop, b = comm:bench, s = spin 0.5 s, z = sleep 0.5 s" },
    iters = { 0, "calls per loop (0: 200 MiB / bytes, 10-5000)" },
  },
}

function recipe.run(ctx)
  local bytes = cs.parse_size(tostring(ctx.opt.bytes))
  if bytes < 4 or bytes % 4 ~= 0 then cs.raise(cs.exit.bad_input, "--bytes: a positive multiple of 4") end
  local it = tonumber(ctx.opt.iters) or 0
  if it <= 0 then it = math.min(5000, math.max(10, math.floor(200 * 1048576 / bytes))) end
  local warmup = math.max(5, math.floor(it / 10))
  local n = bytes / 4
  local send = ffi.cast("float*", C.aligned_alloc(64, bytes))
  local recv = ffi.cast("float*", C.aligned_alloc(64, bytes))
  for i = 0, n - 1 do
    send[i], recv[i] = 1, 0
  end
  local world = ffi.cast("MPI_Comm", ffi.cast("void*", C.ompi_mpi_comm_world))
  local float = ffi.cast("MPI_Datatype", ffi.cast("void*", C.ompi_mpi_float))
  local sum = ffi.cast("MPI_Op", ffi.cast("void*", C.ompi_mpi_op_sum))
  local out = {}
  for step in tostring(ctx.opt.order):gmatch(".") do
    if step == "f" then
      for _ = 1, warmup do C.MPI_Allreduce(send, recv, n, float, sum, world) end
      C.MPI_Barrier(world)
      local t0 = cs.now()
      for _ = 1, it do C.MPI_Allreduce(send, recv, n, float, sum, world) end
      local mine = (cs.now() - t0) / it * 1e6
      local total = 0
      for _, x in ipairs(ctx.comm:allgather_value(mine)) do total = total + x end
      out[#out + 1] = string.format("f=%.4f", total / ctx.size)
    elseif step == "b" then
      local r = ctx.comm:bench { op = "allreduce", bytes = bytes, iters = it, warmup = warmup, check = false }
      out[#out + 1] = string.format("b=%.4f", r.time_us)
    elseif step == "s" then
      local t0 = cs.now()
      while cs.now() - t0 < 0.5 do end
    elseif step == "z" then
      C.usleep(500000)
    else
      cs.raise(cs.exit.bad_input, "--order: '" .. step .. "' is not f, b, s or z")
    end
  end
  if ctx.rank == 0 then io.write("first_loops ", bytes, " ", table.concat(out, " "), "\n") end
end

return recipe
