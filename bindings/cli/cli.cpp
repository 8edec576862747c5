// The `commscript` command: parse the command line, load the config and the recipe, start the
// backend, run the recipe on every rank, write the report, and turn the outcome into the exit
// code of the contract. Bad input is refused before anything communicates.
#include "cli.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bindings.hpp"
#include "chaos.hpp"
#include "commscript_version.hpp"
#include "coordinator.hpp"
#include "digest.hpp"
#include "embedded.hpp"
#include "host_name.hpp"
#include "job.hpp"
#include "lua_support.hpp"
#include "lua_vm.hpp"
#include "mpi_communicator.hpp"
#ifdef COMMSCRIPT_HAVE_NCCL
#include "nccl_communicator.hpp"
#endif
#include "progress.hpp"
#include "self_communicator.hpp"
#include "session.hpp"
#include "versions.hpp"
#include "watchdog.hpp"

namespace cs {

namespace {

struct Args {
  std::string config_file, out, backend = "mpi", replay, baseline;
  double fail_below = -1;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  bool seed_given = false;
  double timeout = -1;
  bool version = false, list = false, check = false, trusted = false;
  std::vector<std::string> rest;  // RECIPE [recipe options]
};

struct RecipeSource {
  std::string name;  // as shown in messages: the path, or "recipes/x.lua" when bundled
  std::string text;
  bool bundled = false;
};

// Tells what differs between the recorded run and this machine (printed by the launcher's rank
// 0): the run still uses the recorded recipe source, options, config and seed.
void replay_warnings(const nlohmann::json& rep, const struct RecipeSource& src, const std::string& file);

// Who prints errors found before MPI starts: the launcher's rank 0 (or a process on its own).
bool prints_early() { return job::launcher_rank() <= 0; }

int fail_early(ExitCode code, const std::string& msg) {
  if (prints_early()) std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  return static_cast<int>(code);
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
  // A bundled recipe by name ("bw_sweep") or by its path in the source tree ("recipes/bw_sweep.lua").
  std::string base = fs::path(arg).filename().string();
  if (base.size() < 4 || base.substr(base.size() - 4) != ".lua") base += ".lua";
  const bool plain_name = arg.find('/') == std::string::npos;
  if (plain_name || arg == "recipes/" + base) {
    if (const embedded::File* f = embedded::find("recipes/" + base))
      return RecipeSource{"recipes/" + base, std::string(f->data, f->size), true};
  }
  if (fs::exists(arg, ec))
    *why = arg + ": not a regular file";
  else
    *why = arg + ": recipe file not found (try --list for the bundled recipes)";
  return std::nullopt;
}

void replay_warnings(const nlohmann::json& rep, const RecipeSource& src, const std::string& file) {
  if (job::launcher_rank() > 0) return;
  auto warn = [&](const std::string& m) {
    std::fprintf(stderr, "commscript: replay %s: warning: %s\n", file.c_str(), m.c_str());
  };
  const std::string was = rep.value("commscript", nlohmann::json::object()).value("version", "?");
  if (was != COMMSCRIPT_VERSION) warn("recorded with commscript " + was + ", this is " + COMMSCRIPT_VERSION);
  const int ranks = rep.value("run", nlohmann::json::object()).value("ranks", 0);
  const int now = job::launcher_rank() < 0 ? 1 : [] {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
      if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
    return 1;
  }();
  if (ranks && ranks != now)
    warn("recorded on " + std::to_string(ranks) + " ranks, now running on " + std::to_string(now));
  const std::string sha = rep["recipe"].value("sha256", "");
  if (sha.empty())
    warn("the report records no sha256 of the recipe source");
  else if (sha != sha256_hex(src.text))
    warn("the recorded source does not match its recorded sha256");
  std::error_code ec;
  if (!src.bundled && std::filesystem::is_regular_file(src.name, ec)) {
    std::ifstream in(src.name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (sha256_hex(ss.str()) != sha)
      warn(src.name + " has changed since the recorded run; replaying the recorded source");
  } else if (src.bundled) {
    if (const embedded::File* f = embedded::find(src.name); f && sha256_hex(std::string(f->data, f->size)) != sha)
      warn("the bundled " + src.name + " differs from the recorded one; replaying the recorded source");
  }
}

// Loads the recipe's declarations into `vm` and leaves the recipe table on the stack, below
// the runner module. Returns false with the failure filled.
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
  if (!vm.call(2, 1, f)) {                                            // [runner, recipe]
    if (f->code == ExitCode::runtime) f->code = ExitCode::bad_input;  // errors while loading: exit 1
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

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

nlohmann::json env_snapshot() {
  nlohmann::json e = nlohmann::json::object();
  for (char** p = environ; p && *p; ++p) {
    std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    // Launcher credentials are not configuration and do not belong in a shared report.
    if (k.find("precondition_transports") != std::string::npos || k.find("SECRET") != std::string::npos ||
        k.find("TOKEN") != std::string::npos || k.find("PASSWORD") != std::string::npos)
      continue;
    for (const char* prefix : {"NCCL_", "UCX_", "OMPI_", "TORCH_NCCL_", "CUDA_", "COMMSCRIPT_", "MPICH_", "PMIX_MCA_"})
      if (k.rfind(prefix, 0) == 0) {
        e[k] = kv.substr(eq + 1);
        break;
      }
  }
  return e;
}

// Threads other than main (signal thread, coordinator, the abort path) reach the run through
// these; they are set once the report exists.
std::atomic<Session*> g_session{nullptr};
std::atomic<Coordinator*> g_coordinator{nullptr};
std::atomic<HeartbeatClient*> g_heartbeat{nullptr};
std::atomic<bool> g_outcome_saved{false};  // an error or timeout verdict is in report.json

// report.html from the finished report (cs.html); a page that fails to render is a warning,
// never a failed run: report.json is the contract.
void write_html(LuaVm& vm, Report& report) {
  lua_State* L = vm.state();
  const int top = lua_gettop(L);
  LuaFailure f;
  if (vm.require("cs.html", &f)) {
    lua_getfield(L, -1, "render");
    lua::push_json(L, report.doc());
    if (lua_isfunction(L, -2) && vm.call(1, 1, &f) && lua_isstring(L, -1)) {
      size_t n = 0;
      const char* html = lua_tolstring(L, -1, &n);
      std::ofstream(report.dir() / "report.html", std::ios::binary).write(html, static_cast<std::streamsize>(n));
      lua_settop(L, top);
      return;
    }
  }
  if (!f.message.empty() && f.message.find("no module 'cs.html'") == std::string::npos)
    std::fprintf(stderr, "commscript: warning: report.html not written: %s\n", f.message.c_str());
  lua_settop(L, top);
}

// The same from a thread other than main (coordinator, signal handler): the main thread's Lua
// state may be in use, so a fresh, independent one renders the page.
void write_html_standalone(Session& s) {
  try {
    LuaVm vm(&s);
    write_html(vm, *s.report);
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
}

// Adds an incident and saves report.json (rank 0 only). Safe from any thread.
void save_report_with(const nlohmann::json& incident, int exit_code) {
  Session* s = g_session.load();
  if (!s || !s->report || !s->report->writer()) return;
  try {
    std::lock_guard<std::recursive_mutex> g(s->report->mutex());
    auto& d = s->report->doc();
    d["incidents"].push_back(incident);
    if (Coordinator* c = g_coordinator.load()) {
      const auto ev = c->events();
      if (!ev.empty()) d["chaos"] = ev;
    }
    d["run"]["exit_code"] = exit_code >= 0 ? nlohmann::json(exit_code) : nlohmann::json(nullptr);
    s->report->write();
    write_html_standalone(*s);
    if (incident.value("kind", "") != "killed") g_outcome_saved = true;
  } catch (const std::exception&) {  // on the way out: never throw from here
  }
}

// job::abort's hook: a recipe error on this rank. Rank 0 saves the report itself; any other
// rank asks the coordinator (rank 0's thread, outside MPI) to save it before MPI_Abort.
void save_partial_report(ExitCode code, const std::string& message) {
  Session* s = g_session.load();
  if (!s) return;
  if (s->rank == 0) {
    save_report_with({{"kind", "error"}, {"rank", 0}, {"exit_code", static_cast<int>(code)}, {"message", message}},
                     static_cast<int>(code));
  } else if (HeartbeatClient* hb = g_heartbeat.load()) {
    hb->report_failure(static_cast<int>(code), message, 2000);
  }
}

void dump_own_ring(const Session& s) {
  if (s.out_dir.empty()) return;
  std::error_code ec;
  const auto dir = std::filesystem::path(s.out_dir) / "flight";
  std::filesystem::create_directories(dir, ec);
  nlohmann::json ops = nlohmann::json::array();
  const int64_t now = now_ns();
  for (const OpRecord& r : Progress::instance().recent())
    ops.push_back({{"seq", r.seq},
                   {"op", collective_name(r.coll)},
                   {"bytes", r.bytes},
                   {"comm", std::string(r.comm_name())},
                   {"started_ms_ago", static_cast<double>(now - r.start_ns) * 1e-6}});
  const auto file = dir / ("rank-" + std::to_string(s.rank) + ".json");
  if (std::filesystem::exists(file, ec)) return;  // the coordinator's richer copy is already there
  std::ofstream(file) << nlohmann::json{{"rank", s.rank}, {"host", host_name()}, {"ops", ops}}.dump(1) << "\n";
}

// SIGTERM/SIGINT/SIGHUP arrive here (blocked in every other thread): mpirun sends SIGTERM to
// every rank when one dies or the job is cancelled. Record what we know, then end.
void signal_loop(sigset_t set) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  if (Session* s = g_session.load()) {
    // Ended by a signal is not dying on its own: say so to the coordinator first.
    if (HeartbeatClient* hb = g_heartbeat.load()) hb->send_goodbye("signal");
    dump_own_ring(*s);
    // The SIGTERM that follows a recipe error or a timeout verdict is the aftermath, not news.
    if (s->rank == 0 && !g_outcome_saved) {
      nlohmann::json inc = {{"kind", "killed"},
                            {"signal", sig == SIGTERM  ? "SIGTERM"
                                       : sig == SIGINT ? "SIGINT"
                                                       : "SIGHUP"},
                            {"message",
                             "the job was ended by a signal before the recipe finished (mpirun sends SIGTERM "
                             "to every rank when one of them dies)"}};
      if (Coordinator* c = g_coordinator.load()) {
        const auto ranks = c->snapshot();
        nlohmann::json dead = nlohmann::json::array();
        for (const auto& r : ranks)
          if (r["state"].get<std::string>().rfind("dead", 0) == 0)
            dead.push_back({{"rank", r["rank"]}, {"host", r["host"]}});
        inc["dead_ranks"] = dead;
        inc["ranks"] = ranks;
        if (!dead.empty()) {
          std::string list;
          for (const auto& d : dead)
            list += (list.empty() ? "" : ", ") + std::to_string(d["rank"].get<int>()) + " (host " +
                    d["host"].get<std::string>() + ")";
          inc["message"] = "rank(s) " + list + " died; mpirun ended the others";
          std::fprintf(stderr, "commscript: rank(s) %s died; partial report in %s/report.json\n", list.c_str(),
                       s->out_dir.c_str());
        }
      }
      save_report_with(inc, 128 + sig);
    } else if (s->rank != 0) {
      // mpirun kills everyone as soon as one rank exits: linger so rank 0 can save the report.
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
    }
  }
  std::fflush(nullptr);
  _exit(128 + sig);
}

}  // namespace

int cli_main(int argc, char** argv) {
  Args a;
  CLI::App app{"commscript: diagnose, benchmark and stress-test distributed training communication", "commscript"};
  app.footer(
      "usage: commscript [options] RECIPE[.lua] [recipe options]\n"
      "       commscript RECIPE --help     prints the recipe's own options\n"
      "exit codes: 0 ok, 1 bad input, 2 recipe error, 3 health verdict failed,\n"
      "            4 data corruption, 5 timeout/hang, 70 internal error");
  app.prefix_command();  // everything from RECIPE on belongs to the recipe
  app.add_flag("--version", a.version, "print versions (commscript, MPI, LuaJIT, CUDA/NCCL) and exit");
  app.add_option("--config", a.config_file, "TOML file: [options], [env], [run] ...");
  app.add_option("--set", a.sets, "override a config value: key=value (repeatable; no section means options.KEY)")
      ->allow_extra_args(false);  // one value per --set: the next word may be the recipe
  app.add_option("--out", a.out, "output directory (default: commscript-runs/<recipe>-<time>-<pid>)");
  app.add_option("--backend", a.backend, "communication backend")->check(CLI::IsMember({"mpi", "self", "nccl"}));
  app.add_option("--seed", a.seed, "seed for everything random in the run")->each([&](const std::string&) {
    a.seed_given = true;
  });
  app.add_option("--timeout", a.timeout, "deadline of each operation in seconds (0: none; default 300)")
      ->check([](const std::string& v) {
        return v.find('-') == std::string::npos ? std::string() : "must not be negative";
      });
  app.add_flag("--list", a.list, "list the bundled recipes with versions and summaries");
  app.add_flag("--check", a.check, "load and validate the recipe and its options, run nothing");
  app.add_flag("--trusted", a.trusted, "lift the recipe sandbox (os, io, ffi, require of any module)");
  app.add_option("--baseline", a.baseline, "an earlier report.json: regressions beyond the tolerance become findings");
  app.add_option("--fail-below", a.fail_below, "exit 3 when the scorecard's total is below this (0-100)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--replay", a.replay,
                 "run again what an earlier report.json recorded (recipe source, options, config, chaos, seed)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (prints_early()) std::fprintf(stderr, "commscript: %s\n(see commscript --help)\n", e.what());
    return 1;
  }
  a.rest = app.remaining();

  if (a.version) {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  if (a.list) return list_recipes();
  // --replay: everything comes from the report; the command line may only add --out and
  // commscript's own options.
  nlohmann::json replayed;
  if (!a.replay.empty()) {
    if (!a.rest.empty())
      return fail_early(ExitCode::bad_input,
                        "--replay takes the recipe and its options from the report; remove '" + a.rest[0] + "'");
    std::ifstream in(a.replay);
    if (!in) return fail_early(ExitCode::bad_input, a.replay + ": cannot open report");
    try {
      replayed = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      return fail_early(ExitCode::bad_input, a.replay + ": not JSON: " + e.what());
    }
    if (!replayed.is_object() || replayed.value("schema", "") != "commscript.report/1" ||
        !replayed.contains("recipe") || !replayed["recipe"].contains("source"))
      return fail_early(ExitCode::bad_input, a.replay + ": not a commscript.report/1 with the recipe's source");
  }
  if (!a.rest.empty() && a.rest[0].size() > 1 && a.rest[0][0] == '-')
    return fail_early(ExitCode::bad_input, "unknown option '" + a.rest[0] + "' (see commscript --help)");
  if (a.rest.empty() && replayed.is_null())
    return fail_early(ExitCode::bad_input,
                      "no recipe given (usage: commscript [options] RECIPE.lua; --list shows the bundled ones)");
#ifndef COMMSCRIPT_HAVE_NCCL
  if (a.backend == "nccl")
    return fail_early(ExitCode::bad_input, "--backend nccl: this commscript was built without CUDA/NCCL");
#endif

  Session s;
  s.backend = a.backend;
  s.trusted = a.trusted;
  s.fail_below = a.fail_below;
  if (!a.baseline.empty()) {
    std::ifstream in(a.baseline);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return fail_early(ExitCode::bad_input, "--baseline " + a.baseline + ": cannot read");
    try {
      const auto b = nlohmann::json::parse(ss.str());
      if (b.value("schema", "") != "commscript.report/1")
        return fail_early(ExitCode::bad_input, "--baseline " + a.baseline + ": not a commscript.report/1");
    } catch (const nlohmann::json::exception& e) {
      return fail_early(ExitCode::bad_input, "--baseline " + a.baseline + ": not JSON: " + e.what());
    }
    s.baseline = ss.str();
  }
  s.argv.assign(argv, argv + argc);

  // Config before anything else: its [env] must be in place before MPI or NCCL read theirs.
  try {
    if (!replayed.is_null()) {
      const auto& run = replayed.value("run", nlohmann::json::object());
      s.config = Config::from_json(run.value("config", nlohmann::json::object()), a.replay);
      if (!a.seed_given && run.contains("seed") && run["seed"].is_number_unsigned()) {
        a.seed = run["seed"].get<uint64_t>();
        a.seed_given = true;
      }
      if (a.timeout < 0 && run.contains("timeout_s") && run["timeout_s"].is_number()) a.timeout = run["timeout_s"];
      if (app.count("--backend") == 0 && run.contains("backend") && run["backend"].is_string())
        s.backend = run["backend"];
      // A report is data from someone else: it never lifts the sandbox by itself.
      if (run.value("trusted", false) && !s.trusted && prints_early())
        std::fprintf(stderr,
                     "commscript: replay %s: warning: the recorded run was --trusted; this one is sandboxed "
                     "unless you pass --trusted\n",
                     a.replay.c_str());
    }
    if (!a.config_file.empty()) s.config = Config::load(a.config_file);
    for (const auto& kv : a.sets) s.config.set(kv);
    s.config.apply_env();
  } catch (const Error& e) {
    return fail_early(e.code(), e.what());
  } catch (const nlohmann::json::exception& e) {
    return fail_early(ExitCode::bad_input, a.replay + ": " + e.what());
  }
  // The chaos plan ([[chaos]] tables or --set chaos=[...]) is checked before anything runs.
  std::vector<ChaosRule> chaos_rules;
  try {
    const nlohmann::json plan = s.config.data().value("chaos", nlohmann::json::array());
    if (!plan.is_array()) throw InputError("chaos must be an array of tables ([[chaos]] in TOML)");
    for (const auto& r : plan) chaos_rules.push_back(chaos_rule_from_json(r));
  } catch (const Error& e) {
    return fail_early(e.code(), std::string(e.what()) + (a.config_file.empty() ? "" : " (in " + a.config_file + ")"));
  }
  // Chaos corrupt flips bits through host pointers; the NCCL backend's buffers are on the GPU.
  if (s.backend == "nccl")
    for (const ChaosRule& r : chaos_rules)
      if (r.kind == ChaosKind::corrupt)
        return fail_early(ExitCode::bad_input,
                          "chaos kind 'corrupt' is not supported with --backend nccl (its buffers are in GPU memory)");
  const nlohmann::json run_cfg = s.config.section("run");
  {
    const std::string where = a.config_file.empty() ? "" : " (in " + a.config_file + ")";
    for (auto& [k, v] : run_cfg.items()) {
      if (k == "timeout") {
        if (!v.is_number() || v.get<double>() < 0)
          return fail_early(ExitCode::bad_input,
                            "run.timeout must be a number of seconds >= 0, not " + v.dump() + where);
      } else if (k == "seed") {
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
          return fail_early(ExitCode::bad_input, "run.seed must be a non-negative integer, not " + v.dump() + where);
      } else {
        return fail_early(ExitCode::bad_input, "unknown setting run." + k + " (known: timeout, seed)" + where);
      }
    }
  }
  s.timeout_s = a.timeout >= 0 ? a.timeout : run_cfg.value("timeout", 300.0);
  s.seed = a.seed_given ? a.seed : run_cfg.value("seed", static_cast<uint64_t>(0));

  std::string why;
  std::optional<RecipeSource> src;
  std::vector<std::string> rargs;
  if (!replayed.is_null()) {
    const auto& rec = replayed["recipe"];
    src =
        RecipeSource{rec.value("file", "replayed.lua"), rec["source"].get<std::string>(), rec.value("bundled", false)};
    for (const auto& x : rec.value("args", nlohmann::json::array())) rargs.push_back(x.get<std::string>());
    replay_warnings(replayed, *src, a.replay);
  } else {
    src = find_recipe(a.rest[0], &why);
    if (!src) return fail_early(ExitCode::bad_input, why);
    rargs.assign(a.rest.begin() + 1, a.rest.end());
  }
  const bool recipe_help = std::find_if(rargs.begin(), rargs.end(),
                                        [](const std::string& x) { return x == "--help" || x == "-h"; }) != rargs.end();

  // --help and --check need no ranks: answer them from the declarations alone.
  if (recipe_help || a.check) {
    LuaVm vm(&s);
    LuaFailure f;
    if (!declare(vm, *src, s.trusted, &f)) return fail_early(f.code, f.message);
    lua_State* L = vm.state();
    if (recipe_help) {
      lua_getfield(L, -2, "help");
      lua_pushvalue(L, -2);
      if (!vm.call(1, 1, &f)) return fail_early(f.code, f.message);
      if (prints_early()) std::printf("%s\n", lua_tostring(L, -1));
      return 0;
    }
    if (!resolve_options(vm, s, rargs, &f)) return fail_early(f.code, f.message);
    if (prints_early())
      std::printf("ok: %s %s (%s) loads, and its options are valid\n", string_field(L, -2, "name").c_str(),
                  string_field(L, -2, "version").c_str(), src->name.c_str());
    return 0;
  }

  // ---- the ranks ----
  // Termination signals go to one thread (started before MPI's threads, which inherit the
  // mask), so a rank that mpirun ends still saves what it measured.
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sigs, sig);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::thread(signal_loop, sigs).detach();

  if (s.backend == "mpi") {
    job::init_mpi(&argc, &argv);
    s.world = MpiCommunicator::world();
  } else if (s.backend == "nccl") {
#ifdef COMMSCRIPT_HAVE_NCCL
    // MPI stays the launcher and the control plane (unique id, result gathering); NCCL moves
    // the data between the GPUs. The ranks agree on a failure before any of them throws, so
    // every rank ends here with the same error and rank 0 says it once.
    job::init_mpi(&argc, &argv);
    try {
      s.world = NcclCommunicator::world(s.timeout_s);
    } catch (const Error& e) {
      if (job::world_rank() == 0) std::fprintf(stderr, "commscript: %s\n", e.what());
      job::finalize();
      return static_cast<int>(e.code());
    } catch (const std::exception& e) {  // not agreed on: end every rank
      job::abort(ExitCode::internal,
                 "commscript: rank " + std::to_string(job::world_rank()) + ": --backend nccl: " + e.what());
    }
#else
    return fail_early(ExitCode::bad_input, "--backend nccl: this commscript was built without CUDA/NCCL");
#endif
  } else {
    s.world = std::make_shared<SelfCommunicator>();
  }
  s.rank = s.world->rank();
  s.size = s.world->size();

  auto finish = [&](int code) {
    s.world.reset();
    job::finalize();
    return code;
  };

  LuaVm vm(&s);
  lua_State* L = vm.state();
  LuaFailure f;
  bool ok = declare(vm, *src, s.trusted, &f) && resolve_options(vm, s, rargs, &f);
  // Every rank loads and validates the same way; the lowest rank that failed says why.
  const int low = job::lowest_failing_rank(!ok);
  if (low >= 0) {
    if (s.rank == low)
      std::fprintf(stderr, "commscript: %s%s\n", s.size > 1 ? ("rank " + std::to_string(low) + ": ").c_str() : "",
                   f.message.c_str());
    return finish(static_cast<int>(ExitCode::bad_input));
  }
  // Stack: [runner, recipe, opt]
  const std::string recipe_name = string_field(L, -2, "name");

  // The output directory: rank 0 chooses, everyone learns it.
  s.out_dir = s.world->broadcast(a.out.empty() ? default_out_dir(recipe_name) : a.out, 0);
  std::string report_error;
  try {
    s.report = std::make_unique<Report>(s.out_dir, s.rank == 0);
  } catch (const Error& e) {
    report_error = e.what();
  }
  if (job::lowest_failing_rank(!report_error.empty()) >= 0) {
    if (!report_error.empty()) std::fprintf(stderr, "commscript: %s\n", report_error.c_str());
    return finish(static_cast<int>(ExitCode::bad_input));
  }

  const auto t_start = std::chrono::steady_clock::now();
  {
    auto& d = s.report->doc();
    d["commscript"] = nlohmann::json::parse(versions_json());
    d["recipe"] = {{"name", recipe_name},
                   {"version", string_field(L, -2, "version")},
                   {"file", src->name},
                   {"bundled", src->bundled},
                   {"sha256", sha256_hex(src->text)},
                   {"source", src->text},
                   {"options", lua::to_json(L, -1)},
                   {"args", rargs}};
    if (d["recipe"]["options"].is_array() && d["recipe"]["options"].empty())
      d["recipe"]["options"] = nlohmann::json::object();
    const auto hosts = s.world->allgather(host_name());
    nlohmann::json per_host = nlohmann::json::object();
    for (size_t r = 0; r < hosts.size(); ++r) per_host[hosts[r]].push_back(r);
    d["run"] = {{"replay_of", a.replay.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.replay)},
                {"ranks", s.size},
                {"hosts", per_host.size()},
                {"backend", s.backend},
                {"start", iso_time_now()},
                {"seed", s.seed},
                {"timeout_s", s.timeout_s},
                {"trusted", s.trusted},
                {"command", s.argv},
                {"config", s.config.data()},
                {"duration_s", nullptr},
                {"exit_code", nullptr}};
    d["env"] = env_snapshot();
    d["topology"] = {{"hosts", per_host}};
  }
  g_session = &s;
  job::set_before_abort(save_partial_report);

  // Out-of-band view of all ranks: a coordinator thread on rank 0, a heartbeat from each rank.
  const std::string host = host_name();
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<HeartbeatClient> heartbeat;
  if (s.backend != "self") {  // mpi, and nccl (whose control plane is MPI)
    std::string endpoint;
    if (s.rank == 0) {
      try {
        Coordinator::Options co;
        co.nranks = s.size;
        co.timeout_s = s.timeout_s;
        co.out_dir = s.out_dir;
        co.on_timeout = [](const nlohmann::json& inc) { save_report_with(inc, static_cast<int>(ExitCode::timeout)); };
        co.on_death = [](const nlohmann::json& inc) {
          // A rank that failed (recipe error, timeout) and was then ended is not news.
          if (g_outcome_saved) return;
          std::fprintf(stderr, "commscript: %s\n", inc["message"].get<std::string>().c_str());
          // The job's exit code is the dead rank's status, which only mpirun knows.
          save_report_with(inc, -1);
        };
        co.on_error = [](int rank, int code, const std::string& msg) {
          save_report_with({{"kind", "error"}, {"rank", rank}, {"exit_code", code}, {"message", msg}}, code);
        };
        coordinator = std::make_unique<Coordinator>(std::move(co));
        endpoint = coordinator->endpoint();
        g_coordinator = coordinator.get();
      } catch (const Error& e) {
        std::fprintf(stderr, "commscript: warning: %s; missing ranks will not be named on a timeout\n", e.what());
      }
    }
    endpoint = s.world->broadcast(endpoint, 0);
    const std::string root_host = s.world->broadcast(host, 0);
    if (!endpoint.empty()) {
      heartbeat = std::make_unique<HeartbeatClient>(endpoint, s.rank, host, host == root_host);
      g_heartbeat = heartbeat.get();
    }
  }
  // Operations wait by polling; with a coordinator judging, a rank gives up on its own only
  // some seconds after the deadline.
  s.world->set_timeout(s.timeout_s, coordinator || heartbeat ? 5 : 0);
  Chaos::instance().set_identity(s.rank, host);
  Chaos::instance().on_fire([](const nlohmann::json& ev) {
    if (HeartbeatClient* hb = g_heartbeat.load()) hb->send_event(ev);
  });
  Chaos::instance().install(chaos_rules, s.seed);

  // Each rank's own deadline: the fallback when no coordinator can judge (it normally acts first).
  Watchdog watchdog(coordinator || heartbeat ? 10 : 0, s.rank, host, [&](const std::string& line) {
    save_report_with({{"kind", "timeout"}, {"line", line}, {"detected_by", "rank watchdog"}},
                     static_cast<int>(ExitCode::timeout));
  });

  // runner.run(recipe, comm, opt, info)
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
  if (!vm.call(4, 1, &f)) {
    std::string msg =
        "commscript: " + (s.size > 1 ? "rank " + std::to_string(s.rank) + ": " : std::string()) + f.message;
    if (!f.traceback.empty() && f.code == ExitCode::runtime) msg += "\n" + f.traceback;
    job::abort(f.code, msg);
  }
  int code = static_cast<int>(lua_tointeger(L, -1));
  code = job::agree_max(code);
  // Every injection that fired, from every rank.
  nlohmann::json fired = nlohmann::json::array();
  for (const auto& part : s.world->allgather(Chaos::instance().fired().dump()))
    for (auto& e : nlohmann::json::parse(part)) fired.push_back(e);
  Chaos::instance().clear();
  g_heartbeat = nullptr;
  heartbeat.reset();

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (s.report->writer()) {
    std::lock_guard<std::recursive_mutex> g(s.report->mutex());
    auto& d = s.report->doc();
    d["chaos"] = fired;
    d["run"]["duration_s"] = secs;
    d["run"]["exit_code"] = code;
    try {
      s.report->write();
      std::fprintf(stderr, "commscript: report written to %s/report.json\n", s.out_dir.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "commscript: %s\n", e.what());
      code = static_cast<int>(ExitCode::internal);
    }
    write_html(vm, *s.report);
  }
  lua_settop(L, 0);
  g_coordinator = nullptr;
  coordinator.reset();
  g_session = nullptr;
  return finish(code);
}

}  // namespace cs
