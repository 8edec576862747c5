// Lua view of a Communicator: the collectives as methods, the timed loops (bench, pingpong,
// stream), split, and plain-data exchange for orchestration between timed regions.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "bindings.hpp"
#include "error.hpp"
#include "incidents.hpp"
#include "json_text.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "pattern.hpp"
#include "run_inputs.hpp"
#include "value_exchange.hpp"

namespace cs::lua {

namespace {

constexpr const char* kMT = "commscript.communicator";

// The communicators that split/shrink made and nobody has freed yet (cs.traffic's comms_live:
// stdlib code frees what it creates, and a test can see that it did).
std::unordered_set<const Communicator*> g_made;
double g_made_total = 0;  // every communicator split/shrink made (cs.traffic's comms_made)

// __gc and free(): releases the handle's communicator (at most once).
int comm_gc(lua_State* L) {
  auto* b = static_cast<Box<Communicator>*>(lua_touserdata(L, 1));
  if (b && b->p) g_made.erase(b->p.get());
  return gc_box<Communicator>(L);
}

Communicator& check_comm(lua_State* L, int idx) { return *check_box<Communicator>(L, idx, kMT, "communicator"); }

int check_rank_arg(lua_State* L, int idx, const Communicator& c, const char* what) {
  const int64_t r = check_integer(L, idx);
  if (r < 0 || r >= c.size())
    luaL_argerror(L, idx,
                  (std::string(what) + " " + std::to_string(r) + " is not a rank of a communicator of " +
                   std::to_string(c.size()))
                      .c_str());
  return static_cast<int>(r);
}

ReduceOp opt_redop(lua_State* L, int idx) {
  return lua_isnoneornil(L, idx) ? ReduceOp::sum : redop_arg(check_string(L, idx));
}

// The recipe's file:line that led to this call (its innermost frame), else the caller's.
std::string call_site(void* ctx) {
  auto* L = static_cast<lua_State*>(ctx);
  lua_getfield(L, LUA_REGISTRYINDEX, "commscript.recipe_chunk");
  const std::string chunk = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  lua_Debug ar;
  for (int level = 1; !chunk.empty() && lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.source && chunk == ar.source && ar.currentline > 0)
      return chunk.substr(1) + ":" + std::to_string(ar.currentline);
  }
  luaL_where(L, 1);
  std::string w = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (!w.empty() && w.back() == ':') w.pop_back();
  return w.empty() ? "?" : w;
}

// Untimed operations are verified (Communicator::verify) before they run.
int run_op(lua_State* L, Communicator& c, const Op& op) {
  const CallSite site{call_site, L};
  c.execute(op, &site);
  return 0;
}

int c_rank(lua_State* L) {
  lua_pushinteger(L, check_comm(L, 1).rank());
  return 1;
}
int c_size(lua_State* L) {
  lua_pushinteger(L, check_comm(L, 1).size());
  return 1;
}
int c_name(lua_State* L) {
  lua_pushstring(L, check_comm(L, 1).name().c_str());
  return 1;
}
int c_backend(lua_State* L) {
  lua_pushstring(L, check_comm(L, 1).backend().c_str());
  return 1;
}
// comm:supports(dtype) -> true, or false and why not (with what to use instead).
int c_supports(lua_State* L) {
  const Communicator& c = check_comm(L, 1);
  const std::string why = c.dtype_refusal(dtype_arg(check_string(L, 2)));
  lua_pushboolean(L, why.empty());
  if (why.empty()) return 1;
  lua_pushstring(L, ("not supported by --backend " + c.backend() + ": " + why).c_str());
  return 2;
}
int c_seq(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(check_comm(L, 1).seq()));
  return 1;
}

// set_timeout(seconds) -> previous: the deadline of this communicator's operations (0: none)
int c_set_timeout(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  const double s = luaL_checknumber(L, 2);
  // The run's range (--timeout, [run] timeout; run_inputs.hpp): 1e10 s overflowed the
  // nanosecond clock into an immediate timeout, math.huge and 1e19 too.
  if (!(s == 0 || (s >= kMinTimeoutS && s <= kMaxTimeoutS)))
    luaL_argerror(L, 2, "seconds: 0 (no deadline) or between 0.001 and 604800 (7 days) expected");
  const double old = c.timeout_s();
  c.set_timeout(s);
  lua_pushnumber(L, old);
  return 1;
}

// set_verify(on) -> previous: call verification of this communicator's untimed operations
// (on by default; communicators made by split inherit the setting).
int c_set_verify(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checktype(L, 2, LUA_TBOOLEAN);
  const bool old = c.verifying();
  c.set_verify(lua_toboolean(L, 2) != 0);
  lua_pushboolean(L, old);
  return 1;
}

int c_barrier(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  return run_op(L, c, make_op(c, Collective::barrier, Tensor(), Tensor()));
}

// (send, recv [, op])
template <Collective C>
int c_reducing(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  return run_op(L, c, make_op(c, C, check_tensor(L, 2), check_tensor(L, 3), opt_redop(L, 4)));
}
// (send, recv)
template <Collective C>
int c_plain(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  return run_op(L, c, make_op(c, C, check_tensor(L, 2), check_tensor(L, 3)));
}
// (send, recv, root)
template <Collective C>
int c_rooted(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  Tensor& s = check_tensor(L, 2);
  Tensor& r = check_tensor(L, 3);
  return run_op(L, c, make_op(c, C, s, r, ReduceOp::sum, check_rank_arg(L, 4, c, "root")));
}
// (send, recv, root [, op])
int c_reduce(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  Tensor& s = check_tensor(L, 2);
  Tensor& r = check_tensor(L, 3);
  const int root = check_rank_arg(L, 4, c, "root");
  return run_op(L, c, make_op(c, Collective::reduce, s, r, opt_redop(L, 5), root));
}
int c_send(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  Tensor& t = check_tensor(L, 2);
  Op op = make_op(c, Collective::send, t, Tensor(), ReduceOp::sum, 0, check_rank_arg(L, 3, c, "peer"));
  op.tag = static_cast<int>(luaL_optinteger(L, 4, 0));
  return run_op(L, c, op);
}
int c_recv(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  Tensor& t = check_tensor(L, 2);
  Op op = make_op(c, Collective::recv, Tensor(), t, ReduceOp::sum, 0, check_rank_arg(L, 3, c, "peer"));
  op.tag = static_cast<int>(luaL_optinteger(L, 4, 0));
  return run_op(L, c, op);
}
// (send, to, recv, from)
int c_sendrecv(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  Tensor& s = check_tensor(L, 2);
  const int to = check_rank_arg(L, 3, c, "peer");
  Tensor& r = check_tensor(L, 4);
  const int from = check_rank_arg(L, 5, c, "peer");
  return run_op(L, c, make_op(c, Collective::sendrecv, s, r, ReduceOp::sum, 0, to, from));
}

int c_split(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  const int64_t color = check_integer(L, 2);
  const int64_t key = lua_isnoneornil(L, 3) ? c.rank() : check_integer(L, 3);
  auto sub = c.split(static_cast<int>(color), static_cast<int>(key));
  if (!sub) {
    lua_pushnil(L);
    return 1;
  }
  g_made.insert(sub.get());
  g_made_total += 1;
  incidents::announce_comm(sub->name());  // a timeout on it judges its members only
  push_communicator(L, std::shared_ptr<Communicator>(std::move(sub)));
  return 1;
}

void push_ranks(lua_State* L, const std::vector<int>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// revoke(): this rank gives up on the communicator (after a RanksLostError).
int c_revoke(lua_State* L) {
  check_comm(L, 1).revoke();
  return 0;
}

// survivors() -> {ranks...}: this communicator's ranks still alive as far as the backend knows.
int c_survivors(lua_State* L) {
  push_ranks(L, check_comm(L, 1).survivors());
  return 1;
}

// shrink{exclude={ranks...}} -> communicator of the others (a collective of the survivors).
// Without exclude: the ranks the backend knows are gone.
int c_shrink(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  std::vector<int> exclude;
  bool given = false;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_getfield(L, 2, "exclude");
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1)) luaL_argerror(L, 2, "exclude must be a list of ranks");
      given = true;
      const int n = static_cast<int>(lua_objlen(L, -1));
      for (int i = 1; i <= n; ++i) {
        lua_rawgeti(L, -1, i);
        if (!lua_isnumber(L, -1)) luaL_argerror(L, 2, "exclude must be a list of ranks");
        exclude.push_back(static_cast<int>(lua_tointeger(L, -1)));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  if (!given) {
    const std::vector<int> alive = c.survivors();
    for (int r = 0; r < c.size(); ++r)
      if (std::find(alive.begin(), alive.end(), r) == alive.end()) exclude.push_back(r);
  }
  std::shared_ptr<Communicator> sub(c.shrink(exclude));
  c.set_successor(sub);
  g_made.insert(sub.get());
  g_made_total += 1;
  if (sub) incidents::announce_comm(sub->name());
  push_communicator(L, sub);
  return 1;
}

Collective check_collective(lua_State* L, const std::string& name, const char* fn) {
  auto coll = parse_collective(name);
  if (!coll || *coll == Collective::barrier || *coll == Collective::send || *coll == Collective::recv) {
    std::string all;
    for (Collective k : kBenchCollectives) all += (all.empty() ? "" : ", ") + std::string(collective_name(k));
    luaL_error(L, "%s: unknown operation '%s' (expected one of %s)", fn, name.c_str(), all.c_str());
  }
  return *coll;
}

// check(collective, recv, {op=, root=, salt=, count=}) -> wrong elements of this rank's result,
// every rank having filled its send buffer with t:fill_pattern(rank, op, salt).
int c_check(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  const Collective coll = check_collective(L, check_string(L, 2), "check");
  Tensor& recv = check_tensor(L, 3);
  CheckSpec s{coll, ReduceOp::sum, c.rank(), c.size(), 0, 0, 0};
  if (lua_istable(L, 4)) {
    static const char* const f[] = {"op", "root", "salt", "count", nullptr};
    check_fields(L, 4, "check", f);
    s.op = redop_arg(field_string(L, 4, "check", "op", "sum"));
    s.root = static_cast<int>(field_integer(L, 4, "check", "root", 0));
    s.salt = static_cast<uint32_t>(field_integer(L, 4, "check", "salt", 0));
    s.count = static_cast<size_t>(field_integer(L, 4, "check", "count", -1));
  } else {
    s.count = static_cast<size_t>(-1);
  }
  if (s.count == static_cast<size_t>(-1)) {
    const Counts one = collective_counts(coll, 1, c.size());
    s.count = recv.count() / (one.recv ? one.recv : 1);
  }
  lua_pushnumber(L, static_cast<double>(count_wrong(s, recv.to_host())));  // a device tensor: through the host
  return 1;
}

// free(): releases this handle's communicator now (a split NCCL communicator is finalised and
// destroyed here, not at some later garbage collection).
int c_free(lua_State* L) {
  check_comm(L, 1);
  return comm_gc(L);
}

// tensor(dtype, count) -> a zero-filled tensor where this communicator's operations want their
// buffers (host memory; the rank's GPU under --backend nccl)
int c_tensor(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  const DType dt = dtype_from_string(check_string(L, 2));
  const int64_t n = check_integer(L, 3);
  if (n < 0) luaL_argerror(L, 3, "non-negative count expected");
  push_tensor(L, c.alloc(dt, static_cast<size_t>(n)));
  return 1;
}

void set_num(lua_State* L, const char* k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

// Fields of the table on top of the stack from a list of names and values (c_bench's result).
void set_nums(lua_State* L, std::initializer_list<std::pair<const char*, double>> fields) {
  for (const auto& [k, v] : fields) set_num(L, k, v);
}

void set_strings(lua_State* L, std::initializer_list<std::pair<const char*, std::string>> fields) {
  for (const auto& [k, v] : fields) {
    lua_pushstring(L, v.c_str());
    lua_setfield(L, -2, k);
  }
}

void set_list(lua_State* L, const char* k, const std::vector<double>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, k);
}

// The most iterations (or warm-up iterations) one bench call takes: an int, and samples that fit.
constexpr int64_t kMaxIters = 100000000;

// An iteration-like field, range-checked before it is narrowed to int.
int count_field(lua_State* L, int idx, const char* fn, const char* key, int64_t dflt, int64_t lo) {
  const int64_t v = field_integer(L, idx, fn, key, dflt);
  if (v < lo || v > kMaxIters)
    luaL_argerror(L, idx,
                  ("field '" + std::string(key) + "': " + std::to_string(lo) + " to " + std::to_string(kMaxIters) +
                   " expected, got " + std::to_string(v))
                      .c_str());
  return static_cast<int>(v);
}

// bench{op=, bytes=|count=, dtype=, redop=, root=, inplace=, iters=, warmup=, samples=, check=}
int c_bench(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char* const f[] = {"op",      "bytes", "count",  "dtype", "redop",   "root",
                                  "inplace", "iters", "warmup", "check", "samples", nullptr};
  check_fields(L, 2, "bench", f);
  const Collective coll = check_collective(L, field_string(L, 2, "bench", "op", "allreduce"), "bench");
  const DType dt = dtype_arg(field_string(L, 2, "bench", "dtype", "float32"));
  const ReduceOp redop = redop_arg(field_string(L, 2, "bench", "redop", "sum"));
  const int64_t root = field_integer(L, 2, "bench", "root", 0);
  const bool inplace = field_bool(L, 2, "bench", "inplace", false);
  BenchSpec spec;
  // Range-checked before narrowing: 4294967297 iterations must not become 1.
  spec.iters = count_field(L, 2, "bench", "iters", 20, 1);
  spec.warmup = count_field(L, 2, "bench", "warmup", 5, 0);
  // check: true (default), false, or "reference": the per-element method kept as the baseline of
  // tests/bench/check_cost.lua (the same verdicts, slower; engine/measure/bench.hpp).
  lua_getfield(L, 2, "check");
  const bool reference = lua_type(L, -1) == LUA_TSTRING && std::string_view(lua_tostring(L, -1)) == "reference";
  lua_pop(L, 1);
  spec.check = reference || field_bool(L, 2, "bench", "check", true);
  if (reference) spec.check_method = CheckMethod::reference;
  spec.samples = count_field(L, 2, "bench", "samples", spec.iters, 1);
  // The per-iteration times: the samples, the slowest rank's, the copy returned and the sorted
  // copy of the summary, then the rank average's integer sums, values and sorted copy
  // (bench.cpp), checked before anything is allocated.
  check_engine_memory(L, static_cast<size_t>(spec.samples) * sizeof(double) * 7,
                      "bench: " + std::to_string(spec.samples) + " per-iteration samples");
  const bool by_bytes = has_field(L, 2, "bytes");
  if (by_bytes == has_field(L, 2, "count"))
    luaL_argerror(L, 2, "exactly one of the fields 'bytes' and 'count' expected");
  const int64_t amount = by_bytes ? field_integer(L, 2, "bench", "bytes", 0) : field_integer(L, 2, "bench", "count", 0);
  if (amount < 0) luaL_argerror(L, 2, "size must not be negative");
  const int n = c.size();
  const size_t count =
      by_bytes ? count_for_bytes(coll, static_cast<size_t>(amount), dtype_size(dt), n) : static_cast<size_t>(amount);
  auto [send, recv] = bench_buffers(c, coll, count, dt, inplace);
  const int peer = (c.rank() + 1) % n, from = (c.rank() - 1 + n) % n;
  const Op op = make_op(c, coll, send, recv, redop, static_cast<int>(root), peer, from, count);
  c.verify(op, CallSite{call_site, L});  // once, before the timed loop
  const BenchResult r = bench(c, op, send, recv, spec);

  // The result, from field lists (docs/lua-api.md, comm:bench): names and values side by side.
  lua_createtable(L, 0, 40);
  set_strings(L, {{"op", std::string(collective_name(coll))},
                  {"dtype", std::string(dtype_name(dt))},
                  {"redop", collective_reduces(coll) ? std::string(reduce_op_name(redop)) : "none"},
                  {"timing", "loop"}});
  lua_pushboolean(L, inplace);
  lua_setfield(L, -2, "inplace");
  set_nums(L, {
                  {"bytes", static_cast<double>(op.bytes())},
                  {"count", static_cast<double>(count)},
                  {"root", collective_has_root(coll) ? static_cast<double>(root) : -1.0},
                  {"ranks", static_cast<double>(n)},
                  {"iters", static_cast<double>(spec.iters)},
                  {"warmup", static_cast<double>(spec.warmup)},
                  // Headline: whole-loop time / iters, mean (min, max) over ranks; algbw, busbw from time_us.
                  {"time_us", r.time_us},
                  {"time_rank_min_us", r.time_rank_min_us},
                  {"time_rank_max_us", r.time_rank_max_us},
                  {"algbw", r.algbw},
                  {"busbw", r.busbw},
                  {"busbw_factor", busbw_factor(coll, n)},
                  // Sampled pass: per-iteration times, the slowest rank per iteration.
                  {"samples", static_cast<double>(spec.samples)},
                  {"iter_mean_us", r.us.mean},
                  {"min_us", r.us.min},
                  {"p50_us", r.us.p50},
                  {"p95_us", r.us.p95},
                  {"p99_us", r.us.p99},
                  {"max_us", r.us.max},
                  {"stdev_us", r.us.stdev},
                  {"cv", r.us.cv()},
                  // The same pass averaged over ranks per iteration (nccl-tests -a 1 per iteration).
                  {"avg_p50_us", r.us_avg.p50},
                  {"avg_p99_us", r.us_avg.p99},
                  {"avg_max_us", r.us_avg.max},
                  {"avg_cv", r.us_avg.cv()},
                  {"slowest_rank", static_cast<double>(r.slowest_rank)},
              });
  set_list(L, "rank_time_us", r.rank_time_us);
  set_list(L, "rank_mean_us", r.rank_mean_us);
  if (r.checked) {
    set_num(L, "wrong", static_cast<double>(r.wrong));
    lua_createtable(L, 0, 3);  // the check's cost outside the timed regions, slowest rank's (bench.hpp)
    set_num(L, "fill_us", r.check_fill_us);
    set_num(L, "run_us", r.check_run_us);
    set_num(L, "compare_us", r.check_compare_us);
    lua_setfield(L, -2, "check_us");
  }
  lua_pushboolean(L, r.checked);
  lua_setfield(L, -2, "checked");
  lua_newtable(L);  // ranks (0-based numbers) whose result had wrong elements
  int k = 1;
  for (size_t i = 0; i < r.wrong_by_rank.size(); ++i)
    if (r.wrong_by_rank[i]) {
      lua_pushinteger(L, static_cast<lua_Integer>(i));
      lua_rawseti(L, -2, k++);
    }
  mark_array(L, -1);
  lua_setfield(L, -2, "wrong_ranks");
  return 1;
}

// pingpong{peer=, bytes=, iters=, warmup=, samples=} -> {latency_us (headline), sampled mean_us,
// min_us, p50_us, p99_us, max_us, cv}
int c_pingpong(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char* const f[] = {"peer", "bytes", "iters", "warmup", "samples", nullptr};
  check_fields(L, 2, "pingpong", f);
  const int64_t peer = field_integer(L, 2, "pingpong", "peer", -1);
  if (peer < 0 || peer >= c.size() || peer == c.rank())
    luaL_argerror(L, 2, "field 'peer': another rank of the communicator expected");
  const int64_t bytes = field_integer(L, 2, "pingpong", "bytes", 8);
  if (bytes < 0) luaL_argerror(L, 2, "field 'bytes': non-negative expected");
  const int iters = count_field(L, 2, "pingpong", "iters", 100, 1);
  const int warmup = count_field(L, 2, "pingpong", "warmup", 10, 0);
  const int samples = count_field(L, 2, "pingpong", "samples", iters, 1);
  check_engine_memory(L, static_cast<size_t>(samples) * sizeof(double) * 2,
                      "pingpong: " + std::to_string(samples) + " per-iteration samples");
  Tensor buf = c.alloc(DType::uint8, static_cast<size_t>(bytes));  // where the backend wants it (NCCL: GPU)
  const PingPongResult r = pingpong(c, static_cast<int>(peer), buf, warmup, iters, samples);
  lua_createtable(L, 0, 12);
  lua_pushstring(L, "loop");
  lua_setfield(L, -2, "timing");
  set_num(L, "bytes", static_cast<double>(bytes));
  set_num(L, "iters", static_cast<double>(iters));
  set_num(L, "warmup", static_cast<double>(warmup));
  set_num(L, "latency_us", r.latency_us);
  set_num(L, "samples", static_cast<double>(samples));
  set_num(L, "min_us", r.us.min);
  set_num(L, "mean_us", r.us.mean);
  set_num(L, "p50_us", r.us.p50);
  set_num(L, "p99_us", r.us.p99);
  set_num(L, "max_us", r.us.max);
  set_num(L, "cv", r.us.cv());
  return 1;
}

// stream{peer=, sender=, bytes=, window=, iters=, warmup=} -> GB/s as this rank measured it
int c_stream(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char* const f[] = {"peer", "sender", "bytes", "window", "iters", "warmup", nullptr};
  check_fields(L, 2, "stream", f);
  const int64_t peer = field_integer(L, 2, "stream", "peer", -1);
  if (peer < 0 || peer >= c.size() || peer == c.rank())
    luaL_argerror(L, 2, "field 'peer': another rank of the communicator expected");
  const int64_t bytes = field_integer(L, 2, "stream", "bytes", 1 << 20);
  if (bytes < 1) luaL_argerror(L, 2, "field 'bytes': positive expected");
  Tensor buf = c.alloc(DType::uint8, static_cast<size_t>(bytes));
  Tensor ack = c.alloc(DType::uint8, 1);
  const double gbs =
      stream_bandwidth(c, static_cast<int>(peer), field_bool(L, 2, "stream", "sender", c.rank() < peer), buf, ack,
                       count_field(L, 2, "stream", "window", 64, 1), count_field(L, 2, "stream", "warmup", 2, 0),
                       count_field(L, 2, "stream", "iters", 10, 1));
  lua_pushnumber(L, gbs);
  return 1;
}

// pair_bench{peer=, bytes=, iters=, warmup=} -> { min_us, p50_us, mean_us, max_us, bytes, iters }:
// measure/bench.hpp pair_bench; this checks the fields and marshals the result.
int c_pair_bench(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char* const f[] = {"peer", "bytes", "iters", "warmup", nullptr};
  check_fields(L, 2, "pair_bench", f);
  const int64_t peer = field_integer(L, 2, "pair_bench", "peer", -1);
  if (peer < 0 || peer >= c.size() || peer == c.rank())
    luaL_argerror(L, 2, "field 'peer': another rank of the communicator expected");
  const int64_t bytes = field_integer(L, 2, "pair_bench", "bytes", 8);
  if (bytes < 1) luaL_argerror(L, 2, "field 'bytes': positive expected");
  const int iters = count_field(L, 2, "pair_bench", "iters", 10, 1);
  const int warmup = count_field(L, 2, "pair_bench", "warmup", 2, 0);
  const PairBenchResult r = pair_bench(c, static_cast<int>(peer), static_cast<size_t>(bytes), warmup, iters);
  lua_createtable(L, 0, 6);
  set_num(L, "bytes", static_cast<double>(bytes));
  set_num(L, "iters", iters);
  set_num(L, "min_us", r.min_us);
  set_num(L, "p50_us", r.p50_us);
  set_num(L, "mean_us", r.mean_us);
  set_num(L, "max_us", r.max_us);
  return 1;
}

// Plain data between ranks (JSON-serialisable values), for orchestration, not timing; the
// engine exchanges them and counts the traffic (comm/value_exchange.hpp, cs.traffic).
// Pushes a list of the JSON texts `all` as Lua values (entry i is all[i-1]); returns 1.
int push_json_list(lua_State* L, const std::vector<std::string>& all) {
  lua_createtable(L, static_cast<int>(all.size()), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    push_json(L, nlohmann::json::parse(all[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}
int c_allgather_value(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checkany(L, 2);
  const auto all = allgather_value(c, json_text(to_json(L, 2)));
  return push_json_list(L, all);
}
// gather_value(v, root) -> on root the list of every rank's v (entry i is rank i-1's), nil on
// the others: what only root needs goes to root alone (O(n) there, O(1) elsewhere).
int c_gather_value(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  luaL_checkany(L, 2);
  const int root = check_rank_arg(L, 3, c, "root");
  const auto all = gather_value(c, json_text(to_json(L, 2)), root);
  if (c.rank() != root) {
    lua_pushnil(L);
    return 1;
  }
  return push_json_list(L, all);
}
int c_broadcast_value(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  const int root = check_rank_arg(L, 3, c, "root");
  const std::string got = broadcast_value(c, c.rank() == root ? json_text(to_json(L, 2)) : std::string(), root);
  push_json(L, nlohmann::json::parse(got));
  return 1;
}

// native.traffic() -> { ops, bytes_sent, value_calls, value_sent, value_received, comms_live,
// comms_made }:
// this process's counters since it started (docs/lua-api.md, cs.traffic).
int n_traffic(lua_State* L) {
  const Traffic& t = Communicator::traffic();
  lua_createtable(L, 0, 7);
  set_num(L, "ops", static_cast<double>(t.ops.load(std::memory_order_relaxed)));
  set_num(L, "bytes_sent", static_cast<double>(t.bytes_sent.load(std::memory_order_relaxed)));
  const ValueTraffic& v = value_traffic();
  set_num(L, "value_calls", static_cast<double>(v.calls.load(std::memory_order_relaxed)));
  set_num(L, "value_sent", static_cast<double>(v.sent.load(std::memory_order_relaxed)));
  set_num(L, "value_received", static_cast<double>(v.received.load(std::memory_order_relaxed)));
  set_num(L, "comms_live", static_cast<double>(g_made.size()));
  set_num(L, "comms_made", g_made_total);
  return 1;
}

int c_tostring(lua_State* L) {
  Communicator& c = check_comm(L, 1);
  lua_pushfstring(L, "communicator<%s %s, rank %d of %d>", c.backend().c_str(), c.name().c_str(), c.rank(), c.size());
  return 1;
}

}  // namespace

void push_communicator(lua_State* L, std::shared_ptr<Communicator> c) { push_box(L, std::move(c), kMT); }

void register_communicator(lua_State* L) {
  luaL_newmetatable(L, kMT);
  static const luaL_Reg methods[] = {{"rank", entry<c_rank>},
                                     {"size", entry<c_size>},
                                     {"name", entry<c_name>},
                                     {"backend", entry<c_backend>},
                                     {"supports", entry<c_supports>},
                                     {"seq", entry<c_seq>},
                                     {"set_timeout", entry<c_set_timeout>},
                                     {"set_verify", entry<c_set_verify>},
                                     {"barrier", entry<c_barrier>},
                                     {"allreduce", entry<c_reducing<Collective::allreduce>>},
                                     {"reduce_scatter", entry<c_reducing<Collective::reduce_scatter>>},
                                     {"reduce", entry<c_reduce>},
                                     {"allgather", entry<c_plain<Collective::allgather>>},
                                     {"alltoall", entry<c_plain<Collective::alltoall>>},
                                     {"broadcast", entry<c_rooted<Collective::broadcast>>},
                                     {"gather", entry<c_rooted<Collective::gather>>},
                                     {"scatter", entry<c_rooted<Collective::scatter>>},
                                     {"send", entry<c_send>},
                                     {"recv", entry<c_recv>},
                                     {"sendrecv", entry<c_sendrecv>},
                                     {"split", entry<c_split>},
                                     {"revoke", entry<c_revoke>},
                                     {"survivors", entry<c_survivors>},
                                     {"shrink", entry<c_shrink>},
                                     {"check", entry<c_check>},
                                     {"tensor", entry<c_tensor>},
                                     {"free", entry<c_free>},
                                     {"bench", entry<c_bench>},
                                     {"pingpong", entry<c_pingpong>},
                                     {"stream", entry<c_stream>},
                                     {"pair_bench", entry<c_pair_bench>},
                                     {"allgather_value", entry<c_allgather_value>},
                                     {"broadcast_value", entry<c_broadcast_value>},
                                     {"gather_value", entry<c_gather_value>},
                                     {nullptr, nullptr}};
  lua_newtable(L);
  luaL_register(L, nullptr, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, entry<c_tostring>);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, comm_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushstring(L, "communicator");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  lua_pushcfunction(L, entry<n_traffic>);
  lua_setfield(L, -2, "traffic");  // native.traffic
}

}  // namespace cs::lua
