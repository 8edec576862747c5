#pragma once
// What happens to a run when something ends it early: a recipe error on any rank, a timeout
// verdict, a dead rank, a signal. Other threads (the signal thread, the coordinator, the abort
// path) reach the run through the pointers attached here; rank 0 adds the incident to
// report.json and saves it (and report.html through the run's PageRenderer).
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator.hpp"
#include "error.hpp"
#include "run_host.hpp"
#include "session.hpp"

namespace cs::incidents {

// The run that incidents are recorded in, and what renders its report.html from a thread other
// than the recipe's (run_host.hpp: a fresh state each time). Any of them may be null.
void attach(Session* s, const PageRenderer* pages);
void attach_control_plane(Coordinator* c, HeartbeatClient* hb);
void detach();

// Adds `incident` to report.json and saves it with run.exit_code = exit_code (null when < 0).
// Rank 0 only; safe from any thread; never throws.
void save(const nlohmann::json& incident, int exit_code);
// This rank is a member of communicator `name`, just made by split or shrink: said to the
// coordinator (HeartbeatClient::announce_comm), so that its verdicts judge members only.
void announce_comm(const std::string& name);
// The flight recorders collected after the coordinator's verdict (a timeout or a desync) was
// saved: added to that incident.
void add_flight_files(const nlohmann::json& files);

// The coordinator heard a rank die (its heartbeat connection closed without a goodbye): waits
// briefly for the dead rank's guardian (guardian.hpp) to write its flight recorder, names its
// last operation, how it ended and its recipe file:line, prints the line and saves the report.
void rank_died(nlohmann::json incident);

// True once an error or timeout verdict is in report.json (what follows it is aftermath).
bool outcome_saved();

// job::abort's hook: a recipe error on this rank. Rank 0 saves the report itself; another rank
// asks the coordinator (rank 0's thread, outside MPI) to save it before MPI_Abort.
void on_abort(ExitCode code, const std::string& message);

// The same for an embedded run, which must return to its host: records the failure (rank 0
// saves it; another rank reports it to the coordinator) and cancels the run on the other ranks
// (job::request_cancel through the coordinator) instead of ending the process.
void fail_run(ExitCode code, const std::string& message);

// SIGTERM/SIGINT/SIGHUP go to one thread from now on (call before MPI starts its threads, which
// inherit the mask): mpirun sends SIGTERM to every rank when one dies or the job is cancelled.
// That thread records what is known (the rank's flight recorder, rank 0's incident) and ends the
// process with 128 + signal.
void start_signal_thread();

}  // namespace cs::incidents
