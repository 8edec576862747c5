#pragma once
// Everything one run of a recipe shares: the config, the world communicator, the report, and
// the settings from the command line. Lives in the CLI's main; the bindings reach it through
// an upvalue.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "config.hpp"
#include "metrics.hpp"
#include "report.hpp"

namespace cs {

class Session {
 public:
  Config config;
  std::shared_ptr<Communicator> world;
  std::unique_ptr<Report> report;
  std::string backend = "mpi";
  bool trusted = false;
  bool verify = true;  // call verification (--no-verify turns it off)
  uint64_t seed = 0;
  double timeout_s = 0;
  std::string out_dir;
  std::vector<std::string> argv;         // the whole command line, for the report
  std::string baseline;                  // --baseline: an earlier report.json to compare against
  double fail_below = -1;                // --fail-below: exit 3 when the score is lower
  std::shared_ptr<MetricsSink> metrics;  // --metrics / --metrics-listen, on rank 0 while the run lasts
  // This rank and the ranks in the world: the world's own, never a copy (0 and 1 before there
  // is one). The signal thread (incidents::on_signal) reads them while the main thread may swap
  // the world for its survivors (run.cpp adopt_survivors): the pointer is read and swapped
  // atomically (set_world), so the reader holds a world that stays alive while it asks.
  int rank() const {
    auto w = std::atomic_load(&world);
    return w ? w->rank() : 0;
  }
  int size() const {
    auto w = std::atomic_load(&world);
    return w ? w->size() : 1;
  }
  void set_world(std::shared_ptr<Communicator> w) { std::atomic_store(&world, std::move(w)); }
  // Embedded in a host program (libcommscript): a failure ends the run, never the process; no
  // signal thread; the ranks agree on the outcome and every rank gets the report.
  bool embedded = false;
  nlohmann::json host_mpi;  // embedded: what the host's MPI is (recorded in run.embedded)
  std::string last_error;   // the message of the failure that ended the run, if any
  std::string report_json;  // embedded: the final report.json, on every rank
  nlohmann::json launcher;  // how the ranks were started (LaunchEnv::to_json; null: mpi)
};

}  // namespace cs
