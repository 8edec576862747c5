#pragma once
// The run's out-of-band side, outside the data path: a coordinator thread on rank 0, a
// heartbeat from every rank relayed by its host's leader (coordinator.hpp), each rank's own
// watchdog as the fallback judge, and the deadline policy that ties them together. Started after the world communicator
// and the report exist; stopped (in reverse) when the recipe has finished.
#include <memory>

#include "coordinator.hpp"
#include "session.hpp"
#include "watchdog.hpp"

namespace cs {

// How much later than its deadline a rank gives up waiting on its own when the coordinator is
// there to judge first, and when the rank's watchdog acts.
inline constexpr double kJudgeGraceS = 5;
inline constexpr double kWatchdogGraceS = 10;

class ControlPlane {
 public:
  // Collective over s.world. Rank 0 starts the coordinator (its failure to start is a warning:
  // missing ranks will then not be named); every rank connects its heartbeat and starts its
  // watchdog; incidents (incidents.hpp) go to s.report. The world's deadline becomes
  // s.timeout_s with the grace above.
  explicit ControlPlane(Session& s);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // The chaos injections that fired anywhere (from every rank; collective), once the recipe is done.
  nlohmann::json fired_injections(Session& s);
  // Stops the heartbeat (the recipe is done: its closing connection is not a death).
  void stop_heartbeat();

 private:
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<HostRelay> relay_;  // this rank leads its host (not rank 0's host)
  std::unique_ptr<HeartbeatClient> heartbeat_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace cs
