#pragma once
// commscript's own command-line options, in one table. The command line (bindings/cli/cli.cpp)
// registers each with CLI11 from here (name and --help text), tells a flag from an option that
// takes a value by it, and suggests the closest name for a typo from it; the recipes' option
// parser (stdlib cs/options.lua, through commscript.native.cli_options) tells a user who gave one
// of them after the recipe to move it before. A name missing here is refused by cli.cpp at start.
#include <cstring>

namespace cs {

struct CliOption {
  const char* name;  // "--config"
  bool value;        // takes a value (--config FILE); false: a flag
  const char* help;  // the --help text; nullptr: registered with another entry (--no-check) or by CLI11 (--help)
};

inline constexpr CliOption kCliOptions[] = {
    {"--version", false, "print versions (commscript, MPI, LuaJIT, CUDA/NCCL, Gloo) and exit"},
    {"--config", true, "TOML file: [options], [env], [run] ..."},
    {"--set", true, "override a config value: key=value (repeatable; no section means options.KEY)"},
    {"--out", true, "output directory (default: commscript-runs/<recipe>-<time>-<pid>)"},
    {"--backend", true, "communication backend"},
    {"--launcher", true,
     "how the ranks were started: auto (default: detected), mpi, env (torchrun-style RANK, WORLD_SIZE, "
     "MASTER_ADDR, MASTER_PORT) or slurm (SLURM_PROCID, SLURM_NTASKS; MASTER_ADDR)"},
    {"--seed", true, "seed for everything random in the run"},
    {"--timeout", true, "deadline of each operation in seconds (0: none; default 300; at most 7 days)"},
    {"--list", false, "list the bundled recipes with versions and summaries"},
    {"--check", false, "load and validate the recipe and its options, run nothing"},
    {"--no-check", false, nullptr},
    {"--trusted", false, "lift the recipe sandbox (os, io, ffi, require of any module)"},
    {"--no-verify", false, "no call verification (ranks agreeing on each untimed operation's shape before it runs)"},
    {"--insecure-control-plane", false,
     "--launcher env/slurm without a job token: admit any process that reaches the store (a trusted network "
     "only; docs/security.md); the same as COMMSCRIPT_JOB_TOKEN=insecure"},
    {"--baseline", true, "an earlier report.json: regressions beyond the tolerance become findings"},
    {"--fail-below", true, "exit 3 when the scorecard's total is below this (0-100)"},
    {"--metrics", true,
     "write the run's metrics to FILE (Prometheus text; node_exporter's textfile collector), per interval "
     "and at the end (docs/monitoring.md)"},
    {"--metrics-listen", true,
     "serve the run's metrics at http://ADDRESS:PORT/metrics while it lasts (e.g. 127.0.0.1:9400)"},
    {"--replay", true, "run again what an earlier report.json recorded (recipe source, options, config, chaos, seed)"},
    {"--help", false, nullptr},
};

// The entry of `name` ("--config"), nullptr when commscript has no such option.
inline const CliOption* find_cli_option(const char* name) {
  for (const auto& o : kCliOptions)
    if (std::strcmp(o.name, name) == 0) return &o;
  return nullptr;
}

}  // namespace cs
