#pragma once
// A run of one recipe, phase by phase, on a world communicator somebody else started (the CLI
// and the C API through bindings/lua): declare and resolve on every rank, open the report,
// describe the run, guard it (guardian, incidents), arm chaos and the control plane, run the
// recipe through its RecipeHost, adopt the survivors of a dropped rank, agree on the exit code,
// finish report.json and report.html. The recipe's side is only ever reached through RecipeHost.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chaos.hpp"
#include "run_host.hpp"
#include "session.hpp"

namespace cs {

// What a run adds to report.json's "run" section beyond the session.
struct RunInfo {
  std::string replay_of;  // the replayed report's path, or ""
  std::string out;        // --out, or "" for the default directory
  std::vector<ChaosRule> chaos;
  std::string metrics_file, metrics_listen;  // --metrics FILE, --metrics-listen ADDRESS:PORT ("": none)
};

namespace run {

// Runs the recipe on every rank of s.world (collective): the phases below, in order. Returns the
// agreed exit code; a recipe error on any rank ends the job through job::abort with that rank's
// message (embedded: ends the run, never the process).
int run_recipe(Session& s, RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
               const RunInfo& info);

// ---- the phases, in the order run_recipe calls them.

// Every rank declares the recipe and resolves its options the same way: 0, or when any rank
// could not (after the lowest that failed said why) the job's code for it, the same on every
// rank: 1 (bad input), or an engine limit's (2) that ended the top level. *failed_rank: the
// lowest rank that failed (-1: none).
int declare_everywhere(Session& s, RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
                       int* failed_rank = nullptr);

// Rank 0 chooses the output directory, everyone learns it and opens the report. False (after
// rank 0 said why) when any rank could not.
bool open_report(Session& s, const std::string& out, const std::string& recipe_name);

// Rank 0 opens the metrics' file and server (--metrics, --metrics-listen). False (after rank 0
// said why) when it could not; *code: 1 (address, port) or 6 (file).
bool open_metrics(Session& s, const RunInfo& info, const std::string& recipe_name, int* code);

// The report's header: versions, the recipe (with its source, for --replay), the run, the
// environment and which ranks run on which host.
void describe(Session& s, const RecipeHost& host, const RecipeSource& src, const std::vector<std::string>& rargs,
              const RunInfo& info);

// The rank's guardian writes what this rank no longer can if it dies; incidents (an error, a
// timeout, a signal) are saved into the report, report.html through `pages`.
void guard(Session& s, const PageRenderer& pages);

// The recipe through its host: its exit code, or (a recipe error) the job ends (embedded: the
// failure is recorded, the run cancelled elsewhere, and its code returned).
int run_through_host(Session& s, RecipeHost& host);

// A recipe that survived a dropped rank shrank the world: what follows (agreement, result
// gathering) runs among the survivors.
void adopt_survivors(Session& s);

// The exit code every rank returns: the highest of them.
int agree_exit_code(int code);

// Rank 0 writes the final report.json and report.html. Returns the exit code to use.
int finish_report(Session& s, const PageRenderer& pages, nlohmann::json fired, double secs, int code);

// Embedded: every rank gets rank 0's report; then incidents no longer reach this run.
void unguard(Session& s);

}  // namespace run
}  // namespace cs
