#include "recipe_run.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "bindings.hpp"
#include "control_plane.hpp"
#include "digest.hpp"
#include "embedded.hpp"
#include "guardian.hpp"
#include "host_name.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "progress.hpp"
#include "run_inputs.hpp"
#include "versions.hpp"

namespace cs {

namespace {

// Loads the recipe's declarations into `vm` and leaves [runner, recipe] on the stack. Errors
// while loading are bad input (exit 1).
bool declare(LuaVm& vm, const RecipeSource& src, bool trusted, LuaFailure* f) {
  lua_State* L = vm.state();
  if (!vm.require("cs.runner", f)) return false;  // [runner]
  vm.set_recipe_chunk("@" + src.name);
  lua_getfield(L, -1, "load");
  if (!vm.load(src.text, src.name, f)) {
    lua_pop(L, 2);
    return false;
  }
  lua_pushboolean(L, trusted);
  if (!vm.call(2, 1, f)) {  // [runner, recipe]
    if (f->code == ExitCode::runtime && !f->limit) f->code = ExitCode::bad_input;
    lua_pop(L, 1);
    return false;
  }
  lua_getfield(L, -2, "check_requires");
  lua_pushvalue(L, -2);
  if (!vm.call(1, 0, f)) {
    lua_pop(L, 2);
    return false;
  }
  return true;
}

// With [runner, recipe] on the stack: resolves the options and pushes opt.
bool resolve_options(LuaVm& vm, const Session& s, const std::vector<std::string>& rargs, LuaFailure* f) {
  lua_State* L = vm.state();
  lua_getfield(L, -2, "options");
  lua_pushvalue(L, -2);
  lua::push_json(L, s.config.section("options"));
  lua_createtable(L, static_cast<int>(rargs.size()), 0);
  for (size_t i = 0; i < rargs.size(); ++i) {
    lua_pushstring(L, rargs[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  if (!vm.call(3, 1, f)) {
    if (f->code == ExitCode::runtime) f->code = ExitCode::bad_input;
    return false;
  }
  return true;
}

std::string string_field(lua_State* L, int idx, const char* k) {
  lua_getfield(L, idx, k);
  std::string v = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  return v;
}

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

// The document cs.html renders: the report, less the per-pair results when a matrix section
// holds the pattern (half a million tables at 1024 ranks that the page does not draw).
void push_for_html(lua_State* L, const nlohmann::json& doc) {
  const auto results = doc.is_object() ? doc.find("results") : doc.end();
  if (!doc.is_object() || !doc.contains("matrix") || results == doc.end() || !results->is_array()) {
    lua::push_json(L, doc);
    return;
  }
  lua_createtable(L, 0, static_cast<int>(doc.size()));
  for (const auto& [key, value] : doc.items()) {
    if (key == "results") {
      lua_createtable(L, 0, 0);
      int i = 1;
      for (const auto& r : value) {
        const auto kind = r.is_object() ? r.find("kind") : r.end();
        if (kind != r.end() && kind->is_string() && kind->get_ref<const std::string&>() == "pair") continue;
        lua::push_json(L, r);
        lua_rawseti(L, -2, i++);
      }
    } else {
      lua::push_json(L, value);
    }
    lua_setfield(L, -2, key.c_str());
  }
}

// The page cs.html renders from `doc`, or "" and *why (a render error; cs.html absent from a
// COMMSCRIPT_STDLIB that lacks it is no error).
std::string render_html(LuaVm& vm, const nlohmann::json& doc, std::string* why) {
  lua_State* L = vm.state();
  const int top = lua_gettop(L);
  LuaFailure f;
  std::string page;
  if (vm.require("cs.html", &f)) {
    lua_getfield(L, -1, "render");
    push_for_html(L, doc);
    if (lua_isfunction(L, -2) && vm.call(1, 1, &f) && lua_isstring(L, -1)) {
      size_t n = 0;
      const char* html = lua_tolstring(L, -1, &n);
      page.assign(html, n);
    } else if (f.message.empty()) {
      f.message = "cs.html.render returned no page";
    }
  }
  if (page.empty() && why && f.message.find("no module 'cs.html'") == std::string::npos) *why = f.message;
  lua_settop(L, top);
  return page;
}

// Writes `page` to `path`, every write, the flush and the close checked: "" or the OS's reason.
std::string write_page(const std::filesystem::path& path, const std::string& page) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "cannot write " + path.string() + ": " + std::strerror(errno ? errno : EIO);
  int err = 0;
  errno = 0;
  if (std::fwrite(page.data(), 1, page.size(), f) != page.size() || std::fflush(f) != 0) err = errno ? errno : EIO;
  if (err == 0 && ::fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) err = errno ? errno : EIO;
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0) return "";
  std::error_code ec;
  std::filesystem::remove(path, ec);  // no 0-byte or half page left looking like a report
  return "cannot write " + path.string() + ": " + std::strerror(err);
}

// report.html from the finished report (cs.html); a page that fails to render is a warning,
// never a failed run: report.json is the contract. A page that cannot be written (disk full)
// is an unwritable output: returns why ("" when written or not rendered).
std::string write_html(LuaVm& vm, Report& report) {
  std::string why;
  const std::string page = render_html(vm, report.doc(), &why);
  if (!page.empty()) return write_page(report.dir() / "report.html", page);
  if (!why.empty()) std::fprintf(stderr, "commscript: warning: report.html not written: %s\n", why.c_str());
  return "";
}

// The same from a thread other than main (coordinator, signal thread): the main thread's Lua
// state may be in use, so a fresh, independent one renders the page.
std::string write_html_standalone(Session& s) {
  try {
    LuaVm vm(&s);
    return write_html(vm, *s.report);
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
  return "";
}

void write_html_on_the_way_out(Session& s) {
  const std::string why = write_html_standalone(s);
  if (!why.empty()) std::fprintf(stderr, "commscript: %s\n", why.c_str());
}

}  // namespace

bool render_html_file(const std::string& json_path, const std::string& html_path, std::string* why) {
  nlohmann::json doc;
  try {
    std::ifstream in(json_path, std::ios::binary);
    if (!in) throw Error(ExitCode::bad_input, "cannot open " + json_path);
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
  if (!doc.is_object()) {
    if (why) *why = json_path + " is not a JSON object";
    return false;
  }
  Session s;  // sandboxed: nothing of the recipe's state, nor --trusted
  LuaVm vm(&s);
  std::string w;
  const std::string page = render_html(vm, doc, &w);
  if (page.empty()) {
    if (why) *why = w.empty() ? "cs.html is not in this stdlib" : w;
    return false;
  }
  const std::string w2 = write_page(html_path, page);
  if (!w2.empty()) {
    if (why) *why = w2;
    return false;
  }
  return true;
}

namespace {

// Rank 0 chooses the output directory, everyone learns it and opens the report. False (after
// rank 0 said why) when any rank could not.
bool open_report(Session& s, const std::string& out, const std::string& recipe_name) {
  s.out_dir = s.world->broadcast(out.empty() ? default_out_dir(recipe_name) : out, 0);
  std::string error;
  try {
    s.report = std::make_unique<Report>(s.out_dir, s.rank == 0);
  } catch (const Error& e) {
    error = e.what();
  }
  if (job::lowest_failing_rank(!error.empty()) < 0) return true;
  if (!error.empty()) std::fprintf(stderr, "commscript: %s\n", error.c_str());
  return false;
}

// The report's header: versions, the recipe (with its source, for --replay), the run, the
// environment and which ranks run on which host.
void describe_run(Session& s, lua_State* L, const RecipeSource& src, const std::vector<std::string>& rargs,
                  const RunInfo& info) {
  const auto hosts = s.world->allgather(host_name());
  nlohmann::json per_host = nlohmann::json::object();
  for (size_t r = 0; r < hosts.size(); ++r) per_host[hosts[r]].push_back(r);
  auto& d = s.report->doc();
  d["commscript"] = nlohmann::json::parse(versions_json());
  d["recipe"] = {{"name", string_field(L, -2, "name")},
                 {"version", string_field(L, -2, "version")},
                 {"file", src.name},
                 {"bundled", src.bundled},
                 {"sha256", sha256_hex(src.text)},
                 {"source", src.text},
                 {"options", lua::to_json(L, -1)},
                 {"args", rargs}};
  if (d["recipe"]["options"].is_array() && d["recipe"]["options"].empty())
    d["recipe"]["options"] = nlohmann::json::object();
  d["run"] = {{"replay_of", info.replay_of.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.replay_of)},
              {"ranks", s.size},
              {"hosts", per_host.size()},
              {"backend", s.backend},
              {"launcher", s.launcher.is_null() ? nlohmann::json{{"kind", "mpi"}} : s.launcher},
              {"start", iso_time_now()},
              {"seed", s.seed},
              {"timeout_s", s.timeout_s},
              {"trusted", s.trusted},
              {"verify", s.verify},
              {"command", s.argv},
              {"config", s.config.data()},
              {"duration_s", nullptr},
              {"exit_code", nullptr}};
  if (s.embedded) d["run"]["embedded"] = s.host_mpi;
  d["env"] = env_snapshot();
  d["topology"] = {{"hosts", per_host}};
}

// With [runner, recipe, opt] on the stack: runner.run(recipe, comm, opt, info) -> exit code.
int call_runner(LuaVm& vm, Session& s) {
  lua_State* L = vm.state();
  lua_getfield(L, -3, "run");
  lua_pushvalue(L, -3);
  lua::push_communicator(L, s.world);
  lua_pushvalue(L, -4);
  lua_createtable(L, 0, 3);
  lua_pushnumber(L, static_cast<double>(s.seed));
  lua_setfield(L, -2, "seed");
  if (s.fail_below >= 0) {
    lua_pushnumber(L, s.fail_below);
    lua_setfield(L, -2, "fail_below");
  }
  if (!s.baseline.empty()) {
    lua::push_json(L, nlohmann::json::parse(s.baseline));
    lua_setfield(L, -2, "baseline");
  }
  LuaFailure f;
  if (!vm.call(4, 1, &f)) {
    f.message = coord::cap_message(f.message);  // a 50 MiB error message: its head, its tail, its length
    std::string msg =
        "commscript: " + (s.size > 1 ? "rank " + std::to_string(s.rank) + ": " : std::string()) + f.message;
    if (!f.traceback.empty() && f.code == ExitCode::runtime) msg += "\n" + f.traceback;
    if (!s.embedded) job::abort(f.code, msg);
    // Embedded: this run ends, the host's process does not. A rank that gave up because the
    // run was cancelled elsewhere is aftermath: the failure that cancelled it was reported.
    lua_settop(L, 3);
    Progress::instance().end();  // the operation that threw is no longer in flight
    if (const int cancelled = job::cancel_code()) return cancelled;
    std::fprintf(stderr, "%s\n", msg.c_str());
    s.last_error = msg;
    incidents::fail_run(f.code, msg);
    return static_cast<int>(f.code);
  }
  const int code = static_cast<int>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  return code;
}

// A recipe that survived a dropped rank shrank the world: what follows (agreement, result
// gathering) runs among the survivors.
void adopt_survivors(Session& s) {
  bool moved = false;
  while (auto next = s.world->successor()) {
    s.world = next;
    moved = true;
  }
  if (!moved) return;
  if (!job::mpi_active()) job::set_control(s.world.get());
  s.rank = s.world->rank();
  s.size = s.world->size();
}

// Rank 0 writes the final report.json and report.html. Returns the exit code to use.
int finish_report(Session& s, nlohmann::json fired, double secs, int code) {
  if (!s.report->writer()) return code;
  std::lock_guard<std::recursive_mutex> g(s.report->mutex());
  auto& d = s.report->doc();
  std::string html_error;
  d["chaos"] = std::move(fired);
  d["run"]["duration_s"] = secs;
  d["run"]["exit_code"] = code;
  // report.html is rendered (from a fresh Lua state, never the recipe's: a recipe that replaced
  // require("cs.html").render would write the shared page, <script> included) on a thread of its
  // own while this one writes report.json: both only read the document, which the lock held
  // here keeps others from editing; at 1024 ranks each takes about a second (docs/scale.md).
  std::thread html;
  try {
    html = std::thread([&s, &html_error] { html_error = write_html_standalone(s); });
  } catch (const std::system_error&) {  // no thread: rendered below, after report.json
  }
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{html};
  try {
    s.report->write();
    std::fprintf(stderr, "commscript: report written to %s/report.json\n", s.out_dir.c_str());
  } catch (const Error& e) {  // the output directory: disk full, gone, unwritable
    std::fprintf(stderr, "commscript: %s\n", e.what());
    code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commscript: %s\n", e.what());
    code = static_cast<int>(ExitCode::internal);
  }
  if (html.joinable())
    html.join();
  else
    html_error = write_html_standalone(s);
  // report.html could not be written (disk full): exit 6, and report.json says so too (written
  // again: the process's code and the report's agree).
  if (!html_error.empty() && code != static_cast<int>(ExitCode::output)) {
    std::fprintf(stderr, "commscript: %s\n", html_error.c_str());
    code = static_cast<int>(ExitCode::output);
    d["run"]["exit_code"] = code;
    d["incidents"].push_back({{"kind", "output"}, {"exit_code", code}, {"message", html_error}});
    try {
      s.report->write();
    } catch (const std::exception& e) {  // no room for a second copy: over the first one
      if (const int err = s.report->write_in_place())
        std::fprintf(stderr, "commscript: %s; nor could report.json be updated in place (%s)\n", e.what(),
                     std::strerror(err));
    }
  }
  return code;
}

}  // namespace

std::optional<RecipeSource> bundled_recipe(const std::string& path) {
  if (const embedded::File* f = embedded::find(path)) return RecipeSource{path, std::string(f->data, f->size), true};
  return std::nullopt;
}

std::optional<RecipeSource> find_recipe(const std::string& arg, std::string* why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(arg, ec)) {
    std::ifstream in(arg, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) {
      *why = arg + ": cannot read recipe file";
      return std::nullopt;
    }
    return RecipeSource{arg, ss.str(), false};
  }
  std::string base = fs::path(arg).filename().string();
  if (base.size() < 4 || base.substr(base.size() - 4) != ".lua") base += ".lua";
  const bool plain_name = arg.find('/') == std::string::npos;
  if (plain_name || arg == "recipes/" + base)
    if (auto r = bundled_recipe("recipes/" + base)) return r;
  if (fs::exists(arg, ec))
    *why = arg + ": not a regular file";
  else
    *why = arg + ": recipe file not found (try --list for the bundled recipes)";
  return std::nullopt;
}

int list_recipes() {
  Session s;
  std::printf("%-16s %-8s %s\n", "recipe", "version", "summary");
  for (const embedded::File* f = embedded::kFiles; f->path; ++f) {
    std::string p = f->path;
    if (p.rfind("recipes/", 0) != 0) continue;
    LuaVm vm(&s);
    LuaFailure fail;
    RecipeSource src{p, std::string(f->data, f->size), true};
    if (!declare(vm, src, false, &fail)) {
      std::printf("%-16s %-8s (does not load: %s)\n", p.c_str(), "?", fail.message.c_str());
      continue;
    }
    lua_State* L = vm.state();
    std::printf("%-16s %-8s %s\n", string_field(L, -1, "name").c_str(), string_field(L, -1, "version").c_str(),
                string_field(L, -1, "summary").c_str());
  }
  return 0;
}

int answer_without_ranks(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, bool help,
                         bool print) {
  LuaVm vm(&s);
  LuaFailure f;
  auto fail = [&] {
    if (print) std::fprintf(stderr, "commscript: %s\n", f.message.c_str());
    return static_cast<int>(f.code);
  };
  if (!declare(vm, src, s.trusted, &f)) return fail();
  lua_State* L = vm.state();
  if (help) {
    lua_getfield(L, -2, "help");
    lua_pushvalue(L, -2);
    if (!vm.call(1, 1, &f)) return fail();
    if (print) std::printf("%s\n", lua_tostring(L, -1));
    return 0;
  }
  if (!resolve_options(vm, s, rargs, &f)) return fail();
  if (print)
    std::printf("ok: %s %s (%s) loads, and its options are valid\n", string_field(L, -2, "name").c_str(),
                string_field(L, -2, "version").c_str(), src.name.c_str());
  return 0;
}

int run_recipe(Session& s, const RecipeSource& src, const std::vector<std::string>& rargs, const RunInfo& info) {
  LuaVm vm(&s);
  lua_State* L = vm.state();
  LuaFailure f;
  // Every rank loads and validates the same way; the lowest rank that failed says why.
  const bool ok = declare(vm, src, s.trusted, &f) && resolve_options(vm, s, rargs, &f);
  const int low = job::lowest_failing_rank(!ok);
  if (low >= 0) {
    if (s.rank == low)
      std::fprintf(stderr, "commscript: %s%s\n", s.size > 1 ? ("rank " + std::to_string(low) + ": ").c_str() : "",
                   f.message.c_str());
    s.last_error =
        !f.message.empty() ? f.message : "rank " + std::to_string(low) + " could not load the recipe or its options";
    return static_cast<int>(ExitCode::bad_input);
  }
  // Stack: [runner, recipe, opt]
  if (!open_report(s, info.out, string_field(L, -2, "name"))) {
    if (s.embedded) s.last_error = "cannot open the output directory " + s.out_dir;
    return static_cast<int>(ExitCode::output);  // an unwritable --out: exit 6, as every unwritable output
  }
  job::clear_cancel();
  const auto t_start = std::chrono::steady_clock::now();
  describe_run(s, L, src, rargs, info);
  // The rank's guardian (cli: forked before MPI) writes what this rank no longer can if it dies.
  guardian::watch(s.out_dir, s.rank, s.size, host_name());
  if (s.rank == 0) guardian::header(s.report->doc());
  incidents::attach(&s);
  incidents::set_html_renderer(write_html_on_the_way_out);
  job::set_before_abort(incidents::on_abort);

  int code = 0;
  nlohmann::json fired;
  {
    ControlPlane plane(s);
    Chaos::instance().install(info.chaos, s.seed);
    if (!s.embedded) vm.sample_positions(true);  // "busy in Lua at file:line" (a host may profile itself)
    code = call_runner(vm, s);
    vm.sample_positions(false);
    adopt_survivors(s);
    code = job::agree_max(code);
    fired = plane.fired_injections(s);
    Chaos::instance().clear();
    plane.stop_heartbeat();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    code = finish_report(s, std::move(fired), secs, code);
    guardian::release();  // the report is written: nothing left for the guardian to do
    lua_settop(L, 0);
  }
  // Embedded: every rank gets rank 0's report (on the control communicator: the world's may
  // hold requests a cancelled run abandoned).
  if (s.embedded) s.report_json = job::broadcast_from_root(s.rank == 0 ? json_text(s.report->doc()) : std::string());
  job::set_before_abort(nullptr);
  incidents::detach();
  return code;
}

}  // namespace cs
