#include "lua_vm.hpp"

#include <luajit.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "bindings.hpp"
#include "clock.hpp"
#include "control_plane.hpp"
#include "embedded.hpp"
#include "file_read.hpp"
#include "incidents.hpp"
#include "json_text.hpp"
#include "lua_support.hpp"
#include "memory_share.hpp"
#include "progress.hpp"
#include "session.hpp"
#include "size.hpp"

namespace cs {

struct Guard {
  const char* stack_base = nullptr;  // frame of the outermost LuaVm::call
  size_t stack_limit = 0;            // bytes of C stack Lua may use below it
  int calls = 0;                     // LuaVm::call nesting
  bool budget = false;
  double budget_s = 0;  // the top level's budget; its deadline is budget_deadline_ns below
  // The Lua heap: bytes held now, the limit (0: none), and whether an allocation was refused.
  size_t mem_used = 0;
  size_t mem_limit = 0;
  bool mem_refused = false;
  std::string mem_basis;  // how the limit was chosen, for the message
  // Lua run with no operation: past the run's deadline plus kWatchdogGraceS (0: no limit), the
  // recipe ends with a timeout naming where (an endless loop on every rank left nobody waiting
  // in an operation, so no deadline fired). `lua_ops`: operations started when `lua_since`
  // (the first check that saw that count) was taken.
  double lua_limit_s = 0;
  double deadline_s = 0;
  unsigned lua_checks = 0;
  uint64_t lua_ops = ~uint64_t{0};
  int64_t lua_since = 0;  // now_ns()
  // A limit, once hit, is sticky (issue 20): the rest of the LuaVm::call that hit it fails with
  // it whatever Lua does (a pcall in the stdlib or the recipe, an xpcall handler that errs:
  // "error in error handling", a loop around it), and that call's result is the limit's.
  bool limit_hit = false;
  ExitCode limit_code = ExitCode::runtime;
  std::string limit_message;
  // Read by the backstop thread (LuaVm::backstop), written by the rank's main thread.
  std::atomic<bool> active{false};             // inside LuaVm::call
  std::atomic<int64_t> budget_deadline_ns{0};  // the top level's budget (0: none)
  std::atomic<int64_t> limit_hit_ns{0};        // when the sticky limit was hit (0: not)
  std::atomic<int> limit_code_a{0};
  // The C function of ours or of the string library the rank is in (c_seq != c_done), and the
  // recipe line that called it: what the backstop names when the hook cannot fire.
  std::atomic<uint64_t> c_seq{0}, c_done{0};
  std::mutex c_mu;
  std::string c_what;
  // The backstop thread (LuaVm::LuaVm): ends the process where the count hook cannot fire.
  std::thread backstop;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;
};

namespace embedded {
const File* find(std::string_view path) {
  for (const File* f = kFiles; f->path; ++f)
    if (path == f->path) return f;
  return nullptr;
}
}  // namespace embedded

namespace {

const char* kRecipeChunkKey = "commscript.recipe_chunk";

// A module name of commscript's namespaces: "commscript", "commscript.x", "cs.x", "cs.x.y".
bool ours(std::string_view name) {
  return name == "commscript" || name.rfind("commscript.", 0) == 0 || name.rfind("cs.", 0) == 0;
}

// Plain dotted names only: nothing that could walk out of the stdlib directory ("cs...x").
bool plain_module_name(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  char prev = 0;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}

// package.loaders entry: modules of the stdlib by name ("cs.stats" -> stdlib/cs/stats.lua). A
// name in commscript's namespaces that is not embedded is an error here, so it never falls
// through to LuaJIT's searchers (./cs/x.lua, ./cs/x.so, LUA_PATH, LUA_CPATH): those load
// unsandboxed code. Stdlib chunks are text only.
int embedded_loader(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  if (!ours(name)) {
    lua_pushfstring(L, "\n\tno module '%s' in commscript's stdlib", name.c_str());
    return 1;
  }
  if (!plain_module_name(name))
    return luaL_error(L, "module '%s' not found: not a module name (letters, digits, '_' and '.')", name.c_str());
  std::string rel = name;
  for (char& c : rel)
    if (c == '.') c = '/';
  rel = "stdlib/" + rel + ".lua";
  if (const char* dir = std::getenv("COMMSCRIPT_STDLIB"); dir && *dir) {
    const std::string path = std::string(dir) + "/" + rel.substr(7);
    // A missing file falls back to the embedded module; a FIFO or a device there is an error
    // (file_read.hpp), never a wait.
    const FileRead r = read_regular_file(path, size_t{16} << 20);
    if (r.ok()) {
      if (luaL_loadbufferx(L, r.text.data(), r.text.size(), ("@" + path).c_str(), "t") != 0) return lua_error(L);
      return 1;
    }
    if (r.failure != ReadFailure::open)
      return luaL_error(L, "module '%s': COMMSCRIPT_STDLIB: %s %s", name.c_str(), path.c_str(), r.why.c_str());
  }
  const embedded::File* f = embedded::find(rel);
  if (!f)
    return luaL_error(L, "module '%s' not found:\n\tno module '%s' in commscript's stdlib", name.c_str(), name.c_str());
  if (luaL_loadbufferx(L, f->data, f->size, ("@" + rel).c_str(), "t") != 0) return lua_error(L);
  return 1;
}

// ---- the guard: C-stack depth and the time budget of a recipe's top level ----
// LuaJIT bounds its own stack but not the C stack: recursion through C (a string.gsub callback
// calling gsub, nested coroutines) ran into SIGSEGV. A count hook measures how deep the C stack
// is below the outermost LuaVm::call and raises a Lua error past half the stack. The same hook
// ends a top level that runs past its budget (an endless loop under --list/--help/--check).
// Count hooks run in the interpreter only: the budget is applied with the JIT off (runner.lua).
const char kGuardKey = 0;
constexpr int kHookEvery = 200;  // VM instructions between checks

Guard* guard_of(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kGuardKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* g = static_cast<Guard*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return g;
}

size_t c_stack_allowance() {
  // Half of the stack this thread may use: RLIMIT_STACK (threads get the same by default), or
  // 8 MiB when unlimited; never more than 16 MiB.
  rlimit rl{};
  size_t total = 8u << 20;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) total = static_cast<size_t>(rl.rlim_cur);
  if (total > (32u << 20)) total = 32u << 20;
  return total / 2;
}

// "file:line: " of the innermost frame of the recipe's chunk on the stack ("" when none).
std::string recipe_line(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, kRecipeChunkKey);
  const std::string chunk = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  if (chunk.empty()) return "";
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.source && chunk == ar.source && ar.currentline > 0)
      return chunk.substr(1) + ":" + std::to_string(ar.currentline) + ": ";
  }
  return "";
}

std::string mib_text(size_t bytes);

// Records a limit as hit (sticky: see Guard::limit_hit) and raises it, marked as an engine limit
// (LuaFailure::limit).
[[noreturn]] void raise_sticky(lua_State* L, Guard* g, ExitCode code, const std::string& message) {
  if (g && !g->limit_hit && g->calls > 0) {
    g->limit_hit = true;
    g->limit_code = code;
    {
      std::lock_guard<std::mutex> lk(g->c_mu);
      g->limit_message = recipe_line(L) + message;
    }
    g->limit_code_a = static_cast<int>(code);
    g->limit_hit_ns = now_ns();
  }
  lua::raise(L, code, message, true);
}

[[noreturn]] void raise_limit(lua_State* L, const std::string& message) {
  raise_sticky(L, guard_of(L), ExitCode::runtime, message);
}

// A limit hit earlier in this call is raised again wherever Lua goes next.
void reraise_sticky(lua_State* L, Guard* g) {
  if (g && g->limit_hit && g->calls > 0) lua::raise(L, g->limit_code, g->limit_message, true);
}

// Raises a Lua error when the C stack below the outermost LuaVm::call is deeper than allowed.
void check_c_stack(lua_State* L, Guard* g) {
  const char probe = 0;
  if (g && g->stack_base && g->stack_base > &probe && static_cast<size_t>(g->stack_base - &probe) > g->stack_limit)
    raise_limit(L,
                "C stack overflow: recursion through C functions (a string.gsub callback or __index that calls "
                "gsub, nested coroutines) went deeper than " +
                    std::to_string(g->stack_limit >> 10) + " KiB of C stack");
}

// Every 32 hooks (~6400 VM instructions): how long this rank has run Lua since its latest operation.
void check_lua_deadline(lua_State* L, Guard* g) {
  if (g->lua_limit_s <= 0 || ++g->lua_checks % 32) return;
  const Progress& p = Progress::instance();
  const int64_t now = now_ns();
  const uint64_t ops = p.ops_started();
  if (p.in_flight() || ops != g->lua_ops) {
    g->lua_ops = p.in_flight() ? ~uint64_t{0} : ops;
    g->lua_since = now;
    return;
  }
  const double s = static_cast<double>(now - g->lua_since) * 1e-9;
  if (s <= g->lua_limit_s) return;
  g->lua_since = now;  // a recipe that catches it is told again one limit later, not at once
  std::string where = "?";
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    where = std::string(ar.short_src) + ":" + std::to_string(ar.currentline);
  char text[256];
  std::snprintf(text, sizeof text,
                "busy in Lua for %.0f s with no operation (at %s): past the run's deadline (%g s) and %g s of "
                "grace (an endless loop?)",
                s, where.c_str(), g->deadline_s, kWatchdogGraceS);
  raise_sticky(L, g, ExitCode::hang_or_desync, std::string("timeout: ") + text);
}

void guard_hook(lua_State* L, lua_Debug*) {
  Guard* g = guard_of(L);
  if (!g) return;
  g->c_done.store(g->c_seq.load(std::memory_order_relaxed), std::memory_order_relaxed);  // in Lua, not in C
  reraise_sticky(L, g);
  if (g->mem_refused && g->calls > 0) {  // a table bomb whose "not enough memory" was caught
    g->mem_refused = false;
    raise_sticky(L, g, ExitCode::runtime,
                 "the recipe's Lua memory limit of " + mib_text(g->mem_limit) + " was reached (" + g->mem_basis +
                     "; the \"not enough memory\" error was caught, which does not lift the limit)");
  }
  check_c_stack(L, g);
  check_lua_deadline(L, g);
  if (g->budget && now_ns() > g->budget_deadline_ns.load(std::memory_order_relaxed)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", g->budget_s);
    raise_limit(L, std::string("the recipe's top level ran for more than ") + buf +
                       " s (an endless loop?): the top level only declares (cs.recipe{...}); work belongs in "
                       "recipe.run(ctx)");
  }
}

// The library functions through which Lua recurses on the C stack: string.gsub (a function or
// table replacement calls back into Lua) and coroutine.resume/wrap (LuaJIT's coroutines share
// the C stack). Compiled code runs no hooks, so these check the depth themselves, replaced in
// the library tables (string methods, too: the string metatable's __index is that table).
// Notes that the rank enters C function `what`, called from the caller's file:line, for the
// backstop's message; returns the note's number (noted_done ends it).
uint64_t note_c_call(lua_State* L, Guard* g, const char* what) {
  if (!g) return 0;
  lua_Debug ar;
  std::string where;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    where = std::string(ar.short_src) + ":" + std::to_string(ar.currentline);
  {
    std::lock_guard<std::mutex> lk(g->c_mu);
    g->c_what = std::string("inside ") + what + (where.empty() ? std::string() : " called at " + where);
  }
  return ++g->c_seq;
}

void noted_done(Guard* g, uint64_t seq) {
  if (g && seq) g->c_done.store(seq, std::memory_order_relaxed);
}

int guarded_call(lua_State* L) {
  Guard* g = guard_of(L);
  reraise_sticky(L, g);
  check_c_stack(L, g);
  const uint64_t seq = note_c_call(L, g, lua_tostring(L, lua_upvalueindex(2)));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  noted_done(g, seq);
  return lua_gettop(L);
}

int guarded_wrap(lua_State* L) {
  reraise_sticky(L, guard_of(L));
  check_c_stack(L, guard_of(L));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  lua_pushliteral(L, "a coroutine");
  lua_pushcclosure(L, guarded_call, 2);
  return 1;
}

void guard_library_function(lua_State* L, const char* lib, const char* fn, lua_CFunction guard) {
  lua_getglobal(L, lib);
  lua_getfield(L, -1, fn);
  lua_pushfstring(L, "%s.%s", lib, fn);
  lua_pushcclosure(L, guard, 2);
  lua_setfield(L, -2, fn);
  lua_pop(L, 1);
}

// native.budget(seconds | nil): start (or end) the time budget of the code that runs next.
int n_budget(lua_State* L) {
  Guard* g = guard_of(L);
  if (!g) return 0;
  if (lua_isnoneornil(L, 1)) {
    g->budget = false;
    g->budget_deadline_ns = 0;
    return 0;
  }
  const double s = luaL_checknumber(L, 1);
  if (!(s > 0 && s < 1e6)) luaL_argerror(L, 1, "seconds between 0 and 1e6 expected");
  g->budget = true;
  g->budget_s = s;
  g->budget_deadline_ns = deadline_ns(s);
  return 0;
}

// native.limit_hit() -> whether an engine limit was hit in the current call (sticky): what makes
// an error object with limit = true a limit. A sandbox can write that field into any table (or
// into an engine error it caught); only the guard knows a limit (issue 30: a rule file's check
// that raised {limit = true, code = 4} chose the run's exit code through every pcall).
int n_limit_hit(lua_State* L) {
  const Guard* g = guard_of(L);
  lua_pushboolean(L, g && g->limit_hit);
  return 1;
}

// Error handler: turns any error value into {code, message, traceback}; when the error did not
// arise in the recipe itself, prefixes the recipe's innermost file:line so the user sees which
// line of their recipe led to it.
int traceback_handler(lua_State* L) {
  const ExitCode code = lua::error_code(L, 1);
  std::string msg = lua::error_message(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, kRecipeChunkKey);
  const std::string chunk = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  if (!chunk.empty()) {
    const std::string file = chunk.substr(1);
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); ++level) {
      lua_getinfo(L, "Sl", &ar);
      if (ar.source && chunk == ar.source && ar.currentline > 0) {
        const std::string where = file + ":" + std::to_string(ar.currentline) + ":";
        if (msg.compare(0, where.size(), where) != 0) msg = where + " " + msg;
        break;
      }
    }
  }
  luaL_traceback(L, L, nullptr, 1);
  const std::string tb = lua_tostring(L, -1);
  lua_pop(L, 1);
  bool limit = false;
  if (lua_istable(L, 1)) {  // raw: an error object's __index is the recipe's code, never run here
    lua_pushliteral(L, "limit");
    lua_rawget(L, 1);
    limit = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, static_cast<int>(code));
  lua_setfield(L, -2, "code");
  lua_pushstring(L, msg.c_str());
  lua_setfield(L, -2, "message");
  lua_pushstring(L, tb.c_str());
  lua_setfield(L, -2, "traceback");
  lua_pushboolean(L, limit);
  lua_setfield(L, -2, "limit");
  return 1;
}

// The Lua heap's allocator: refuses what would pass the limit, so that a table bomb is a Lua
// error ("not enough memory", then the limit message below) instead of the OOM killer.
void* limited_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* g = static_cast<Guard*>(ud);
  if (nsize == 0) {
    std::free(ptr);
    g->mem_used -= std::min(g->mem_used, osize);
    return nullptr;
  }
  const size_t old = ptr ? osize : 0;
  if (g->mem_limit && nsize > old && g->mem_used - std::min(g->mem_used, old) + nsize > g->mem_limit) {
    g->mem_refused = true;
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (!p) return nullptr;
  g->mem_used = g->mem_used - std::min(g->mem_used, old) + nsize;
  return p;
}

// COMMSCRIPT_LUA_MEMORY (a size: "512M", "2G"; "0" or "none": no limit), else the rank's share
// of this host's memory (memory_share.hpp), at least 64 MiB.
void choose_memory_limit(Guard* g) {
  constexpr size_t kFloor = 64u << 20;
  if (const char* v = std::getenv("COMMSCRIPT_LUA_MEMORY"); v && *v) {
    const std::string text = v;
    if (text == "none" || text == "0") return;
    std::optional<uint64_t> n;
    try {
      n = parse_size(text);
    } catch (const Error&) {
    }
    if (n && *n > 0) {
      g->mem_limit = std::max<size_t>(static_cast<size_t>(*n), 1u << 20);
      g->mem_basis = "COMMSCRIPT_LUA_MEMORY=" + text;
      return;
    }
    // Not a size: say so (once per process) rather than silently run with another limit.
    static bool said = false;
    if (!said) {
      said = true;
      std::fprintf(stderr,
                   "commscript: COMMSCRIPT_LUA_MEMORY=%s is not a size (e.g. 512M, 2G, or none): ignored, the "
                   "recipe's Lua memory limit is this rank's share of the host's memory\n",
                   json_text(nlohmann::json(text)).c_str());
    }
  }
  const MemoryShare m = memory_share();
  if (!m.per_rank) return;
  g->mem_limit = std::max(m.per_rank, kFloor);
  g->mem_basis = "this rank's share of the host's memory: " + m.source + " / " + std::to_string(m.local_ranks) +
                 " local rank(s); COMMSCRIPT_LUA_MEMORY sets it";
}

// The profiler's sample (every 100 ms of CPU time, compiled code included): where the recipe's
// Lua code runs, for "busy in Lua at file:line" and the memory-limit message.
void sample_position(void*, lua_State* L, int, int vmstate) {
  if (vmstate == 'C') return;  // inside an engine call: the operation is named by the flight recorder
  size_t len = 0;
  const char* where = luaJIT_profile_dumpstack(L, "pl", 1, &len);
  if (where && len) Progress::instance().set_lua_site(where, len);
}

std::string mib_text(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f MiB", static_cast<double>(bytes) / 1048576.0);
  return b;
}

// ---- the backstop: limits that hold inside C ----
// The count hook runs only in interpreted Lua: inside a C function (a catastrophic pattern in
// string.match, a file read, a long loop of ours) or compiled code it never fires, and a limit
// once hit can still be sat on there. A thread per Lua state watches the same bounds from
// outside, kBackstopS later than the hook would act, and ends the process with the limit's exit
// code (the report saved first, as job::abort does), naming the rank and where it was.
constexpr double kBackstopS = 2.0;
constexpr int kBackstopPollMs = 100;

[[noreturn]] void backstop_fire(Guard* g, Session* s, ExitCode code, const std::string& text) {
  std::string where;
  {
    std::lock_guard<std::mutex> lk(g->c_mu);
    if (g->c_seq.load() != g->c_done.load()) where = g->c_what;
  }
  if (where.empty()) {
    const std::string site = Progress::instance().lua_site();
    where = site.empty() ? "in compiled Lua or a C function" : "last seen running Lua at " + site;
  }
  const std::string rank = s && s->size() > 1 ? "rank " + std::to_string(s->rank()) + ": " : std::string();
  const std::string msg =
      rank + text + " (" + where + "; the engine ended the process: the rank could not be " + "stopped where it was)";
  std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  std::fflush(stderr);
  if (s && !s->embedded) incidents::on_abort(code, "commscript: " + msg);
  std::fflush(nullptr);
  _exit(static_cast<int>(code));
}

void backstop_loop(Guard* g, Session* s) {
  int64_t since = now_ns();
  uint64_t ops = ~uint64_t{0};
  const int64_t grace = static_cast<int64_t>(kBackstopS * 1e9);
  while (true) {
    {
      std::unique_lock<std::mutex> lk(g->stop_mu);
      if (g->stop_cv.wait_for(lk, std::chrono::milliseconds(kBackstopPollMs), [g] { return g->stop; })) return;
    }
    const int64_t now = now_ns();
    const Progress& p = Progress::instance();
    const uint64_t n = p.ops_started();
    const bool active = g->active.load();
    if (!active || p.in_flight() || n != ops) {
      ops = p.in_flight() ? ~uint64_t{0} : n;
      since = now;
      if (!active) continue;
    }
    const int64_t budget = g->budget_deadline_ns.load();
    const int64_t hit = g->limit_hit_ns.load();
    char text[384];
    if (hit && now > hit + grace) {
      std::string m;
      {
        std::lock_guard<std::mutex> lk(g->c_mu);
        m = g->limit_message;
      }
      backstop_fire(g, s, static_cast<ExitCode>(g->limit_code_a.load()), m + "; the recipe went on after the limit");
    }
    if (budget && now > budget + grace) {
      std::snprintf(text, sizeof text,
                    "the recipe's top level ran for more than %g s (an endless loop?): the top level only declares "
                    "(cs.recipe{...}); work belongs in recipe.run(ctx)",
                    g->budget_s);
      backstop_fire(g, s, ExitCode::runtime, text);
    }
    if (g->lua_limit_s > 0 && static_cast<double>(now - since) * 1e-9 > g->lua_limit_s + kBackstopS) {
      std::snprintf(text, sizeof text,
                    "timeout: busy for %.0f s with no operation: past the run's deadline (%g s) and %g s of grace",
                    static_cast<double>(now - since) * 1e-9, g->deadline_s, kWatchdogGraceS);
      backstop_fire(g, s, ExitCode::hang_or_desync, text);
    }
  }
}

}  // namespace

void check_engine_memory(lua_State* L, size_t bytes, const std::string& what) {
  const Guard* g = guard_of(L);
  if (g && g->mem_limit && (bytes > g->mem_limit || g->mem_used > g->mem_limit - bytes))
    lua::raise(L, ExitCode::bad_input,
               what + " needs " + mib_text(bytes) + ", which with the recipe's Lua heap (" + mib_text(g->mem_used) +
                   ") passes this rank's memory limit of " + mib_text(g->mem_limit) + " (" + g->mem_basis +
                   "): fewer iterations or samples");
  const MemoryShare m = memory_share();
  if (m.available && bytes > m.available)
    lua::raise(L, ExitCode::bad_input,
               what + " needs " + mib_text(bytes) + ", more than this host has available (" + mib_text(m.available) +
                   ", " + m.source + "): fewer iterations or samples");
}

LuaVm::LuaVm(Session* session) : L_(nullptr), trusted_(session && session->trusted), guard_(std::make_unique<Guard>()) {
  choose_memory_limit(guard_.get());
  L_ = lua_newstate(limited_alloc, guard_.get());
  if (!L_) {  // a LuaJIT that must use its own allocator (x64 without GC64): no limit
    guard_->mem_limit = 0;
    L_ = luaL_newstate();
  }
  if (!L_) throw Error(ExitCode::internal, "cannot create a Lua state");
  luaL_openlibs(L_);
  // Our loader goes right after package.preload's. Sandboxed, it is the last one: no file-system
  // searcher is left, and package.path/cpath (from LUA_PATH/LUA_CPATH) are emptied. --trusted
  // keeps LuaJIT's searchers for other modules (luaunit in the tests), never for cs.* names.
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "loaders");
  if (!trusted_) {
    for (int i = static_cast<int>(lua_objlen(L_, -1)); i >= 2; --i) {
      lua_pushnil(L_);
      lua_rawseti(L_, -2, i);
    }
    lua_pushcfunction(L_, embedded_loader);
    lua_rawseti(L_, -2, 2);
    lua_pushstring(L_, "");
    lua_setfield(L_, -3, "path");
    lua_pushstring(L_, "");
    lua_setfield(L_, -3, "cpath");
    lua_pop(L_, 2);
  } else {
    lua_pop(L_, 2);
    lua_getglobal(L_, "table");
    lua_getfield(L_, -1, "insert");
    lua_getglobal(L_, "package");
    lua_getfield(L_, -1, "loaders");
    lua_remove(L_, -2);
    lua_pushinteger(L_, 2);
    lua_pushcfunction(L_, embedded_loader);
    lua_call(L_, 3, 0);
    lua_pop(L_, 1);
  }
  guard_->stack_limit = c_stack_allowance();
  if (session && session->timeout_s > 0) {
    guard_->deadline_s = session->timeout_s;
    guard_->lua_limit_s = session->timeout_s + kWatchdogGraceS;
  }
  lua_pushlightuserdata(L_, const_cast<char*>(&kGuardKey));
  lua_pushlightuserdata(L_, guard_.get());
  lua_rawset(L_, LUA_REGISTRYINDEX);
  lua_sethook(L_, guard_hook, LUA_MASKCOUNT, kHookEvery);
  guard_library_function(L_, "string", "gsub", guarded_call);
  guard_library_function(L_, "string", "find", guarded_call);
  guard_library_function(L_, "string", "match", guarded_call);
  guard_library_function(L_, "coroutine", "resume", guarded_call);
  guard_library_function(L_, "coroutine", "wrap", guarded_wrap);
  lua::open_native(L_, session);
  // Extras of the native module that belong to the VM: the top-level budget and --trusted.
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "loaded");
  lua_getfield(L_, -1, "commscript.native");
  if (lua_istable(L_, -1)) {
    lua_pushcfunction(L_, n_budget);
    lua_setfield(L_, -2, "budget");
    lua_pushcfunction(L_, n_limit_hit);
    lua_setfield(L_, -2, "limit_hit");
    lua_pushboolean(L_, trusted_);
    lua_pushcclosure(
        L_,
        [](lua_State* L) -> int {
          lua_pushvalue(L, lua_upvalueindex(1));
          return 1;
        },
        1);
    lua_setfield(L_, -2, "trusted");
  }
  lua_pop(L_, 3);
  // Embedded runs (the host's process) and states without a session (report.html, tests) have
  // no backstop: nothing there may end the process.
  if (session && !session->embedded) {
    Guard* g = guard_.get();
    g->backstop = std::thread([g, session] { backstop_loop(g, session); });
  }
}

LuaVm::~LuaVm() {
  if (guard_->backstop.joinable()) {
    {
      std::lock_guard<std::mutex> lk(guard_->stop_mu);
      guard_->stop = true;
    }
    guard_->stop_cv.notify_all();
    guard_->backstop.join();
  }
  if (sampling_) luaJIT_profile_stop(L_);
  lua_close(L_);
}

void LuaVm::sample_positions(bool on) {
  if (on == sampling_) return;
  if (on)
    luaJIT_profile_start(L_, "i100", sample_position, nullptr);
  else
    luaJIT_profile_stop(L_);
  sampling_ = on;
}

size_t LuaVm::memory_limit() const { return guard_->mem_limit; }

std::string LuaVm::memory_message() const {
  std::string where = Progress::instance().lua_site();
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.0f", static_cast<double>(guard_->mem_limit) / 1048576.0);
  return (where.empty() ? std::string() : where + ": ") + "the recipe's Lua memory limit of " + mib +
         " MiB was reached (" + guard_->mem_basis + ")";
}

void LuaVm::set_recipe_chunk(const std::string& chunkname) {
  lua_pushstring(L_, chunkname.c_str());
  lua_setfield(L_, LUA_REGISTRYINDEX, kRecipeChunkKey);
}

static void read_failure(lua_State* L, LuaFailure* f) {
  if (f) {
    f->code = lua::error_code(L, -1);
    if (lua_istable(L, -1)) {  // traceback_handler's table: its code was already judged there
      lua_getfield(L, -1, "code");
      if (lua_isnumber(L, -1) && lua_tointeger(L, -1) == static_cast<int>(ExitCode::output)) f->code = ExitCode::output;
      lua_pop(L, 1);
    }
    f->message = lua::error_message(L, -1);
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "traceback");
      if (lua_isstring(L, -1)) f->traceback = lua_tostring(L, -1);
      lua_pop(L, 1);
      lua_getfield(L, -1, "limit");
      f->limit = lua_toboolean(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

bool LuaVm::load(const std::string& source, const std::string& name, LuaFailure* f) {
  // Precompiled LuaJIT bytecode is never verified (a known way out of the VM; mutated files
  // crash it): sandboxed, only source text loads, --check included.
  if (!trusted_ && !source.empty() && source[0] == '\x1b') {
    if (f) {
      f->code = ExitCode::bad_input;
      f->message = name + ": precompiled Lua bytecode is refused: a sandboxed recipe must be Lua source (--trusted " +
                   "lifts it)";
    }
    return false;
  }
  if (luaL_loadbufferx(L_, source.data(), source.size(), ("@" + name).c_str(), trusted_ ? "bt" : "t") == 0) return true;
  if (f) {
    f->code = ExitCode::bad_input;
    f->message = lua_tostring(L_, -1);
  }
  lua_pop(L_, 1);
  return false;
}

bool LuaVm::call(int nargs, int nresults, LuaFailure* f) {
  const int base = lua_gettop(L_) - nargs;
  lua_pushcfunction(L_, traceback_handler);
  lua_insert(L_, base);
  if (guard_->calls++ == 0) {
    guard_->stack_base = static_cast<const char*>(__builtin_frame_address(0));
    guard_->active = true;
  }
  const int rc = lua_pcall(L_, nargs, nresults, base);
  if (--guard_->calls == 0) {
    guard_->stack_base = nullptr;
    guard_->active = false;
  }
  lua_remove(L_, base);
  if (guard_->calls == 0 && guard_->limit_hit) {
    // A limit was hit in this call: its outcome whatever Lua made of it afterwards (caught by a
    // pcall, turned into "error in error handling", or the call even returned normally).
    lua_settop(L_, base - 1);
    guard_->limit_hit = false;
    guard_->limit_hit_ns = 0;
    guard_->mem_refused = false;
    if (f) {
      f->code = guard_->limit_code;
      f->message = guard_->limit_message;
      // The timeout names where the loop ran; prefix the recipe's line when it has none yet.
      f->traceback.clear();
      f->limit = true;
    }
    return false;
  }
  if (guard_->mem_refused && (rc != 0 || guard_->calls == 0)) {
    // The memory limit, wherever the error was caught and rethrown (or swallowed: a pcall
    // around a table bomb still ends the run with the limit).
    guard_->mem_refused = false;
    lua_settop(L_, rc != 0 ? lua_gettop(L_) - 1 : base - 1);
    lua_gc(L_, LUA_GCCOLLECT, 0);
    if (f) {
      f->code = ExitCode::runtime;
      f->message = memory_message();
      f->traceback.clear();
      f->limit = true;
    }
    return false;
  }
  if (rc == 0) return true;
  if (rc == LUA_ERRMEM && f) {
    f->code = ExitCode::runtime;
    f->message = "Lua ran out of memory";
    lua_pop(L_, 1);
    return false;
  }
  read_failure(L_, f);
  return false;
}

bool LuaVm::require(const char* module, LuaFailure* f) {
  lua_getglobal(L_, "require");
  lua_pushstring(L_, module);
  return call(1, 1, f);
}

}  // namespace cs
