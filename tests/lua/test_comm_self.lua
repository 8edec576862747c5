-- LuaUnit tests of the communicator methods (bindings/bind_comm.cpp) on the self backend (one
-- rank): every collective moves the right data, comm:check counts wrong elements, comm:bench's
-- numbers are consistent (algbw = bytes / time, busbw = algbw * factor), point-to-point, split,
-- value exchange, and argument errors.
-- Run: commscript --backend self --trusted tests/lua/test_comm_self.lua
local cs = require "commscript"
local lu = require "luaunit"

local recipe = cs.recipe {
  name = "test_comm_self",
  version = "0.1.0",
  summary = "LuaUnit tests of the communicator on the self backend",
}

local C  -- ctx.comm (set in recipe.run)
local REL = 1e-9

local function error_of(f)
  local ok, err = pcall(f)
  lu.assertFalse(ok, "expected an error, got none")
  return tostring(err), err
end

local function patterned(dtype, n, op, salt)
  return cs.tensor(dtype, n):fill_pattern(C:rank(), op or "sum", salt or 0)
end

local function assert_rel(got, want, what)
  local tol = REL * math.max(math.abs(want), 1e-300)
  lu.assertTrue(math.abs(got - want) <= tol, ("%s: got %.17g, want %.17g"):format(what or "value", got, want))
end

-- ---------------------------------------------------------------------------------------------
TestCommBasics = {}

function TestCommBasics:test_identity()
  lu.assertEquals(C:rank(), 0)
  lu.assertEquals(C:size(), 1)
  lu.assertEquals(C:backend(), "self")
  lu.assertEquals(type(C:name()), "string")
  lu.assertStrContains(tostring(C), "communicator<self ")
  lu.assertStrContains(tostring(C), "rank 0 of 1>")
end

function TestCommBasics:test_seq_counts_operations()
  local s0 = C:seq()
  C:barrier()
  local t = cs.tensor("float32", 4)
  C:allreduce(t, t)
  lu.assertEquals(C:seq(), s0 + 2)
end

function TestCommBasics:test_split()
  local sub = C:split(0)
  lu.assertNotNil(sub)
  lu.assertEquals(sub:size(), 1)
  lu.assertEquals(sub:rank(), 0)
  lu.assertNil(C:split(-1), "a negative colour leaves the rank out")
end

function TestCommBasics:test_values()
  lu.assertEquals(C:allgather_value({ host = "h", n = 3, l = { 1, 2 } }), { { host = "h", n = 3, l = { 1, 2 } } })
  lu.assertEquals(C:allgather_value(7.5), { 7.5 })
  lu.assertEquals(C:broadcast_value("x", 0), "x")
  lu.assertEquals(C:broadcast_value({ a = true }, 0), { a = true })
end

-- ---------------------------------------------------------------------------------------------
TestCollectives = {}

local function check_wrong(coll, recv, spec)
  local w = C:check(coll, recv, spec)
  lu.assertEquals(type(w), "number")
  return w
end

function TestCollectives:test_allreduce_every_op()
  for _, op in ipairs { "sum", "prod", "min", "max", "avg" } do
    local send = patterned("float64", 33, op)
    local recv = cs.tensor("float64", 33)
    C:allreduce(send, recv, op)
    lu.assertEquals(recv:to_table(), send:to_table(), op)
    lu.assertEquals(check_wrong("allreduce", recv, { op = op }), 0, op)
  end
end

function TestCollectives:test_check_counts_corrupted_elements()
  local send = patterned("int32", 64)
  local recv = cs.tensor("int32", 64)
  C:allreduce(send, recv)
  lu.assertEquals(check_wrong("allreduce", recv), 0)
  recv:set(5, recv:get(5) + 1)
  lu.assertEquals(check_wrong("allreduce", recv), 1)
  recv:set(64, 0)
  lu.assertEquals(check_wrong("allreduce", recv), 2)
  lu.assertEquals(check_wrong("allreduce", recv, { count = 4 }), 0, "count limits the check to the first 4")
end

-- float16/bfloat16 on the self backend: the check sees one element one ulp off (sum is exact).
function TestCollectives:test_check_16bit_floats()
  for _, dt in ipairs { "float16", "bfloat16" } do
    lu.assertEquals(C:supports(dt), true, dt)
    for _, op in ipairs { "sum", "avg", "max" } do
      local send = patterned(dt, 40, op)
      local recv = cs.tensor(dt, 40)
      C:allreduce(send, recv, op)
      lu.assertEquals(check_wrong("allreduce", recv, { op = op }), 0, dt .. " " .. op)
      recv:set(7, recv:get(7) * 1.5 + 1)
      lu.assertEquals(check_wrong("allreduce", recv, { op = op }), 1, dt .. " " .. op)
    end
    local recv = patterned(dt, 8, "sum")
    lu.assertEquals(recv:get(3), 6)
    recv:set(3, 6 + (dt == "float16" and 2 ^ -8 or 2 ^ -5))  -- one ulp above 6
    lu.assertTrue(recv:get(3) > 6, dt)
    lu.assertEquals(check_wrong("allreduce", recv), 1, dt .. ": one ulp off")
  end
end

function TestCollectives:test_check_salt_and_op_matter()
  local send = patterned("float32", 16, "sum", 3)
  local recv = cs.tensor("float32", 16)
  C:allreduce(send, recv)
  lu.assertEquals(check_wrong("allreduce", recv, { salt = 3 }), 0)
  lu.assertTrue(check_wrong("allreduce", recv, { salt = 0 }) > 0)
  lu.assertTrue(check_wrong("allreduce", recv, { salt = 3, op = "prod" }) > 0)
end

function TestCollectives:test_check_reports_untouched_buffer()
  lu.assertEquals(check_wrong("allgather", cs.tensor("float32", 10)), 10)
end

function TestCollectives:test_in_place_allreduce()
  local t = patterned("float32", 8)
  local before = t:to_table()
  C:allreduce(t, t)
  lu.assertEquals(t:to_table(), before)
  lu.assertEquals(check_wrong("allreduce", t), 0)
end

function TestCollectives:test_plain_collectives()
  for _, coll in ipairs { "allgather", "alltoall", "reduce_scatter" } do
    local send = patterned("int64", 12)
    local recv = cs.tensor("int64", 12)
    C[coll](C, send, recv)
    lu.assertEquals(recv:to_table(), send:to_table(), coll)
    lu.assertEquals(check_wrong(coll, recv), 0, coll)
  end
end

function TestCollectives:test_rooted_collectives()
  for _, coll in ipairs { "broadcast", "gather", "scatter" } do
    local send = patterned("uint8", 10)
    local recv = cs.tensor("uint8", 10)
    C[coll](C, send, recv, 0)
    lu.assertEquals(recv:to_table(), send:to_table(), coll)
    lu.assertEquals(check_wrong(coll, recv, { root = 0 }), 0, coll)
  end
  local send = patterned("float32", 10, "max")
  local recv = cs.tensor("float32", 10)
  C:reduce(send, recv, 0, "max")
  lu.assertEquals(check_wrong("reduce", recv, { op = "max", root = 0 }), 0)
end

function TestCollectives:test_sendrecv_with_self()
  local send = patterned("float32", 7)
  local recv = cs.tensor("float32", 7)
  C:sendrecv(send, 0, recv, 0)
  lu.assertEquals(recv:to_table(), send:to_table())
  lu.assertEquals(check_wrong("sendrecv", recv), 0)
end

function TestCollectives:test_send_then_recv_on_self()
  local a = cs.tensor("int32", 3)
  a:set(1, 10); a:set(2, 20); a:set(3, 30)
  local b = cs.tensor("int32", 3)
  C:send(a, 0)
  a:fill(0)  -- the message was copied at send time
  C:recv(b, 0)
  lu.assertEquals(b:to_table(), { 10, 20, 30 })
end

function TestCollectives:test_recv_without_send()
  local msg, err = error_of(function() C:recv(cs.tensor("int32", 3), 0) end)
  lu.assertStrContains(msg, "recv on a self communicator with no matching send (would hang)")
  lu.assertEquals(err.code, cs.exit.runtime)
end

function TestCollectives:test_recv_size_mismatch()
  C:send(cs.tensor("int32", 3), 0)
  local msg = error_of(function() C:recv(cs.tensor("int32", 2), 0) end)
  lu.assertStrContains(msg, "recv of 8 bytes matched a send of 12")
end

-- ---------------------------------------------------------------------------------------------
TestCollectiveErrors = {}

function TestCollectiveErrors:test_dtype_mismatch()
  local msg, err = error_of(function() C:allreduce(cs.tensor("float32", 4), cs.tensor("float64", 4)) end)
  lu.assertStrContains(msg, "send is float32 but receive is float64")
  lu.assertEquals(err.code, cs.exit.runtime)  -- misusing the API is a recipe bug, not bad input
end

function TestCollectiveErrors:test_small_receive_buffer()
  local msg = error_of(function() C:allreduce(cs.tensor("float32", 4), cs.tensor("float32", 3)) end)
  lu.assertStrContains(msg, "receive tensor has 3 elements, needs 4")
end

function TestCollectiveErrors:test_avg_on_integers()
  local msg = error_of(function() C:allreduce(cs.tensor("int32", 4), cs.tensor("int32", 4), "avg") end)
  lu.assertStrContains(msg, "avg")
  lu.assertStrContains(msg, "int32")
end

function TestCollectiveErrors:test_unknown_reduction()
  lu.assertStrContains(error_of(function() C:allreduce(cs.tensor("int32", 4), cs.tensor("int32", 4), "mean") end),
    "unknown reduction 'mean'")
end

-- API misuse inside a recipe is a recipe error (exit 2) whichever check catches it: a misspelt
-- dtype or reduction once exited 1 (bad input) while iters=0 or avg on int32 exited 2.
function TestCollectiveErrors:test_misuse_is_always_a_recipe_error()
  local t = cs.tensor("float32", 4)
  local cases = {
    function() C:allreduce(t, t, "summ") end,
    function() C:bench { op = "allreduce", bytes = 64, dtype = "floot" } end,
    function() C:bench { op = "allreduce", bytes = 64, redop = "summ" } end,
    function() C:bench { op = "allreduce", bytes = 64, iters = 0 } end,
    function() C:allreduce(cs.tensor("int32", 4), cs.tensor("int32", 4), "avg") end,
    function() C:check("allreduce", t, { op = "summ" }) end,
    function() local _ = cs.tensor("floot", 4) end,
    function() local _ = cs.dtype_size("floot") end,
  }
  for i, f in ipairs(cases) do
    local msg, err = error_of(f)
    -- a plain string error (luaL_argerror's) is a runtime error to the engine (lua_support.cpp)
    local code = type(err) == "table" and err.code or cs.exit.runtime
    lu.assertEquals(code, cs.exit.runtime, "case " .. i .. ": " .. tostring(msg))
  end
end

function TestCollectiveErrors:test_root_and_peer_out_of_range()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() C:broadcast(t, t, 1) end),
    "bad argument #3 to 'broadcast' (root 1 is not a rank of a communicator of 1)")
  lu.assertStrContains(error_of(function() C:send(t, 1) end),
    "bad argument #2 to 'send' (peer 1 is not a rank of a communicator of 1)")
  lu.assertStrContains(error_of(function() C:recv(t, -1) end), "peer -1 is not a rank")
end

function TestCollectiveErrors:test_not_a_tensor()
  lu.assertStrContains(error_of(function() C:allreduce({}, cs.tensor("float32", 1)) end),
    "commscript.tensor expected, got table")
end

function TestCollectiveErrors:test_check_errors()
  local t = cs.tensor("float32", 4)
  lu.assertStrContains(error_of(function() local _ = C:check("barrier", t) end), "check: unknown operation 'barrier'")
  lu.assertStrContains(error_of(function() local _ = C:check("allreduce", t, { bogus = 1 }) end),
    "unknown field 'bogus'; known: op, root, salt, count")
end

function TestCollectiveErrors:test_pingpong_and_stream_need_another_rank()
  lu.assertStrContains(error_of(function() local _ = C:pingpong { peer = 0, bytes = 8 } end),
    "(field 'peer': another rank of the communicator expected)")
  lu.assertStrContains(error_of(function() local _ = C:stream { peer = 0, bytes = 8 } end),
    "(field 'peer': another rank of the communicator expected)")
  lu.assertStrContains(error_of(function() local _ = C:pingpong { peer = 1, size = 8 } end),
    "unknown field 'size'; known: peer, bytes, iters, warmup, samples")
end

-- ---------------------------------------------------------------------------------------------
TestBench = {}

local function bench(t)
  local r = C:bench(t)
  lu.assertEquals(type(r), "table")
  return r
end

local function assert_consistent(r, what)
  lu.assertEquals(r.timing, "loop", what .. ": the headline is the loop's")
  lu.assertTrue(r.time_us > 0, what .. ": time_us > 0")
  -- The headline: one rank, so the over-ranks mean, min and max are its own loop time / iters.
  lu.assertEquals(#r.rank_time_us, r.ranks)
  lu.assertEquals(r.rank_time_us[1], r.time_us, what .. ": one rank's loop time is the mean")
  lu.assertTrue(r.time_rank_min_us <= r.time_us and r.time_us <= r.time_rank_max_us, what .. ": min <= time <= max")
  lu.assertEquals(r.time_rank_min_us, r.time_us)
  lu.assertEquals(r.time_rank_max_us, r.time_us)
  -- algbw (GB/s) recomputed from the bytes the collective moves and the headline time.
  local moved = cs.algbw_bytes(r.op, r.count, r.dtype, r.ranks)
  assert_rel(r.algbw, moved / (r.time_us * 1e-6) / 1e9, what .. ": algbw")
  lu.assertEquals(r.busbw_factor, cs.busbw_factor(r.op, r.ranks), what .. ": busbw_factor")
  assert_rel(r.busbw, r.algbw * r.busbw_factor, what .. ": busbw")
  -- The sampled pass: its own distribution.
  lu.assertTrue(r.samples >= 1, what .. ": samples")
  lu.assertTrue(r.min_us <= r.p50_us and r.p50_us <= r.p95_us and r.p95_us <= r.p99_us and r.p99_us <= r.max_us,
    what .. ": min <= p50 <= p95 <= p99 <= max")
  lu.assertTrue(r.min_us <= r.iter_mean_us and r.iter_mean_us <= r.max_us, what .. ": min <= iter mean <= max")
  lu.assertAlmostEquals(r.cv, r.stdev_us / r.iter_mean_us, 1e-9)
  lu.assertEquals(#r.rank_mean_us, r.ranks)
  assert_rel(r.rank_mean_us[1], r.iter_mean_us, what .. ": one rank's sampled mean is the sampled mean")
  lu.assertEquals(r.slowest_rank, 0)
end

function TestBench:test_allreduce_numbers()
  local r = bench { op = "allreduce", bytes = 1048576, iters = 7, warmup = 2 }
  lu.assertEquals(r.op, "allreduce")
  lu.assertEquals(r.bytes, 1048576)
  lu.assertEquals(r.count, 262144)
  lu.assertEquals(r.dtype, "float32")
  lu.assertEquals(r.redop, "sum")
  lu.assertEquals(r.root, -1)
  lu.assertEquals(r.ranks, 1)
  lu.assertEquals(r.iters, 7)
  lu.assertEquals(r.warmup, 2)
  lu.assertIsFalse(r.inplace)
  lu.assertIsTrue(r.checked)
  lu.assertEquals(r.wrong, 0)
  lu.assertEquals(r.wrong_ranks, {})
  lu.assertEquals(r.busbw_factor, 0, "allreduce on one rank moves nothing between ranks")
  assert_consistent(r, "allreduce")
end

function TestBench:test_busbw_factor_one()
  for _, op in ipairs { "broadcast", "reduce", "sendrecv" } do
    local r = bench { op = op, bytes = 65536, iters = 5, warmup = 1 }
    lu.assertEquals(r.busbw_factor, 1, op)
    lu.assertTrue(r.busbw > 0, op)
    assert_rel(r.busbw, r.algbw, op .. ": busbw == algbw")
    assert_consistent(r, op)
    lu.assertEquals(r.wrong, 0, op)
  end
end

function TestBench:test_every_collective_in_and_out_of_place()
  for _, op in ipairs(cs.collectives) do
    for _, inplace in ipairs { false, true } do
      local what = op .. (inplace and " in-place" or " out-of-place")
      local r = bench { op = op, bytes = 4096, dtype = "int32", iters = 3, warmup = 1, inplace = inplace }
      lu.assertEquals(r.inplace, inplace, what)
      lu.assertEquals(r.bytes, 4096, what)
      lu.assertEquals(r.count, 1024, what)
      lu.assertEquals(r.wrong, 0, what)
      local rooted = ({ broadcast = true, reduce = true, gather = true, scatter = true })[op]
      lu.assertEquals(r.root, rooted and 0 or -1, what .. ": root")
      assert_consistent(r, what)
    end
  end
end

function TestBench:test_count_and_dtype()
  local r = bench { op = "allgather", count = 100, dtype = "float64", iters = 2, warmup = 0 }
  lu.assertEquals(r.count, 100)
  lu.assertEquals(r.bytes, 800)
  assert_consistent(r, "allgather by count")
end

function TestBench:test_bytes_round_down_to_whole_elements()
  local r = bench { op = "allreduce", bytes = 10, dtype = "float32", iters = 2, warmup = 0 }
  lu.assertEquals(r.count, 2)
  lu.assertEquals(r.bytes, 8)
end

function TestBench:test_no_check()
  local r = bench { op = "allreduce", bytes = 1024, iters = 2, warmup = 0, check = false }
  lu.assertIsFalse(r.checked)
  lu.assertNil(r.wrong)
end

function TestBench:test_reductions_and_root()
  local r = bench { op = "reduce", bytes = 1024, redop = "max", root = 0, iters = 2, warmup = 0 }
  lu.assertEquals(r.redop, "max")
  lu.assertEquals(r.root, 0)
  lu.assertEquals(r.wrong, 0)
  lu.assertEquals(bench({ op = "allgather", bytes = 1024, iters = 1, warmup = 0 }).redop, "none")
end

function TestBench:test_seq_advances_by_the_timed_loop()
  local s0 = C:seq()
  local r = bench { op = "allreduce", bytes = 64, iters = 5, warmup = 3, check = false }
  lu.assertEquals(r.samples, 5, "the sampled pass runs iters samples by default")
  -- warm-up, barrier, the loop, barrier, the sampled pass
  lu.assertEquals(C:seq() - s0, 3 + 1 + 5 + 1 + 5)
  s0 = C:seq()
  r = bench { op = "allreduce", bytes = 64, iters = 50, warmup = 0, samples = 7, check = true }
  lu.assertEquals(r.samples, 7)
  lu.assertEquals(C:seq() - s0, 0 + 1 + 50 + 1 + 7 + 1, "and the checked run")
end

function TestBench:test_bench_errors()
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce" } end),
    "exactly one of the fields 'bytes' and 'count' expected")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, count = 2 } end),
    "exactly one of the fields 'bytes' and 'count' expected")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "barrier", bytes = 8 } end),
    "bench: unknown operation 'barrier'")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, iters = 0 } end),
    "(field 'iters': 1 to 100000000 expected, got 0)")
  -- no silent narrowing: 2^32 + 1 iterations once ran 1
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, iters = 4294967297 } end),
    "(field 'iters': 1 to 100000000 expected, got 4294967297)")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, warmup = -1 } end),
    "(field 'warmup': 0 to 100000000 expected, got -1)")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, samples = 0 } end),
    "(field 'samples': 1 to 100000000 expected, got 0)")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = -8 } end),
    "size must not be negative")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, iter = 3 } end),
    "unknown field 'iter'")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = "8" } end),
    "(field 'bytes': integer expected, got string)")
  lu.assertStrContains(error_of(function() local _ = C:bench { op = "allreduce", bytes = 8, dtype = "float8" } end),
    "unknown dtype 'float8'")
end

function recipe.run(ctx)
  C = ctx.comm
  local runner = lu.LuaUnit.new()
  runner:setOutputType("text")
  local fails = runner:runSuiteByInstances {
    { "TestCommBasics", TestCommBasics },
    { "TestCollectives", TestCollectives },
    { "TestCollectiveErrors", TestCollectiveErrors },
    { "TestBench", TestBench },
  }
  if fails ~= 0 then error(("%s: %d test(s) failed"):format(recipe.name, fails), 0) end
end

return recipe
