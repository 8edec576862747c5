// The env audit's parsers (cs.env: strtoll and the per-kind checks, the combination rules, the
// NCCL config-file parser, the cross-rank comparison and the table), run in a Lua state made as
// the engine makes one (cs::LuaVm: the sandbox, the embedded stdlib, the memory limit).
// Input, in parts separated by NUL bytes: rank 0's environment (NAME=value lines), the text of
// an NCCL config file, rank 1's environment, and the NCCL version checked against (used when it
// is one the env_audit recipe accepts: x.y[.z]).
// A bug is a crash, a hang (-timeout) or any Lua error: these functions take whatever a user's
// environment and config files hold, and must answer with findings.
// One state serves every input (as one serves a rank's whole run): making one and loading cs.env
// per input ran 6 inputs a second.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lua_coverage.hpp"
#include "lua_vm.hpp"
#include "session.hpp"

namespace {

const char kDriver[] = R"(local vars, conf_text, vars2, version, conf_path = ...
local env = require "cs.env"
if not version:match("^%d+%.%d+[%.%d]*$") then version = nil end
local opts = { nccl_version = version, strict = true, interfaces = { "lo", "eth0", "ib0" },
               hcas = { "mlx5_0", "mlx5_1" }, nvlink = true,
               file_exists = function(p) return p == conf_path end }
local f1 = env.audit(vars, opts)
local f1b = env.audit(vars2, { per_var_only = true })
env.parse_conf(conf_text, "fuzz.conf")
-- What NCCL ends up with: the config text as the system file and as NCCL_CONF_FILE when that is
-- set (never another file of this machine), no user file.
local v = {}
for k, x in pairs(vars) do v[k] = x end
if v.NCCL_CONF_FILE ~= nil then v.NCCL_CONF_FILE = conf_path end
local fo = {}
for k, x in pairs(opts) do fo[k] = x end
fo.system_file, fo.home, fo.extra = conf_path, "/nonexistent-commscript-fuzz", { conf_path .. ".none" }
local f2 = env.full_audit(v, fo)
local f3 = env.compare({ env.snapshot(vars), env.snapshot(vars2) }, { hosts = { "a", "b" } })
local f4 = env.dedupe({ f1, f1b }, { hosts = { "a", "a" } })
env.format_table(f2, 1)
env.format_table(f3, 2)
env.format_table(f4, 2)
for k, x in pairs(vars) do
  env.strtoll(x)
  env.strtoll(x, 16)
  env.parse_int(x)
  env.parse_iflist(x)
  env.iflist_matches(env.parse_iflist(x), "eth0")
  if version then env.version_lt(version, x) end
end
)";

std::vector<std::string> parts_of(const uint8_t* data, size_t size) {
  std::vector<std::string> p(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && p.size() < 4)
      p.emplace_back();
    else
      p.back().push_back(static_cast<char>(data[i]));
  }
  p.resize(4);
  return p;
}

// NAME=value lines into a Lua table (the first '=' splits, as the environment does).
void push_vars(lua_State* L, const std::string& text) {
  lua_newtable(L);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    const size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0) {
      lua_pushlstring(L, line.data(), eq);
      lua_pushlstring(L, line.data() + eq + 1, line.size() - eq - 1);
      lua_rawset(L, -3);
    }
    pos = nl + 1;
  }
}

cs::Session* g_session = nullptr;
cs::LuaVm* g_vm = nullptr;
int g_driver = LUA_NOREF;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_session = new cs::Session;
  g_vm = new cs::LuaVm(g_session);
  lua_State* L = g_vm->state();
  fuzz_lua::install(L);
  cs::LuaFailure f;
  if (!g_vm->require("cs.env", &f) || !g_vm->load(kDriver, "fuzz_env_driver.lua", &f)) {
    std::fprintf(stderr, "fuzz_env: cannot set up: %s\n", f.message.c_str());
    std::abort();
  }
  g_driver = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string conf_path = "/tmp/commscript-fuzz-env-" + std::to_string(getpid()) + ".conf";
  const std::vector<std::string> p = parts_of(data, size);
  if (FILE* f = std::fopen(conf_path.c_str(), "wb")) {
    std::fwrite(p[1].data(), 1, p[1].size(), f);
    std::fclose(f);
  } else {
    return 0;
  }
  lua_State* L = g_vm->state();
  cs::LuaFailure f;
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_driver);
  push_vars(L, p[0]);
  lua_pushlstring(L, p[1].data(), p[1].size());
  push_vars(L, p[2]);
  lua_pushlstring(L, p[3].data(), p[3].size());
  lua_pushstring(L, conf_path.c_str());
  if (!g_vm->call(5, 0, &f) && !f.limit) {
    std::fprintf(stderr, "fuzz_env: BUG: the env audit raised an error: %s\n%s\n", f.message.c_str(),
                 f.traceback.c_str());
    std::abort();
  }
  lua_settop(L, 0);
  return 0;
}
