#pragma once
// One Lua state per rank, driven only from the rank's main thread. Stdlib modules come from the
// binary (or from $COMMSCRIPT_STDLIB, a directory, when set: for development).
#include <lua.hpp>
#include <memory>
#include <string>

#include "error.hpp"

namespace cs {
class Session;
struct Guard;

struct LuaFailure {
  ExitCode code = ExitCode::runtime;
  std::string message;    // "recipes/x.lua:12: ..."
  std::string traceback;  // "stack traceback: ..."
  // An engine limit ended the code (C-stack depth, the top level's time budget): a recipe error
  // (exit 2) even where other errors of loading are bad input.
  bool limit = false;
};

// Engine memory sized by a recipe's numbers (the per-iteration samples of --iters/--samples):
// refused before it is allocated, with a Lua error (exit 1, bad input) naming `what`, when
// `bytes` and the Lua heap together pass the rank's memory limit (COMMSCRIPT_LUA_MEMORY, else
// the rank's share of the host's memory, cgroup included), or `bytes` pass what the host (or
// its cgroup) has available now, the figure cs.tensor checks. Never an OOM kill mid-run.
void check_engine_memory(lua_State* L, size_t bytes, const std::string& what);

class LuaVm {
 public:
  explicit LuaVm(Session* session);
  ~LuaVm();
  LuaVm(const LuaVm&) = delete;
  LuaVm& operator=(const LuaVm&) = delete;
  lua_State* state() const { return L_; }

  // Compiles `source` as chunk `@name` and pushes the function. Syntax errors: bad_input.
  // Source text only (no bytecode) unless the session is --trusted.
  bool load(const std::string& source, const std::string& name, LuaFailure* f);
  // Calls the function below its nargs arguments under the traceback handler.
  bool call(int nargs, int nresults, LuaFailure* f);
  // require(module) and leave it on the stack.
  bool require(const char* module, LuaFailure* f);
  // Frames of this chunk name give the "recipe file:line" prefix of runtime errors.
  void set_recipe_chunk(const std::string& chunkname);
  // Samples where the Lua code runs (LuaJIT's profiler, every 100 ms of CPU time, compiled code
  // too) into the flight recorder's Lua position (progress.hpp). One state per process at a time.
  void sample_positions(bool on);
  // The Lua heap's limit in bytes (0: none); a recipe that passes it ends with memory_message().
  size_t memory_limit() const;
  std::string memory_message() const;

 private:
  lua_State* L_;
  bool trusted_;
  std::unique_ptr<Guard> guard_;
  bool sampling_ = false;  // C-stack depth and top-level budget (lua_vm.cpp)
};

}  // namespace cs
