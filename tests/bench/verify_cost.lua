-- Cost of call verification on an untimed loop of 8-byte all-reduces: rounds alternate
-- verification on and off; prints the medians. Needs --trusted (LuaJIT ffi for a clock):
--   mpirun -np 2 build/commscript --trusted tests/bench/verify_cost.lua --iters 5000 --rounds 9
local cs = require "commscript"
local ffi = require "ffi"
ffi.cdef[[ typedef struct { long tv_sec; long tv_nsec; } ts_t; int clock_gettime(int, ts_t*); ]]
local function now() local t = ffi.new("ts_t"); ffi.C.clock_gettime(1, t); return tonumber(t.tv_sec) + tonumber(t.tv_nsec) * 1e-9 end
local recipe = cs.recipe { name = "verify_cost", version = "1.0.0", options = { iters = { 5000, "iters" }, rounds = { 5, "rounds" } } }
function recipe.run(ctx)
  local t, r = cs.tensor("float32", 2), cs.tensor("float32", 2)
  local res = { on = {}, off = {} }
  for round = 1, ctx.opt.rounds do
    for _, mode in ipairs({ "on", "off" }) do
      ctx.comm:set_verify(mode == "on")
      ctx.comm:barrier()
      local t0 = now()
      for _ = 1, ctx.opt.iters do ctx.comm:allreduce(t, r) end
      local dt = now() - t0
      res[mode][#res[mode] + 1] = dt / ctx.opt.iters * 1e6
    end
  end
  if ctx.rank == 0 then
    table.sort(res.on); table.sort(res.off)
    local m = math.floor(#res.on / 2) + 1
    print(("untimed 8 B allreduce: verify on %.2f us/call, off %.2f us/call (medians of %d rounds), cost %+.1f %%"):format(res.on[m], res.off[m], #res.on, (res.on[m] / res.off[m] - 1) * 100))
  end
  return 0
end
return recipe
