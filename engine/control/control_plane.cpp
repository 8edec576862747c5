#include "control_plane.hpp"

#include <cstdio>

#include "chaos.hpp"
#include "host_name.hpp"
#include "incidents.hpp"
#include "job.hpp"

namespace cs {

ControlPlane::ControlPlane(Session& s) {
  const std::string host = host_name();
  if (s.backend != "self") {  // mpi, and nccl (whose control plane is MPI)
    std::string endpoint;
    if (s.rank == 0) {
      try {
        Coordinator::Options co;
        co.nranks = s.size;
        co.timeout_s = s.timeout_s;
        co.out_dir = s.out_dir;
        co.end_process = !s.embedded;
        co.on_timeout = [](const nlohmann::json& inc) { incidents::save(inc, static_cast<int>(ExitCode::timeout)); };
        co.on_death = [](const nlohmann::json& inc) {
          // A rank that failed (recipe error, timeout) and was then ended is not news.
          if (incidents::outcome_saved()) return;
          incidents::rank_died(inc);  // names its last operation from its guardian's flight recorder
        };
        co.on_error = [](int rank, int code, const std::string& msg) {
          incidents::save({{"kind", "error"}, {"rank", rank}, {"exit_code", code}, {"message", msg}}, code);
        };
        coordinator_ = std::make_unique<Coordinator>(std::move(co));
        endpoint = coordinator_->endpoint();
      } catch (const Error& e) {
        std::fprintf(stderr, "commscript: warning: %s; missing ranks will not be named on a timeout\n", e.what());
      }
    }
    endpoint = s.world->broadcast(endpoint, 0);
    const std::string root_host = s.world->broadcast(host, 0);
    if (!endpoint.empty()) heartbeat_ = std::make_unique<HeartbeatClient>(endpoint, s.rank, host, host == root_host);
  }
  incidents::attach_control_plane(coordinator_.get(), heartbeat_.get());
  const bool judged = coordinator_ || heartbeat_;
  Communicator::set_judge_grace(judged ? kJudgeGraceS : 0);
  s.world->set_timeout(s.timeout_s);

  Chaos::instance().set_identity(s.rank, host);
  Chaos::instance().on_fire([this](const nlohmann::json& ev) {
    if (heartbeat_) heartbeat_->send_event(ev);
  });

  // Each rank's own deadline: the fallback when no coordinator can judge (it normally acts first).
  watchdog_ = std::make_unique<Watchdog>(
      judged ? kWatchdogGraceS : 0, s.rank, host,
      [](const std::string& line) {
        incidents::save({{"kind", "timeout"}, {"line", line}, {"detected_by", "rank watchdog"}},
                        static_cast<int>(ExitCode::timeout));
      },
      !s.embedded);
}

nlohmann::json ControlPlane::fired_injections(Session& s) {
  nlohmann::json fired = nlohmann::json::array();
  // Embedded, on the control communicator: a cancelled run may have left the world's requests pending.
  const std::string mine = Chaos::instance().fired().dump();
  for (const auto& part : s.embedded ? job::allgather_strings(mine) : s.world->allgather(mine))
    for (auto& e : nlohmann::json::parse(part)) fired.push_back(e);
  return fired;
}

void ControlPlane::stop_heartbeat() {
  Chaos::instance().on_fire(nullptr);
  incidents::attach_control_plane(coordinator_.get(), nullptr);
  heartbeat_.reset();
}

ControlPlane::~ControlPlane() {
  Chaos::instance().on_fire(nullptr);
  incidents::attach_control_plane(nullptr, nullptr);
  watchdog_.reset();
  heartbeat_.reset();
  coordinator_.reset();
}

}  // namespace cs
