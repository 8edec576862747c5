#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>

#include "control_peer.hpp"
#include "coordinator.hpp"
#include "error.hpp"
#include "flight_recorder.hpp"
#include "job.hpp"
#include "json_text.hpp"
#include "launch_env.hpp"
#include "progress.hpp"

namespace cs {

using namespace coord;

namespace {

Beat sample_progress() {
  const Progress& p = Progress::instance();
  const OpRecord cur = p.current();
  Beat b;
  b.started = p.ops_started();
  b.in_flight = p.in_flight();
  b.seq = cur.seq;
  b.cseq = cur.cseq;
  b.coll = std::string(collective_name(cur.coll));
  b.bytes = cur.bytes;
  b.age_ms = cur.start_ns ? static_cast<double>(now_ns() - cur.start_ns) * 1e-6 : 0.0;
  b.comm = std::string(cur.comm_name());
  b.deadline_s = cur.deadline_s;
  b.count = cur.count;
  b.dtype = cur.dtype;
  b.site = p.site().substr(0, 200);
  if (!b.in_flight) {
    const Progress::LuaSite lua = p.lua_sample();
    if (!lua.site.empty() && lua.ops == b.started) {  // sampled since its latest operation started
      const int64_t now = now_ns();
      b.lua = lua.site.substr(0, 200);
      b.lua_for_ms = static_cast<double>(now - lua.since_ns) * 1e-6;
      b.lua_age_ms = static_cast<double>(now - lua.at_ns) * 1e-6;
    }
  }
  return b;
}

// When rank 0 is gone: what happens to this rank, by launcher.
std::string rank_aftermath(const std::string& launcher) {
  if (launcher == "env")
    return "the launcher (--launcher env) does not end this rank: it goes on until an operation fails or passes its "
           "deadline";
  if (launcher == "slurm") return "srun (--launcher slurm) may end this rank";
  return "mpirun ends this rank";
}

// How long a rank that lost the coordinator waits before it says so: under mpirun, the
// launcher usually ends it first (rank 0's exit is the news, not this).
constexpr int kLostNoteDelayMs = 1000;

}  // namespace

// ---------------------------------------------------------------- client

HeartbeatClient::HeartbeatClient(const std::string& endpoint, int rank, const std::string& host, bool same_host_as_root,
                                 int interval_ms)
    : HeartbeatClient(Options{endpoint, "", same_host_as_root, rank, host, "?", "mpi", interval_ms, nullptr}) {}

HeartbeatClient::HeartbeatClient(Options o) : o_(std::move(o)) {
  if (!o_.sample) o_.sample = sample_progress;
  if (!o_.coordinator.empty()) {
    fd_ = connect_endpoint(o_.endpoint, /*same_host=*/true, kConnectTimeoutMs);
    via_relay_ = fd_ >= 0;
    if (fd_ >= 0) write_all(fd_, encode_hello(o_.rank, o_.host, getpid()) + "\n");
  }
  if (fd_ < 0 && !connect_direct()) return;
  thread_ = std::thread([this] { loop(); });
}

bool HeartbeatClient::connect_direct() {
  const std::string& ep = o_.coordinator.empty() ? o_.endpoint : o_.coordinator;
  const int fd = connect_endpoint(ep, o_.same_host_as_root, kConnectTimeoutMs);
  std::lock_guard<std::mutex> g(write_mu_);
  if (fd_ >= 0) {
    // Leaving a relay on purpose: closing this connection is no death.
    if (via_relay_) write_all(fd_, "MOVE\n");
    close(fd_);
  }
  fd_ = fd;
  via_relay_ = false;
  if (fd_ < 0) return false;
  write_all(fd_, encode_hello(o_.rank, o_.host, getpid()) + "\n");
  return true;
}

HeartbeatClient::~HeartbeatClient() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (dropped_) return;
  send_line("BYE");  // a clean end: the coordinator must not take the closed connection for a death
  std::lock_guard<std::mutex> g(write_mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void HeartbeatClient::drop_without_goodbye() {
  dropped_ = true;
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> g(write_mu_);
  if (fd_ >= 0) {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
  }
  fd_ = -1;
}

void HeartbeatClient::send_line(const std::string& s) {
  std::lock_guard<std::mutex> g(write_mu_);
  if (fd_ >= 0 && !dropped_) write_all(fd_, s + "\n");
}

void HeartbeatClient::send_event(const nlohmann::json& ev) { send_line("EV " + json_text(ev)); }

void HeartbeatClient::announce_comm(const std::string& name) { send_line("COMM " + json_text(name)); }

void HeartbeatClient::send_goodbye(const char* why) { send_line(std::string("BYE ") + why); }

namespace {

// Whether process `pid` is stopped by a signal (state T in /proc/PID/stat; a debugger's stop is
// t and is left alone).
bool stopped_by_signal(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return false;
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

}  // namespace

bool HeartbeatClient::report_failure(int code, const std::string& message, int wait_ms) {
  if (fd_ < 0) return false;
  send_line("ERR " + std::to_string(code) + " " + json_text(cap_message(message)));
  // Rank 0 is stopped (SIGSTOP): the others waited for it, and only its coordinator can say so.
  // Resumed now, it judges on what it knew and on its own clock's jump (Coordinator::pump);
  // otherwise the launcher's kill (SIGCONT, SIGTERM, SIGKILL a second later under mpirun; never
  // under --launcher env) would leave it no time for the verdict.
  if (o_.root_pid > 0 && stopped_by_signal(o_.root_pid)) {
    std::fprintf(stderr,
                 "commscript: rank %d: rank 0 (pid %d, host %s), which runs the coordinator, is stopped (SIGSTOP); "
                 "resuming it (SIGCONT) so that it gives the verdict\n",
                 o_.rank, o_.root_pid, o_.root_host.c_str());
    std::fflush(stderr);
    ::kill(o_.root_pid, SIGCONT);
  }
  for (int waited = 0; waited < wait_ms && !acked_; waited += kAckPollMs)
    std::this_thread::sleep_for(std::chrono::milliseconds(kAckPollMs));
  return acked_;
}

void HeartbeatClient::coordinator_lost(const std::string& why) {
  if (o_.launcher == "mpi") {  // mpirun usually ends this rank first
    for (int waited = 0; waited < kLostNoteDelayMs && !stop_; waited += kHeartbeatMs)
      std::this_thread::sleep_for(std::chrono::milliseconds(kHeartbeatMs));
    if (stop_) return;
  }
  std::fprintf(stderr, "commscript: rank %d: lost the coordinator (rank 0, host %s): %s; %s\n", o_.rank,
               o_.root_host.c_str(), why.c_str(), rank_aftermath(o_.launcher).c_str());
  std::fflush(stderr);
}

void HeartbeatClient::loop() {
  LineBuffer in;
  int64_t heard_ns = now_ns();  // the last time the relay said anything
  while (!stop_) {
    if (frozen_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    send_line(encode_beat(o_.sample()));
    pollfd pf{fd_, POLLIN, 0};
    bool lost = false, relay_silent = false, relay_end = false;
    if (poll(&pf, 1, o_.interval_ms) > 0) {
      lost = !drain(fd_, in);
      if (!lost) heard_ns = now_ns();
      std::string cmd;
      while (in.next(&cmd)) {
        if (cmd == "DUMP") send_line("RING " + json_text(flight_ring_json()));
        if (cmd == "ACK") acked_ = true;
        if (cmd.rfind("CANCEL ", 0) == 0) job::request_cancel(std::atoi(cmd.c_str() + 7));
        if (cmd == "END" || cmd.rfind("END ", 0) == 0) return;  // the coordinator ended on purpose
        if (cmd == "LOST") {                                    // the relay lost the coordinator
          coordinator_lost("its connection to this host's relay closed without a word, so rank 0 died");
          return;
        }
        if (cmd == "RELAYEND") lost = relay_end = true;  // the leader is done: go to rank 0 directly
      }
    } else if (via_relay_ && now_ns() - heard_ns > static_cast<int64_t>(kRelaySilentFailoverMs) * 1000000) {
      relay_silent = true;  // the leader is frozen (stopped, swapping): do not depend on it
    }
    if (stop_) return;
    if (lost || relay_silent) {
      if (!via_relay_) {
        coordinator_lost("its connection closed without a word, so rank 0 died");
        return;
      }
      in.take_rest();
      if (!connect_direct()) {
        if (!relay_end) coordinator_lost("neither this host's relay nor rank 0 answers");
        return;  // after the relay's clean end, rank 0 may well be done too
      }
      heard_ns = now_ns();
    }
  }
}

}  // namespace cs
