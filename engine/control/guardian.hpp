#pragma once
// Each rank's guardian (docs/guardian.md): a small process forked before MPI starts, which
// outlives its rank. The rank tells it, over a pipe, where the outputs go and (rank 0) the
// report's header; its flight recorder is shared memory (comm/progress.hpp). When the rank ends
// without releasing it (SIGKILL, a crash, the OOM killer), the guardian writes what the rank no
// longer can: flight/rank-N.json with the operation it was in and its recipe file:line, and on
// rank 0 report.json from the header, results.jsonl and every rank's flight recorder, with an
// incident naming the dead rank. It never talks to MPI and never holds the job up for more than
// a few seconds.
#include <nlohmann/json.hpp>
#include <string>

#include "run_host.hpp"

namespace cs::guardian {

// Forks the guardian. Call before any thread or MPI exists. False (and no guardian) when the
// fork failed or COMMSCRIPT_NO_GUARDIAN is set. `pages` (may be null: no report.html) is what
// rank 0's guardian renders report.html with after writing a partial report.json; the guardian
// is a fork, so it must exist before start() and outlive the process.
bool start(const PageRenderer* pages);

// Writes `html_path` from the report.json at `json_path`, or returns false with *why.
using HtmlRenderer = bool (*)(const std::string& json_path, const std::string& html_path, std::string* why);

// The run's output directory is known: what the guardian needs to write there.
void watch(const std::string& out_dir, int rank, int size, const std::string& host);

// Rank 0: report.json as it stands before the recipe runs (versions, recipe, run, env).
void header(const nlohmann::json& doc);

// The process is ending as it means to (a clean end, or after saving its own report): the
// guardian exits without writing anything.
void release();

// ---- the guardian's side, for tests: what it writes when rank `rank` died.
struct Death {
  std::string out_dir;
  int rank = 0;
  int size = 1;
  std::string host;
  int pid = 0;
  int signal = 0;         // the signal that ended it, 0 when unknown
  int status = -1;        // its exit status, -1 when unknown or killed by a signal
  nlohmann::json header;  // rank 0: the report's header (null: none was sent)
  nlohmann::json ops;     // its flight recorder (flight_recorder.hpp records)
  std::string site;       // the recipe file:line of its latest verified call
  std::string lua_site;   // where its Lua code was last seen running
  double lua_age_s = -1;  // how long ago (-1: never)
};

// What a dead rank's guardian wrote into flight/rank-N.json, back as a Death (out_dir unset).
// False when the file is not (yet) a guardian's.
bool death_from_flight_file(const nlohmann::json& file, Death* d);

// Writes flight/rank-N.json (unless the rank wrote its own) and, for rank 0, report.json;
// returns the incident recorded (also printed to stderr by rank 0's guardian).
nlohmann::json write_after_death(const Death& d, double wait_for_others_s);

// report.html from dir/report.json through `render` in a child process, killed after
// `timeout_s`: an odd report, a renderer that hangs or crashes costs at most that and leaves no
// report.html (nor a partial one). True when report.html was written.
bool render_html_bounded(HtmlRenderer render, const std::string& dir, double timeout_s, std::string* why);

// The incident's message: "rank 0 (host h, pid p) was killed by SIGKILL during allreduce #12
// on world (in flight 1.2 s; called at recipe.lua:17); ..."
std::string death_message(const Death& d);

}  // namespace cs::guardian
