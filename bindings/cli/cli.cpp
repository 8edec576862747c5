// The `commscript` command, as a list of phases: parse the command line, read the inputs
// (replay, baseline, config, [run], chaos plan, the recipe), answer what needs no ranks (--help,
// --check), start the backend, run the recipe on every rank, and end with the exit code of the
// contract (docs/reference.md "Exit codes"). Bad input is refused before anything communicates.
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commscript_version.hpp"
#include "digest.hpp"
#include "guardian.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "launch_env.hpp"
#include "mpi_communicator.hpp"
#include "recipe_run.hpp"
#include "run_inputs.hpp"
#ifdef COMMSCRIPT_HAVE_NCCL
#include "nccl_communicator.hpp"
#endif
#ifdef COMMSCRIPT_HAVE_GLOO
#include "gloo_communicator.hpp"
#endif
#include "self_communicator.hpp"
#include "session.hpp"
#include "versions.hpp"

namespace cs {

namespace {

struct Args {
  std::string config_file, out, backend = "mpi", replay, baseline, launcher = "auto";
  double fail_below = -1;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  bool seed_given = false, backend_given = false;
  double timeout = -1;
  bool timeout_given = false;
  bool version = false, list = false, check = false, trusted = false, no_verify = false;
  std::vector<std::string> rest;  // RECIPE [recipe options]
};

// Who prints errors found before MPI starts: the launcher's rank 0 (or a process on its own).
bool prints_early() { return job::launcher_rank() <= 0; }

int fail_early(ExitCode code, const std::string& msg) {
  if (prints_early()) std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  return static_cast<int>(code);
}

// commscript's own options, for did-you-mean.
const char* const kOptionNames[] = {"--version",    "--config", "--set",   "--out",      "--backend", "--seed",
                                    "--timeout",    "--list",   "--check", "--no-check", "--trusted", "--baseline",
                                    "--fail-below", "--replay", "--help",  nullptr};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// "; did you mean --timeout?" when an option of commscript is close to `given`, else "".
std::string did_you_mean(const std::string& given) {
  const std::string name = given.substr(0, given.find('='));
  if (name.size() > 64) return "";
  const char* best = nullptr;
  size_t best_d = 0;
  for (const char* const* o = kOptionNames; *o; ++o) {
    const size_t d = edit_distance(name, *o);
    if (d <= std::max<size_t>(1, name.size() / 3) && (!best || d < best_d)) best = *o, best_d = d;
  }
  return best ? std::string("; did you mean ") + best + "?" : "";
}

// "--check false": a flag takes no separate value; the word would become the recipe's name.
std::optional<int> flag_with_separate_value(int argc, char** argv) {
  static const char* const kFlags[] = {"--check", "--trusted", "--list", "--version", nullptr};
  static const char* const kWords[] = {"true", "false", "yes", "no", "on", "off", "1", "0", nullptr};
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] != '-') return std::nullopt;  // the recipe: what follows is its own
    for (const char* const* f = kFlags; *f; ++f) {
      if (a != *f) continue;
      std::string w = argv[i + 1];
      for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const char* const* x = kWords; *x; ++x)
        if (w == *x) {
          const std::string how = a == "--check" ? " or --no-check" : "";
          return fail_early(ExitCode::bad_input, a + " is a flag and takes no separate value: write " + a + how +
                                                     " (or " + a + "=" + argv[i + 1] + ")");
        }
    }
    // options that take a value: skip it
    for (const char* o :
         {"--config", "--set", "--out", "--backend", "--seed", "--timeout", "--baseline", "--fail-below", "--replay"})
      if (a == o) ++i;
  }
  return std::nullopt;
}

// A number option's text: finite, and not negative when `non_negative` (CLI11 would read "-1" as
// 2^64-1 for --seed and "nan" as a number).
CLI::Validator finite_number(bool non_negative) {
  return CLI::Validator(
      [non_negative](std::string& v) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end) return "'" + v + "' is not a number";
        if (!std::isfinite(d) || errno == ERANGE) return "'" + v + "' is not a finite number";
        if (non_negative && (d < 0 || (!v.empty() && v[0] == '-'))) return "must not be negative";
        return std::string();
      },
      "NUMBER");
}

// ---- phase 1: the command line. Returns an exit code when the process is done (--help, errors).
std::optional<int> parse_args(int argc, char** argv, Args& a) {
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
  app.add_option("--backend", a.backend, "communication backend")
      ->check(CLI::IsMember({"mpi", "self", "nccl", "gloo"}))
      ->each([&](const std::string&) { a.backend_given = true; });
  app.add_option("--launcher", a.launcher,
                 "how the ranks were started: auto (default: detected), mpi, env (torchrun-style RANK, WORLD_SIZE, "
                 "MASTER_ADDR, MASTER_PORT) or slurm (SLURM_PROCID, SLURM_NTASKS; MASTER_ADDR)")
      ->check(CLI::IsMember({"auto", "mpi", "env", "slurm"}));
  app.add_option("--seed", a.seed, "seed for everything random in the run")
      ->check(finite_number(true))
      ->each([&](const std::string&) { a.seed_given = true; });
  app.add_option("--timeout", a.timeout, "deadline of each operation in seconds (0: none; default 300; at most 7 days)")
      ->check(finite_number(true))
      ->each([&](const std::string&) { a.timeout_given = true; });
  app.add_flag("--list", a.list, "list the bundled recipes with versions and summaries");
  app.add_flag("--check,!--no-check", a.check, "load and validate the recipe and its options, run nothing");
  app.add_flag("--trusted", a.trusted, "lift the recipe sandbox (os, io, ffi, require of any module)");
  app.add_flag("--no-verify", a.no_verify,
               "no call verification (ranks agreeing on each untimed operation's shape before it runs)");
  app.add_option("--baseline", a.baseline, "an earlier report.json: regressions beyond the tolerance become findings");
  app.add_option("--fail-below", a.fail_below, "exit 3 when the scorecard's total is below this (0-100)")
      ->check(finite_number(true) & CLI::Range(0.0, 100.0));
  app.add_option("--replay", a.replay,
                 "run again what an earlier report.json recorded (recipe source, options, config, chaos, seed)");
  if (auto done = flag_with_separate_value(argc, argv)) return done;
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
  if (!a.replay.empty() && !a.rest.empty())
    return fail_early(ExitCode::bad_input,
                      "--replay takes the recipe and its options from the report; remove '" + a.rest[0] + "'");
  if (!a.rest.empty() && a.rest[0].size() > 1 && a.rest[0][0] == '-')
    return fail_early(ExitCode::bad_input,
                      "unknown option '" + a.rest[0] + "'" + did_you_mean(a.rest[0]) + " (see commscript --help)");
  if (a.rest.empty() && a.replay.empty())
    return fail_early(ExitCode::bad_input,
                      "no recipe given (usage: commscript [options] RECIPE.lua; --list shows the bundled ones)");
#ifndef COMMSCRIPT_HAVE_NCCL
  if (a.backend == "nccl")
    return fail_early(ExitCode::bad_input, "--backend nccl: this commscript was built without CUDA/NCCL");
#endif
#ifndef COMMSCRIPT_HAVE_GLOO
  if (a.backend == "gloo")
    return fail_early(ExitCode::bad_input, "--backend gloo: this commscript was built without Gloo (libgloo-dev)");
#endif
  return std::nullopt;
}

// What differs between a recorded run and this one (printed by the launcher's rank 0): the run
// still uses the recorded recipe source, options, config and seed.
void replay_warnings(const nlohmann::json& rep, const RecipeSource& src, const std::string& file) {
  if (job::launcher_rank() > 0) return;
  auto warn = [&](const std::string& m) {
    std::fprintf(stderr, "commscript: replay %s: warning: %s\n", file.c_str(), m.c_str());
  };
  const std::string was = rep.value("commscript", nlohmann::json::object()).value("version", "?");
  if (was != COMMSCRIPT_VERSION) warn("recorded with commscript " + was + ", this is " + COMMSCRIPT_VERSION);
  const int ranks = rep.value("run", nlohmann::json::object()).value("ranks", 0);
  const int now = job::launcher_size();
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
    if (auto b = bundled_recipe(src.name); b && sha256_hex(b->text) != sha)
      warn("the bundled " + src.name + " differs from the recorded one; replaying the recorded source");
  }
}

struct Inputs {
  RecipeSource recipe;
  std::vector<std::string> rargs;
  RunInfo info;
  bool recipe_help = false;
};

// ---- phase 2: everything the run reads, checked before anything communicates. The config's
// [env] is applied here, before MPI or NCCL read theirs.
std::optional<int> load_inputs(const Args& a, int argc, char** argv, Session& s, Inputs& in) {
  s.backend = a.backend;
  s.trusted = a.trusted;
  s.verify = !a.no_verify;
  s.fail_below = a.fail_below;
  s.argv.assign(argv, argv + argc);
  std::optional<double> timeout = a.timeout_given ? std::optional<double>(a.timeout) : std::nullopt;
  std::optional<uint64_t> seed = a.seed_given ? std::optional<uint64_t>(a.seed) : std::nullopt;
  const std::string where = a.config_file.empty() ? "" : " (in " + a.config_file + ")";
  nlohmann::json replayed;
  try {
    if (!a.baseline.empty()) s.baseline = load_baseline(a.baseline);
    if (!a.replay.empty()) {
      replayed = load_replay(a.replay);
      Replayed r = replay_settings(replayed, a.replay);
      s.config = std::move(r.config);
      if (!seed) seed = r.seed;
      if (!timeout) timeout = r.timeout_s;
      if (!a.backend_given && r.backend) s.backend = *r.backend;
      // Nor does it reach the loader: without --trusted, the recorded [env] is applied only for
      // the known configuration families, less what loads code or names files.
      if (!s.trusted) {
        const std::vector<std::string> skipped = s.config.drop_env(env_var_unsafe_to_replay);
        if (!skipped.empty() && prints_early()) {
          std::string names;
          for (const auto& n : skipped) names += (names.empty() ? "" : ", ") + n;
          std::fprintf(stderr,
                       "commscript: replay %s: not applying %s from the report's [env] (they can load code, start "
                       "programs or write files; --trusted applies them)\n",
                       a.replay.c_str(), names.c_str());
        }
      }
      // A report is data from someone else: it never lifts the sandbox by itself.
      if (r.was_trusted && !s.trusted && prints_early())
        std::fprintf(stderr,
                     "commscript: replay %s: warning: the recorded run was --trusted; this one is sandboxed "
                     "unless you pass --trusted\n",
                     a.replay.c_str());
    }
    if (!a.config_file.empty()) s.config = Config::load(a.config_file);
    for (const auto& kv : a.sets) s.config.set(kv);
    s.config.check();  // again after --set, before [env] is applied or anything is measured
    s.config.apply_env();
    in.info.chaos = chaos_plan(s.config, s.backend, where);
    const RunSettings rs = run_settings(s.config, timeout, seed, where);
    s.timeout_s = rs.timeout_s;
    s.seed = rs.seed;
  } catch (const Error& e) {
    return fail_early(e.code(), e.what());
  }
  in.info.out = a.out;
  in.info.replay_of = a.replay;
  if (!replayed.is_null()) {
    const auto& rec = replayed["recipe"];
    in.recipe =
        RecipeSource{rec.value("file", "replayed.lua"), rec["source"].get<std::string>(), rec.value("bundled", false)};
    for (const auto& x : rec.value("args", nlohmann::json::array())) in.rargs.push_back(x.get<std::string>());
    replay_warnings(replayed, in.recipe, a.replay);
  } else {
    std::string why;
    auto src = find_recipe(a.rest[0], &why);
    if (!src) return fail_early(ExitCode::bad_input, why);
    in.recipe = std::move(*src);
    in.rargs.assign(a.rest.begin() + 1, a.rest.end());
  }
  for (const auto& x : in.rargs)
    if (x == "--help" || x == "-h") in.recipe_help = true;
  return std::nullopt;
}

// ---- phase 4: the world communicator of the chosen backend. Returns an exit code on failure.
std::optional<int> start_backend(Session& s, const LaunchEnv& launch, int* argc, char*** argv) {
  if (s.backend == "self") {
    s.world = std::make_shared<SelfCommunicator>();
  } else if (launch.kind != "mpi") {
#ifdef COMMSCRIPT_HAVE_GLOO
    // No MPI at all: rank 0 serves the store at MASTER_ADDR:MASTER_PORT, the others dial it.
    try {
      s.world =
          GlooCommunicator::world_at(launch.master_addr, launch.master_port, launch.rank, launch.size, s.timeout_s);
    } catch (const Error& e) {
      std::fprintf(stderr, "commscript: rank %d: --backend gloo --launcher %s: %s\n", launch.rank, launch.kind.c_str(),
                   e.what());
      return static_cast<int>(e.code());
    }
    job::set_control(s.world.get());
#endif
  } else {
    job::init_mpi(argc, argv);
    if (s.backend == "mpi") s.world = MpiCommunicator::world();
#ifdef COMMSCRIPT_HAVE_GLOO
    else if (s.backend == "gloo") {
      try {  // MPI launches and tells the ranks where rank 0's store is; Gloo moves the data
        s.world = GlooCommunicator::world_over_mpi(s.timeout_s);
      } catch (const Error& e) {
        job::abort(e.code(), "commscript: rank " + std::to_string(job::world_rank()) + ": --backend gloo: " + e.what());
      }
    }
#endif
#ifdef COMMSCRIPT_HAVE_NCCL
    else {
      // MPI stays the launcher and the control plane (unique id, result gathering); NCCL moves
      // the data between the GPUs. The ranks agree on a failure before any of them throws, so
      // every rank ends here with the same error and rank 0 says it once.
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
    }
#endif
  }
  s.rank = s.world->rank();
  s.size = s.world->size();
  s.world->set_verify(s.verify);
  return std::nullopt;
}

}  // namespace

int cli_main(int argc, char** argv) {
  Args args;
  if (auto done = parse_args(argc, argv, args)) return *done;

  Session s;
  Inputs in;
  if (auto failed = load_inputs(args, argc, argv, s, in)) return *failed;

  // ---- phase 3: --help and --check need no ranks: answered from the declarations alone.
  if (in.recipe_help || args.check) return answer_without_ranks(s, in.recipe, in.rargs, in.recipe_help, prints_early());

  // Termination signals go to one thread, started before MPI's threads (which inherit the mask),
  // so a rank that mpirun ends still saves what it measured.
  LaunchEnv launch;
  try {
    launch = read_launch_env(args.launcher);
  } catch (const Error& e) {  // this process's own variables: it says so itself, whatever its rank
    std::fprintf(stderr, "commscript: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  if (launch.kind != "mpi" && s.backend != "gloo" && !(s.backend == "self" && launch.size == 1))
    return fail_early(ExitCode::bad_input,
                      "--launcher " + launch.kind +
                          " starts ranks without MPI: only --backend gloo runs that way (got "
                          "--backend " +
                          s.backend + (s.backend == "nccl" ? "; NCCL's unique id over the store is not done yet" : "") +
                          ")");
  s.launcher = launch.to_json();

  guardian::start();  // forks: before any thread (the signal thread, MPI's)
  incidents::start_signal_thread();
  if (auto failed = start_backend(s, launch, &argc, &argv)) return *failed;

  // ---- phase 5: the recipe on every rank, then the end of the backend.
  const int code = run_recipe(s, in.recipe, in.rargs, in.info);
  job::set_control(nullptr);
  s.world.reset();
  job::finalize();
  return code;
}

}  // namespace cs
