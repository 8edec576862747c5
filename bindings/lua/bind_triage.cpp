// native.triage_* : what stdlib/cs/triage.lua needs from the engine to read a customer's
// artifacts. Reading is limited to the paths of --paths (and of `triage`'s positional words) on
// commscript's own command line (engine/core/triage_input.hpp), so a shared recipe cannot read
// files the user did not name.
//   triage_read(path) -> bytes                 the file, gzip inflated (InputError: exit 1)
//   triage_load(path, entry_fields) -> kind, v the file: "pickle", its data as Lua tables (a
//                                              Flight Recorder dump: never the bytes), or
//                                              "bytes", the file (gzip inflated)
//   triage_json(text, entry_fields) -> v       JSON text as Lua tables (null -> nil)
//   triage_list(dir) -> {paths}                regular files under a named directory, sorted
//   triage_kind(path) -> "file"|"directory"|nil
//   triage_unpickle(bytes) -> json text         the Flight Recorder pickle subset (pickle_subset.hpp)
//   triage_json_depth(text, stop) -> n          nesting depth of JSON text (checked before decoding)
// Decoded data goes straight into Lua tables (no JSON text, no DOM in between), and its size in
// Lua is counted as it is built: the reader and the tables together may take three times the
// input plus 40 MiB, refused before it is allocated (docs/triage.md, "Memory"). The dicts of a top-level "entries" list
// keep only `entry_fields` (the fields of a Flight Recorder entry triage reads: a dump's stack frames are never built).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "bindings.hpp"
#include "cli_options.hpp"
#include "lua_support.hpp"
#include "pickle_subset.hpp"
#include "triage_input.hpp"

namespace cs::lua {

namespace {

// Whether a word of commscript's own command line takes a value (--config FILE).
bool cli_takes_value(const std::string& word) {
  const CliOption* o = find_cli_option(word.c_str());
  return o && o->value;
}

void check_named(const std::string& path) {
  static const std::vector<std::string> named = triage::command_line_paths("--paths", cli_takes_value);
  if (!triage::path_named(path, named))
    throw InputError(path +
                     ": not named on the command line (triage reads only the files and directories "
                     "given to it, e.g. --paths " +
                     path + ")");
}

// Builds Lua values on the stack from decode events, counting the bytes they take in Lua (an
// estimate of LuaJIT's: a table's header, its array and hash slots, a string's header and
// text) and refusing past `budget` before the value is made.
class LuaBuilder : public PickleEvents {
 public:
  LuaBuilder(lua_State* L, size_t budget, const std::unordered_set<std::string>* entry_fields, std::string what)
      : L_(L), budget_(budget), entry_fields_(entry_fields), what_(std::move(what)) {
    take(kSeen * kShort * 2);  // the set of short strings seen, at its largest
  }

  // The pickle reader's memory and limit: the tables get what it left.
  void start(size_t reader_bytes, size_t max_memory) override {
    budget_ = max_memory > reader_bytes ? max_memory - reader_bytes : 0;
  }
  // Leaves: each counts its slot in its container (see leaf), a string also its header and text.
  void null() override {
    leaf([&] { lua_pushnil(L_); }, 0);
  }
  void boolean(bool v) override {
    leaf([&] { lua_pushboolean(L_, v); }, 0);
  }
  void integer(int64_t v) override {
    leaf([&] { lua_pushnumber(L_, static_cast<double>(v)); }, 0);
  }
  void real(double v) override {
    leaf([&] { lua_pushnumber(L_, v); }, 0);
  }
  void text(std::string_view v) override {
    leaf([&] { lua_pushlstring(L_, v.data(), v.size()); }, string_bytes(v));
  }
  void begin_list(size_t n) override { open(false, n); }
  void end_list() override { close(); }
  void begin_dict(size_t n) override { open(true, n); }
  // A key: a hash node (24 bytes, 40 counted: the hash part is a power of 2) and the string.
  void key(std::string_view k) override {
    if (skip_ > 0) return;  // inside a dropped value
    Frame& f = frames_.back();
    f.skip_value = f.kind == Frame::entry && !entry_fields_->count(std::string(k));
    f.key = f.kind == Frame::root ? std::string(k) : std::string();
    if (f.skip_value) return;
    take(40 + string_bytes(k));
    luaL_checkstack(L_, 4, "triage: decoding");
    lua_pushlstring(L_, k.data(), k.size());
  }
  void end_dict() override { close(); }

 private:
  struct Frame {
    enum Kind { root, entries, entry, other } kind;
    bool dict;
    bool presized = false;    // list: its array part made at its size (counted at its start)
    int next = 1;             // list: the next index
    bool skip_value = false;  // dict: the value of the current key is dropped
    std::string key;          // root: the current key
  };
  // A string's header and text; a short one seen before costs nothing (Lua keeps one copy of
  // equal strings), as far as the first kSeen short strings tell.
  static constexpr size_t kSeen = 16384, kShort = 64;
  size_t string_bytes(std::string_view v) {
    if (v.size() <= kShort) {
      if (seen_.count(std::string(v))) return 0;
      if (seen_.size() < kSeen) seen_.emplace(v);
    }
    return 24 + v.size();
  }
  bool skipping() const { return skip_ > 0 || (!frames_.empty() && frames_.back().dict && frames_.back().skip_value); }
  void take(size_t bytes) {
    used_ += bytes;
    if (used_ > budget_)
      throw InputError(what_ + ": its data takes more than the " + std::to_string(budget_ >> 20) +
                       " MiB left to it (of three times its size plus 40 MiB): too many values for triage "
                       "(split the dump, or pass fewer entries)");
  }
  // A value complete on the stack goes into its container.
  void place() {
    if (frames_.empty()) return;
    Frame& f = frames_.back();
    if (f.dict)
      lua_rawset(L_, -3);
    else
      lua_rawseti(L_, -2, f.next++);
  }
  // The slot of a value: in a presized list counted already; in another list 8 bytes, 16
  // counted (its array part grows by doubling); in a dict, the key's node holds it.
  size_t slot() const { return frames_.empty() || frames_.back().dict || frames_.back().presized ? 0 : 16; }
  template <class Push>
  void leaf(Push push, size_t bytes) {
    if (skipping()) return;
    take(bytes + slot());
    luaL_checkstack(L_, 4, "triage: decoding");
    push();
    place();
  }
  void open(bool dict, size_t n) {
    if (skipping()) {
      ++skip_;
      return;
    }
    Frame::Kind k = Frame::other;
    if (frames_.empty())
      k = dict ? Frame::root : Frame::other;
    else if (frames_.back().kind == Frame::root && frames_.back().key == "entries" && !dict)
      k = Frame::entries;
    else if (frames_.back().kind == Frame::entries && dict && entry_fields_)
      k = Frame::entry;
    const size_t slots = dict || n > (1u << 24) ? 0 : n;  // the reader's count: counted before it is made
    take(64 + slot() + 8 * slots);
    luaL_checkstack(L_, 4, "triage: decoding");
    if (dict)
      lua_createtable(L_, 0, 0);
    else
      lua_createtable(L_, static_cast<int>(slots), 0);
    frames_.push_back(Frame{k, dict, slots > 0, 1, false, {}});
  }
  void close() {
    if (skip_ > 0) {
      --skip_;
      return;
    }
    const bool dict = frames_.back().dict;
    frames_.pop_back();
    if (!dict) mark_array(L_, -1);
    place();
  }
  lua_State* L_;
  size_t budget_, used_ = 0;
  const std::unordered_set<std::string>* entry_fields_;
  std::string what_;
  std::vector<Frame> frames_;
  size_t skip_ = 0;  // depth inside a dropped value
  std::unordered_set<std::string> seen_;
};

// What decoding N bytes may take besides them (the pickle reader and the tables together):
// with the data itself and the process, triage stays within 4 N + 64 MiB.
size_t lua_budget(size_t input) { return 3 * input + (40u << 20); }

std::unordered_set<std::string> string_set(lua_State* L, int idx) {
  std::unordered_set<std::string> out;
  if (lua_type(L, idx) != LUA_TTABLE) return out;
  for (int i = 1;; ++i) {
    lua_rawgeti(L, idx, i);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      break;
    }
    size_t n = 0;
    const char* s = lua_tolstring(L, -1, &n);
    out.emplace(s, n);
    lua_pop(L, 1);
  }
  return out;
}

void push_pickle(lua_State* L, std::string_view data, const std::unordered_set<std::string>* fields,
                 const std::string& what) {
  const int top = lua_gettop(L);
  LuaBuilder b(L, lua_budget(data.size()), fields, what);
  try {
    pickle_subset_walk(data, b);
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
}

int n_triage_read(lua_State* L) {
  const std::string path = check_string(L, 1);
  check_named(path);
  const std::string data = triage::read_artifact(path);
  lua_pushlstring(L, data.data(), data.size());
  return 1;
}

int n_triage_load(lua_State* L) {
  const std::string path = check_string(L, 1);
  const auto fields = string_set(L, 2);
  check_named(path);
  std::string data = triage::read_artifact(path);
  if (!data.empty() && static_cast<unsigned char>(data[0]) == 0x80) {
    lua_pushliteral(L, "pickle");
    push_pickle(L, data, lua_type(L, 2) == LUA_TTABLE ? &fields : nullptr, "pickle");
    return 2;
  }
  lua_pushliteral(L, "bytes");
  lua_pushlstring(L, data.data(), data.size());
  return 2;
}

// nlohmann's SAX events into a LuaBuilder.
struct JsonSax {
  LuaBuilder& b;
  std::string error;
  bool null() { return b.null(), true; }
  bool boolean(bool v) { return b.boolean(v), true; }
  bool number_integer(int64_t v) { return b.integer(v), true; }
  bool number_unsigned(uint64_t v) { return b.real(static_cast<double>(v)), true; }
  bool number_float(double v, const std::string&) { return b.real(v), true; }
  bool string(std::string& v) { return b.text(v), true; }
  bool binary(nlohmann::json::binary_t&) { return b.null(), true; }
  bool start_object(size_t) { return b.begin_dict(0), true; }
  bool key(std::string& k) { return b.key(k), true; }
  bool end_object() { return b.end_dict(), true; }
  bool start_array(size_t) { return b.begin_list(0), true; }
  bool end_array() { return b.end_list(), true; }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }
};

int n_triage_json(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const auto fields = string_set(L, 2);
  const int top = lua_gettop(L);
  LuaBuilder b(L, lua_budget(n), lua_type(L, 2) == LUA_TTABLE ? &fields : nullptr, "JSON");
  JsonSax sax{b, {}};
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(s, s + n, &sax);
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
  if (!ok) {
    lua_settop(L, top);
    throw InputError("json_decode: " + sax.error);
  }
  return 1;
}

int n_triage_list(lua_State* L) {
  const std::string dir = check_string(L, 1);
  check_named(dir);
  const auto files = triage::list_files(dir);
  lua_createtable(L, static_cast<int>(files.size()), 0);
  int i = 1;
  for (const auto& f : files) {
    lua_pushlstring(L, f.data(), f.size());
    lua_rawseti(L, -2, i++);
  }
  return 1;
}

int n_triage_kind(lua_State* L) {
  const std::string kind = triage::path_kind(check_string(L, 1));
  if (kind.empty())
    lua_pushnil(L);
  else
    lua_pushstring(L, kind.c_str());
  return 1;
}

int n_triage_unpickle(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const std::string json = pickle_subset_to_json(std::string_view(s, n));
  lua_pushlstring(L, json.data(), json.size());
  return 1;
}

int n_triage_json_depth(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const auto stop = static_cast<size_t>(luaL_checkinteger(L, 2));
  lua_pushinteger(L, static_cast<lua_Integer>(json_nesting_depth(std::string_view(s, n), stop)));
  return 1;
}

}  // namespace

void register_triage(lua_State* L) {
  static const luaL_Reg fns[] = {{"triage_read", entry<n_triage_read>},
                                 {"triage_load", entry<n_triage_load>},
                                 {"triage_json", entry<n_triage_json>},
                                 {"triage_list", entry<n_triage_list>},
                                 {"triage_kind", entry<n_triage_kind>},
                                 {"triage_unpickle", entry<n_triage_unpickle>},
                                 {"triage_json_depth", entry<n_triage_json_depth>},
                                 {nullptr, nullptr}};
  for (const luaL_Reg* f = fns; f->name; ++f) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, -2, f->name);
  }
}

}  // namespace cs::lua
