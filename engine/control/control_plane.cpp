#include "control_plane.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "chaos.hpp"
#include "host_name.hpp"
#include "incidents.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "launch_env.hpp"

namespace cs {

namespace {

// This boot of this machine and this process's pid namespace ("" when unknown).
std::string pid_namespace() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (boot.empty() || n <= 0) return "";
  return boot + " " + std::string(ns, static_cast<size_t>(n));
}

// Each other host's first address (allgathered: every rank calls it), for job_address.
std::vector<std::string> other_hosts_addresses(Session& s, const std::vector<std::string>& hosts) {
  std::vector<std::string> peers;
  const std::vector<std::string> addrs = s.world->allgather(host_ipv4s());
  std::vector<std::string> seen;
  for (size_t r = 0; r < hosts.size(); ++r)
    if (hosts[r] != hosts[0] && std::find(seen.begin(), seen.end(), hosts[r]) == seen.end()) {
      seen.push_back(hosts[r]);
      peers.push_back(addrs[r].substr(0, addrs[r].find(',')));
    }
  return peers;
}

// The connections rank 0's coordinator expects: each rank on its own host, one relay per other host.
size_t connections_to_root(const std::vector<std::string>& hosts, const std::string& root_host) {
  size_t conns = 0;
  std::vector<std::string> seen;
  for (const auto& h : hosts) {
    if (h == root_host) {
      ++conns;
    } else if (std::find(seen.begin(), seen.end(), h) == seen.end()) {
      seen.push_back(h);
      ++conns;
    }
  }
  return conns;
}

// Rank 0's coordinator, its verdicts saved as incidents; null (with a warning) when it cannot listen.
std::unique_ptr<Coordinator> open_coordinator(Session& s, bool all_local, const std::vector<std::string>& peers,
                                              const std::string& launcher) {
  try {
    Coordinator::Options co;
    co.loopback_only = all_local;
    if (!all_local) co.bind_ip = job_address(peers);
    co.nranks = s.size();
    co.timeout_s = s.timeout_s;
    co.out_dir = s.out_dir;
    co.end_process = !s.embedded;
    co.launcher = launcher;
    co.on_timeout = [](const nlohmann::json& inc) { incidents::save(inc, static_cast<int>(ExitCode::hang_or_desync)); };
    co.on_flight_files = [](const nlohmann::json& files) { incidents::add_flight_files(files); };
    co.on_death = [](const nlohmann::json& inc) {
      // A rank that failed (recipe error, timeout) and was then ended is not news.
      if (incidents::outcome_saved()) return;
      incidents::rank_died(inc);  // names its last operation from its guardian's flight recorder
    };
    co.on_error = [](int rank, int code, const std::string& msg) {
      incidents::save({{"kind", "error"}, {"rank", rank}, {"exit_code", code}, {"message", msg}}, code);
    };
    return std::make_unique<Coordinator>(std::move(co));
  } catch (const Error& e) {
    std::fprintf(stderr, "commscript: warning: %s; missing ranks will not be named on a timeout\n", e.what());
  }
  return nullptr;
}

}  // namespace

ControlPlane::ControlPlane(Session& s) {
  const std::string host = host_name();
  // The host this rank's heartbeat is grouped by: its host name, or (tests: several "hosts" on
  // one machine) COMMSCRIPT_CONTROL_HOST.
  const char* as_host = std::getenv("COMMSCRIPT_CONTROL_HOST");
  const bool one_machine = as_host && *as_host;  // then loopback reaches rank 0 from every "host"
  const std::string group = one_machine ? std::string(as_host) : host;
  const std::string launcher = s.launcher.is_object() ? s.launcher.value("kind", std::string("mpi")) : "mpi";
  if (s.backend != "self") {  // mpi, gloo, and nccl (whose control plane is MPI or the store)
    std::string endpoint;
    // Which "host" each rank is on: all on rank 0's, the coordinator listens on loopback only.
    const std::vector<std::string> hosts = s.world->allgather(group);
    const bool all_local =
        one_machine || std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; });
    // The job's secret for the control plane (docs/security.md): drawn by rank 0, given to the
    // others over the world communicator (MPI, or Gloo admitted by the job token) before any
    // control-plane socket opens; every listener admits only a peer that proves it.
    // Each host's addresses: rank 0 listens only on its own address that the others are
    // reached from (job_address), not on every interface.
    const std::vector<std::string> peers = all_local ? std::vector<std::string>{} : other_hosts_addresses(s, hosts);
    std::string secret;
    if (s.rank() == 0) secret = job_auth::random_secret();
    secret = s.world->broadcast(secret, 0);
    coord::set_job_secret(secret);
    if (s.rank() == 0) {
      coordinator_ = open_coordinator(s, all_local, peers, launcher);
      if (coordinator_) endpoint = coordinator_->endpoint();
    }
    endpoint = s.world->broadcast(endpoint, 0);
    const std::string root_host = s.world->broadcast(group, 0);
    // Rank 0's process id, where it means the same process here: the same boot of the same
    // machine and the same pid namespace (a stopped rank 0 is resumed for its verdict:
    // HeartbeatClient::report_failure). Host names can repeat across containers.
    const std::string pid_space = pid_namespace();
    const std::string root_machine = s.world->broadcast(pid_space, 0);
    const int root_pid = std::atoi(s.world->broadcast(std::to_string(getpid()), 0).c_str());
    if (!endpoint.empty()) {
      // Heartbeats aggregated per host: the lowest rank of each host relays its host's beats,
      // so rank 0 holds one connection per host (plus its own host's ranks).
      const int leader = static_cast<int>(std::find(hosts.begin(), hosts.end(), group) - hosts.begin());
      if (coordinator_) coordinator_->expect_connections(connections_to_root(hosts, root_host));
      if (group != root_host && s.rank() == leader) {
        relay_ = std::make_unique<HostRelay>(s.rank(), group, endpoint, one_machine);
        if (!relay_->connected()) relay_.reset();
      }
      const std::vector<std::string> relays = s.world->allgather(relay_ ? relay_->endpoint() : std::string());
      HeartbeatClient::Options ho;
      const std::string& mine = relays[static_cast<size_t>(leader)];
      ho.endpoint = group == root_host || mine.empty() ? endpoint : mine;
      ho.coordinator = group == root_host || mine.empty() ? "" : endpoint;
      ho.same_host_as_root = group == root_host || one_machine;
      ho.rank = s.rank();
      ho.host = group;
      ho.root_host = root_host;
      ho.launcher = launcher;
      ho.root_pid = s.rank() != 0 && !pid_space.empty() && root_machine == pid_space ? root_pid : -1;
      heartbeat_ = std::make_unique<HeartbeatClient>(std::move(ho));
    }
  }
  incidents::attach_control_plane(coordinator_.get(), heartbeat_.get());
  const bool judged = coordinator_ || heartbeat_;
  Communicator::set_judge_grace(judged ? kJudgeGraceS : 0);
  s.world->set_timeout(s.timeout_s);

  Chaos::instance().set_identity(s.rank(), host);
  Chaos::instance().set_deadline(s.timeout_s, judged ? kWatchdogGraceS : 0, !s.embedded);
  Chaos::instance().on_fire([this](const nlohmann::json& ev) {
    if (heartbeat_) heartbeat_->send_event(ev);
  });

  // Each rank's own deadline: the fallback when no coordinator can judge (it normally acts first).
  watchdog_ = std::make_unique<Watchdog>(
      judged ? kWatchdogGraceS : 0, s.rank(), host,
      [](const std::string& line) {
        incidents::save({{"kind", "timeout"}, {"line", line}, {"detected_by", "rank watchdog"}},
                        static_cast<int>(ExitCode::hang_or_desync));
      },
      !s.embedded);
}

nlohmann::json ControlPlane::fired_injections(Session& s) {
  nlohmann::json fired = nlohmann::json::array();
  // Embedded, on the control communicator: a cancelled run may have left the world's requests pending.
  const std::string mine = json_text(Chaos::instance().fired());
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
  relay_.reset();
  coordinator_.reset();
}

}  // namespace cs
