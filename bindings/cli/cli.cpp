// The `commscript` command, as a list of phases: parse the command line, then everything else
// through libcommscript's C API (include/commscript/commscript.h), as any host program would:
// open a session that owns the process (own_process: messages on stderr, a recipe error ends the
// job, signals handled), read the inputs into a plan (replay, baseline, config, [run], chaos plan,
// the recipe), answer what needs no ranks (--help, --check), join the launcher's world on the
// chosen backend, run the plan on every rank, and end with the exit code of the contract
// (docs/reference.md "Exit codes"). Bad input is refused before anything communicates. It
// includes the public header alone: what it asks of the build (backend and launcher names, its
// own options, versions, the bundled recipes) is the C API's too (API 2.2).
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commscript/commscript.h"

namespace cs {

namespace {

struct Args {
  std::string config_file, out, backend = "mpi", replay, baseline, launcher = "auto";
  std::string metrics_file, metrics_listen;
  double fail_below = -1;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  bool seed_given = false, backend_given = false;
  double timeout = -1;
  bool timeout_given = false;
  bool version = false, list = false, check = false, trusted = false, no_verify = false, insecure_plane = false;
  std::vector<std::string> rest;  // RECIPE [recipe options]
};

// The exit code of bad input (docs/reference.md "Exit codes"), generated from error.hpp.
constexpr int kBadInput = CS_EXIT_BAD_INPUT;

// Who prints errors found before MPI starts: the launcher's rank 0 (or a process on its own).
bool prints_early() { return cs_launcher_rank() <= 0; }

// commscript's own options, from the library's one table (cs_cli_option).
struct CliOption {
  const char* name;
  bool value;        // takes a value (--config FILE); false: a flag
  const char* help;  // the --help text; nullptr: registered with another entry (--no-check) or by CLI11 (--help)
};
const std::vector<CliOption>& cli_options() {
  static const std::vector<CliOption> all = [] {
    std::vector<CliOption> v;
    const char *name = nullptr, *help = nullptr;
    int value = 0;
    for (int i = 0; cs_cli_option(i, &name, &value, &help) == CS_OK; ++i) v.push_back({name, value != 0, help});
    return v;
  }();
  return all;
}
const CliOption* find_cli_option(const std::string& name) {
  for (const auto& o : cli_options())
    if (name == o.name) return &o;
  return nullptr;
}

// The names the library lists through `nth` (cs_backend_name, cs_launcher_name).
std::vector<std::string> names(const char* (*nth)(int)) {
  std::vector<std::string> v;
  for (int i = 0; nth(i); ++i) v.emplace_back(nth(i));
  return v;
}

// A rank that refuses its input before anything communicates says nothing (rank 0 prints the
// message). Ending at once, it can end first, and mpirun then kills rank 0 before its message
// is out: the job exits 1 with no line (seen in CI with 4 ranks on 2 cores). So such a rank
// waits this long before it ends; rank 0 ends first and mpirun ends the rest.
constexpr int kQuietRefusalLingerMs = 1000;

int quiet_ranks_linger(int code) {
  if (code != 0 && !prints_early()) std::this_thread::sleep_for(std::chrono::milliseconds(kQuietRefusalLingerMs));
  return code;
}

int fail_early(int code, const std::string& msg) {
  if (prints_early()) std::fprintf(stderr, "commscript: %s\n", msg.c_str());
  return code;
}

// "; did you mean --timeout?" when an option of commscript is close to `given`, else "".
std::string did_you_mean(const std::string& given) {
  const char* best = cs_cli_option_nearest(given.c_str());
  return best ? std::string("; did you mean ") + best + "?" : "";
}

// "--check false": a flag takes no separate value; the word would become the recipe's name.
std::optional<int> flag_with_separate_value(int argc, char** argv) {
  static const char* const kWords[] = {"true", "false", "yes", "no", "on", "off", "1", "0", nullptr};
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] != '-') return std::nullopt;  // the recipe: what follows is its own
    const CliOption* o = find_cli_option(a);
    if (o && o->value) ++i;                         // an option that takes a value: skip it
    if (!o || o->value || a == "--help") continue;  // --help is answered whatever follows
    std::string w = argv[i + 1];
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* const* x = kWords; *x; ++x)
      if (w == *x) {
        const std::string how = a == "--check" ? " or --no-check" : "";
        return fail_early(kBadInput, a + " is a flag and takes no separate value: write " + a + how + " (or " + a +
                                         "=" + argv[i + 1] + ")");
      }
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

// --seed: a whole number within 0..2^64-1, written in digits (1e30 or 2^64 were clamped to
// 2^64-1 silently, 1.5 truncated).
CLI::Validator seed_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (!v.empty() && v[0] == '-') return "must not be negative";
        if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
          return "'" + v + "' is not a whole number of digits (0 to 18446744073709551615)";
        errno = 0;
        (void)std::strtoull(v.c_str(), nullptr, 10);
        if (errno == ERANGE) return "'" + v + "' is above the largest seed, 18446744073709551615 (2^64-1)";
        return std::string();
      },
      "UINT64");
}

// The table's entry of `name`: an option registered below that is not in kCliOptions is a bug.
const CliOption& cli_option(const char* name) {
  const CliOption* o = find_cli_option(name);
  if (!o || !o->help) throw std::logic_error(std::string("commscript option ") + name + " is not in kCliOptions");
  return *o;
}

// Every option of the table is registered, each as a flag or as taking a value as the table says.
void check_against_table(CLI::App& app) {
  for (const auto& o : cli_options()) {
    const CLI::Option* opt = app.get_option_no_throw(o.name);
    const bool registered = opt || std::string(o.name) == "--no-check";  // the negation of --check
    if (!registered || (opt && opt->get_expected_min() > 0) != o.value)
      throw std::logic_error(std::string("commscript option ") + o.name + " differs from kCliOptions");
  }
}

// ---- phase 1: the command line. Returns an exit code when the process is done (--help, errors).
// `act`: answer --version and --list here (cli_parse, for the fuzz target, does not).
std::optional<int> parse_args(int argc, char** argv, Args& a, bool act = true) {
  CLI::App app{"commscript: diagnose, benchmark and stress-test distributed training communication", "commscript"};
  app.footer(
      "usage: commscript [options] RECIPE[.lua] [recipe options]\n"
      "       commscript RECIPE --help     prints the recipe's own options\n"
      "exit codes: 0 ok, 1 bad input, 2 recipe error, 3 health verdict failed,\n"
      "            4 data corruption, 5 timeout/hang/desync, 6 outputs unwritable, 70 internal error");
  app.prefix_command();  // everything from RECIPE on belongs to the recipe
  auto help = [](const char* name) { return std::string(cli_option(name).help); };
  app.add_flag("--version", a.version, help("--version"));
  app.add_option("--config", a.config_file, help("--config"));
  app.add_option("--set", a.sets, help("--set"))
      ->allow_extra_args(false);  // one value: the next word may be the recipe
  app.add_option("--out", a.out, help("--out"));
  app.add_option("--backend", a.backend, help("--backend"))
      ->check(CLI::IsMember(names(cs_backend_name)))
      ->each([&](const std::string&) { a.backend_given = true; });
  app.add_option("--launcher", a.launcher, help("--launcher"))->check(CLI::IsMember(names(cs_launcher_name)));
  app.add_option("--seed", a.seed, help("--seed"))->check(seed_number())->each([&](const std::string&) {
    a.seed_given = true;
  });
  app.add_option("--timeout", a.timeout, help("--timeout"))->check(finite_number(true))->each([&](const std::string&) {
    a.timeout_given = true;
  });
  app.add_flag("--list", a.list, help("--list"));
  app.add_flag("--check,!--no-check", a.check, help("--check"));
  app.add_flag("--trusted", a.trusted, help("--trusted"));
  app.add_flag("--no-verify", a.no_verify, help("--no-verify"));
  app.add_flag("--insecure-control-plane", a.insecure_plane, help("--insecure-control-plane"));
  app.add_option("--baseline", a.baseline, help("--baseline"));
  app.add_option("--fail-below", a.fail_below, help("--fail-below"))
      ->check(finite_number(true) & CLI::Range(0.0, 100.0));
  app.add_option("--replay", a.replay, help("--replay"));
  app.add_option("--metrics", a.metrics_file, help("--metrics"))
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() || std::filesystem::is_directory(v) ? "'" + v + "' is not a file name" : std::string();
          },
          "FILE"));
  app.add_option("--metrics-listen", a.metrics_listen, help("--metrics-listen"))
      ->check(CLI::Validator([](std::string& v) { return v.empty() ? "'' is not ADDRESS:PORT" : std::string(); },
                             "ADDRESS:PORT"));
  check_against_table(app);
  if (auto done = flag_with_separate_value(argc, argv)) return done;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (prints_early()) std::fprintf(stderr, "commscript: %s\n(see commscript --help)\n", e.what());
    return 1;
  }
  a.rest = app.remaining();  // as given: the plan reads the bundled triage's positional paths
  if (a.insecure_plane) setenv("COMMSCRIPT_JOB_TOKEN", "insecure", 1);  // read by the launch (launch_env.cpp)
  if (!act && (a.version || a.list)) return 0;
  if (a.version) {
    std::fputs(cs_version_text(), stdout);
    return 0;
  }
  if (a.list) return cs_list_recipes();
  if (!a.replay.empty() && !a.rest.empty())
    return fail_early(kBadInput,
                      "--replay takes the recipe and its options from the report; remove '" + a.rest[0] + "'");
  if (!a.rest.empty() && a.rest[0].size() > 1 && a.rest[0][0] == '-')
    return fail_early(kBadInput,
                      "unknown option '" + a.rest[0] + "'" + did_you_mean(a.rest[0]) + " (see commscript --help)");
  if (a.rest.empty() && a.replay.empty())
    return fail_early(kBadInput,
                      "no recipe given (usage: commscript [options] RECIPE.lua; --list shows the bundled ones)");
  return std::nullopt;
}

// The session's options from the command line: the process is commscript's (own_process).
cs_session_options session_options(const Args& a) {
  cs_session_options o;
  cs_session_options_init(&o);
  o.own_process = 1;
  o.backend = a.backend_given ? a.backend.c_str() : nullptr;  // unset: mpi, or what --replay recorded
  o.launcher = a.launcher.c_str();
  o.trusted = a.trusted ? 1 : 0;
  o.verify = a.no_verify ? 0 : 1;
  o.deadline_s = a.timeout_given ? a.timeout : -1;
  o.seed = a.seed;
  o.seed_given = a.seed_given ? 1 : 0;
  return o;
}

// One run's options from the command line (pointers into `a`, `keep` and argv).
cs_run_options run_options(const Args& a, int argc, char** argv, std::vector<const char*>& keep) {
  cs_run_options r;
  cs_run_options_init(&r);
  // keep: [recipe args..., sets...]
  keep.clear();
  for (size_t i = a.rest.empty() ? 0 : 1; i < a.rest.size(); ++i) keep.push_back(a.rest[i].c_str());
  const size_t nargs = keep.size();
  for (const auto& kv : a.sets) keep.push_back(kv.c_str());
  r.recipe = a.rest.empty() ? nullptr : a.rest[0].c_str();
  r.argv = keep.data();
  r.argc = static_cast<int>(nargs);
  r.sets = keep.data() + nargs;
  r.nsets = static_cast<int>(a.sets.size());
  r.config = a.config_file.empty() ? nullptr : a.config_file.c_str();
  r.out_dir = a.out.empty() ? nullptr : a.out.c_str();
  r.replay = a.replay.empty() ? nullptr : a.replay.c_str();
  r.baseline = a.baseline.empty() ? nullptr : a.baseline.c_str();
  r.fail_below = a.fail_below;
  r.metrics_file = a.metrics_file.empty() ? nullptr : a.metrics_file.c_str();
  r.metrics_listen = a.metrics_listen.empty() ? nullptr : a.metrics_listen.c_str();
  r.command_line = argv;
  r.command_line_n = argc;
  return r;
}

}  // namespace

int cli_parse(int argc, char** argv, std::vector<std::string>* rest, std::vector<std::string>* sets) {
  Args args;
  if (auto done = parse_args(argc, argv, args, false)) return *done;
  if (rest) *rest = args.rest;
  if (sets) *sets = args.sets;
  return -1;
}

int cli_main(int argc, char** argv) {
  // ---- phase 1: the command line (answers --version, --list, --help and malformed input itself).
  Args args;
  if (auto done = parse_args(argc, argv, args)) return quiet_ranks_linger(*done);

  // ---- phase 2: the session and the plan: everything the run reads, checked before anything
  // communicates (the config's [env] is applied here, before MPI or NCCL read theirs). The
  // library prints its own messages (own_process); cs_last_exit_code is the contract's code.
  const cs_session_options so = session_options(args);
  cs_session* s = nullptr;
  if (cs_session_open(&so, &s) != CS_OK) {
    if (prints_early()) std::fprintf(stderr, "commscript: %s\n", cs_last_error(nullptr));
    return quiet_ranks_linger(cs_last_exit_code(nullptr));
  }
  std::vector<const char*> keep;
  const cs_run_options ro = run_options(args, argc, argv, keep);
  cs_plan* plan = nullptr;
  int code = 0;
  if (cs_plan_open(s, &ro, &plan) != CS_OK) {
    code = quiet_ranks_linger(cs_last_exit_code(s));
  } else if (cs_plan_wants_help(plan) || args.check) {
    // ---- phase 3: --help and --check need no ranks: answered from the declarations alone.
    if (cs_plan_check(s, plan, prints_early() ? 1 : 0, &code) != CS_OK) code = cs_last_exit_code(s);
    code = quiet_ranks_linger(code);
  } else if (cs_session_attach_world(s, plan, &argc, &argv) != CS_OK) {
    // ---- phase 4: the launcher's world on the chosen backend (MPI, Gloo, NCCL, self).
    code = cs_last_exit_code(s);
  } else {
    // ---- phase 5: the recipe on every rank. A recipe error or a hang ends the job inside.
    cs_result* r = nullptr;
    if (cs_plan_run(s, plan, &r) == CS_OK) {
      code = cs_result_exit_code(r);
      cs_result_free(r);
    } else {
      code = cs_last_exit_code(s);
    }
  }
  // ---- phase 6: the end of the backend (MPI finalized when the session started it).
  cs_plan_free(plan);
  cs_session_close(s);
  return code;
}

}  // namespace cs
