// The `commscript` command, as a list of phases: parse the command line, read the inputs
// (replay, baseline, config, [run], chaos plan, the recipe), answer what needs no ranks (--help,
// --check), start the backend, run the recipe on every rank, and end with the exit code of the
// contract (docs/reference.md "Exit codes"). Bad input is refused before anything communicates.
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commscript_version.hpp"
#include "digest.hpp"
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
  bool version = false, list = false, check = false, trusted = false;
  std::vector<std::string> rest;  // RECIPE [recipe options]
};

// Who prints errors found before MPI starts: the launcher's rank 0 (or a process on its own).
bool prints_early() { return job::launcher_rank() <= 0; }

int fail_early(ExitCode code, const std::string& msg) {
  if (prints_early()) std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  return static_cast<int>(code);
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
  if (!a.replay.empty() && !a.rest.empty())
    return fail_early(ExitCode::bad_input,
                      "--replay takes the recipe and its options from the report; remove '" + a.rest[0] + "'");
  if (!a.rest.empty() && a.rest[0].size() > 1 && a.rest[0][0] == '-')
    return fail_early(ExitCode::bad_input, "unknown option '" + a.rest[0] + "' (see commscript --help)");
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
  s.fail_below = a.fail_below;
  s.argv.assign(argv, argv + argc);
  std::optional<double> timeout = a.timeout >= 0 ? std::optional<double>(a.timeout) : std::nullopt;
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
      // A report is data from someone else: it never lifts the sandbox by itself.
      if (r.was_trusted && !s.trusted && prints_early())
        std::fprintf(stderr,
                     "commscript: replay %s: warning: the recorded run was --trusted; this one is sandboxed "
                     "unless you pass --trusted\n",
                     a.replay.c_str());
    }
    if (!a.config_file.empty()) s.config = Config::load(a.config_file);
    for (const auto& kv : a.sets) s.config.set(kv);
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
