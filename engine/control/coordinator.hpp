#pragma once
// Out-of-band view of every rank, independent of MPI (docs/hangs-chaos-replay.md): each rank
// streams a heartbeat (its operation in flight, sequence number, injections) to a coordinator
// thread on rank 0. When an operation passes its deadline, the coordinator names the ranks that
// never arrived, telling dead (connection closed), stuck (no progress, or no heartbeat at all)
// and slow (still progressing) apart, and reports ranks that called a different operation
// (desync). It collects every rank's flight recorder, hands the verdict to the report, and ends
// the job with exit code 5.
//
// At scale, heartbeats are aggregated per host: the lowest rank of each host (its leader) runs a
// HostRelay that its host's ranks connect to over loopback, and forwards one message per interval
// carrying every rank's latest beat and its age, so rank 0 holds O(hosts) connections and the
// verdict stays exact. Ranks on rank 0's own host connect to the coordinator directly. The
// protocol is coordinator_wire.hpp, the judgement coordinator_verdict.hpp (pure), the timing
// constants coordinator_timing.hpp; this file is the I/O.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "coordinator_timing.hpp"
#include "coordinator_verdict.hpp"
#include "coordinator_wire.hpp"
#include "deadline.hpp"

namespace cs {

// Raises the soft limit on open files to at least `needed` (up to the hard limit). Returns an
// empty string when there are enough, else a message with the numbers.
std::string ensure_open_files(size_t needed);

// One rank's side: connects to its host's relay (or the coordinator) and sends a heartbeat every
// interval; falls back to the coordinator itself when the relay is lost.
class HeartbeatClient {
 public:
  struct Options {
    std::string endpoint;     // the host relay, or the coordinator ("ip1,ip2:port")
    std::string coordinator;  // the coordinator, when `endpoint` is a relay ("" otherwise)
    bool same_host_as_root = false;
    int rank = 0;
    std::string host;
    std::string root_host;         // rank 0's host (for the message when it is lost)
    std::string launcher = "mpi";  // "mpi", "env", "slurm": who ends this rank when rank 0 dies
    int interval_ms = coord::kHeartbeatMs;
    std::function<coord::Beat()> sample;  // what to report; default: this process's Progress
    // Rank 0's process id when it runs on this machine (-1 otherwise): a failing rank that finds
    // it stopped (SIGSTOP) resumes it, so that the coordinator gives the verdict (report_failure).
    int root_pid = -1;
  };
  explicit HeartbeatClient(Options o);
  // The historical form: straight to the coordinator.
  HeartbeatClient(const std::string& endpoint, int rank, const std::string& host, bool same_host_as_root,
                  int interval_ms = coord::kHeartbeatMs);
  ~HeartbeatClient();
  HeartbeatClient(const HeartbeatClient&) = delete;
  HeartbeatClient& operator=(const HeartbeatClient&) = delete;
  bool connected() const { return fd_ >= 0; }
  bool via_relay() const { return via_relay_; }
  void send_event(const nlohmann::json& ev);  // e.g. a chaos injection, sent at once
  // This rank is a member of communicator `name` (made by split or shrink): a timeout on it
  // judges its members only.
  void announce_comm(const std::string& name);
  // Tells the coordinator this rank is failing (a recipe error) and waits up to wait_ms for it
  // to have saved the report. Returns true when it confirmed.
  bool report_failure(int code, const std::string& message, int wait_ms);
  // This rank is being ended (signal, clean exit): its closing connection is not a death.
  void send_goodbye(const char* why);
  // Tests: stop as a killed process would, without a goodbye.
  void drop_without_goodbye();
  // Tests: stop as a SIGSTOPped process would (the connection stays open, nothing is sent).
  void freeze() { frozen_ = true; }

 private:
  void loop();
  bool connect_direct();
  void send_line(const std::string& s);
  void coordinator_lost(const std::string& why);
  Options o_;
  int fd_ = -1;
  std::atomic<bool> via_relay_{false};
  std::mutex write_mu_;
  std::atomic<bool> acked_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> dropped_{false};
  std::atomic<bool> frozen_{false};
  std::thread thread_;
};

// A host leader's side: serves its host's ranks on loopback and forwards their beats to the
// coordinator as one message per interval; other lines (events, failures, goodbyes, flight
// recorders) go through at once, and a rank whose connection closes without a goodbye is
// reported as gone.
class HostRelay {
 public:
  HostRelay(int leader, std::string host, const std::string& coordinator, bool same_host_as_root);
  ~HostRelay();
  HostRelay(const HostRelay&) = delete;
  HostRelay& operator=(const HostRelay&) = delete;
  bool connected() const { return up_fd_ >= 0; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  // Tests: vanish as a killed process would (every connection closed, nothing said).
  void drop_without_goodbye();
  // Tests: stop as a SIGSTOPped process would (connections open, nothing read, nothing sent).
  void freeze() { frozen_ = true; }

 private:
  struct Follower;
  void loop();
  // The steps of one pass of the loop, on its thread.
  void accept_followers();
  bool read_coordinator();  // false when the coordinator's connection ended
  void read_follower(Follower& f, int64_t now, std::string& out);
  void drop_unproven(int64_t now);
  std::string tick(int64_t now);  // the host's beats for the coordinator; TICK to each rank
  void close_followers(bool say_lost);
  void vanish();
  void end_cleanly();
  int leader_;
  std::string host_;
  int listen_fd_ = -1, up_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> dropped_{false};
  std::atomic<bool> frozen_{false};
  std::thread thread_;
  // Owned by the loop's thread.
  std::vector<std::unique_ptr<Follower>> fs_;
  coord::LineBuffer up_in_;
  bool up_ended_ = false;  // the coordinator said END
};

// This host's IPv4 addresses other than loopback, comma-separated ("" when none).
std::string host_ipv4s();
// The one address of this host that every address in `peers` (each host's first address) is
// routed from, as the kernel picks a source (a UDP socket connected to each, nothing sent);
// "" when they differ or none is routable: the coordinator then listens on every interface.
std::string job_address(const std::vector<std::string>& peers);

// Rank 0's side.
class Coordinator {
 public:
  struct Options {
    int nranks = 1;
    double timeout_s = kDefaultTimeoutS;
    std::string out_dir;
    std::string launcher = "mpi";  // named in the death message (who ends the job)
    // Receives the verdict (incident JSON, with "line") on the coordinator thread as soon as it
    // is reached (saved before anything else can end the process), then on_flight_files the
    // flight recorders collected after it, right before the process exits with code 5.
    std::function<void(const nlohmann::json& incident)> on_timeout;
    std::function<void(const nlohmann::json& files)> on_flight_files;
    // The same verdict at the moment it is reached, before the rings are collected (tests, bench).
    std::function<void(const nlohmann::json& incident)> on_verdict;
    // Receives a rank's failure report (rank, exit code, message) on the coordinator thread;
    // the rank waits for it to return before it ends the job.
    std::function<void(int rank, int code, const std::string& message)> on_error;
    // The first rank whose connection closed without saying goodbye: it died. Called once, on
    // the coordinator thread, before the launcher gets to end the others (and rank 0).
    std::function<void(const nlohmann::json& incident)> on_death;
    // false for an embedded run (job.hpp): a verdict (timeout, a rank's failure) cancels the
    // run on every rank (CANCEL over the heartbeat connections) instead of ending the process.
    bool end_process = true;
    // Connections expected (hosts + ranks on rank 0's host); the open-files limit is raised for it.
    size_t expected_connections = 0;
    // Every rank on rank 0's host (or reaching it over loopback): listen on 127.0.0.1 only.
    // Otherwise on every interface (the other hosts dial whichever of rank 0's addresses
    // reaches them); admission by the job's secret either way (docs/security.md).
    bool loopback_only = false;
    // Otherwise: the address of this host that the job's other hosts are reached from (see
    // job_address), listened on alone; "" when none is known (every interface, said so).
    std::string bind_ip;
  };
  explicit Coordinator(Options o);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // "ip1,ip2,...:port" for the clients.
  const std::string& endpoint() const { return endpoint_; }
  // Raises the open-files limit for `n` connections (a warning with the numbers when it cannot).
  void expect_connections(size_t n);
  // What the coordinator knows now (for a partial report when the job is being killed).
  nlohmann::json snapshot() const;
  // Injections the ranks reported.
  nlohmann::json events() const;
  // Tells every rank to give up the run with `code` (job::request_cancel on each; embedded runs).
  void cancel_all(int code);
  // A signal that ends rank 0 calls this first: when the coordinator thread was frozen with the
  // process (no tick for kStallNs past its wait) or is giving a verdict, waits up to max_ms for
  // the verdict to be saved. Returns true when one was.
  bool await_verdict(int max_ms);
  // CPU seconds the coordinator thread has used (bench).
  double cpu_seconds() const;
  // Connections held now: ranks connected directly, host relays (tests, bench).
  size_t connections() const;

 private:
  struct Conn;
  struct Outcome;
  void loop();
  // Waits up to timeout_ms for input and handles it (under mu_); deaths and failures go to `out`.
  void pump(int timeout_ms, Outcome& out);
  void accept_peers(int64_t now);                     // under mu_
  void read_peer(int fd, int64_t now, Outcome& out);  // under mu_
  void handle_rank_line(int rank, const std::string& line, int64_t now, Outcome& out);
  void handle_relay_line(Conn& c, const std::string& line, int64_t now, Outcome& out);
  void closed(Conn& c, Outcome& out);
  void drop_unproven(int64_t now);                 // under mu_
  void send_to(int rank, const std::string& cmd);  // under mu_
  void send_all(const std::string& cmd);           // under mu_
  void judge(int64_t now);
  void end_job(nlohmann::json incident);

  Options o_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::string endpoint_;
  mutable std::mutex mu_;
  coord::Ranks ranks_;
  std::vector<int> rank_fd_;                              // direct connection by rank, -1 when none
  std::map<int, int> relay_fd_;                           // host leader -> its relay's connection
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // by fd
  std::atomic<size_t> unproven_{0};                       // connections that have not proved the secret (under mu_)
  std::vector<nlohmann::json> rings_;
  nlohmann::json events_ = nlohmann::json::array();
  int first_death_ = -1;
  std::atomic<bool> judged_{false};  // a verdict was given (embedded: the run is cancelled, judge no more)
  // The loop's last tick and the longest it meant to wait from there (a freeze shows as more).
  std::atomic<int64_t> tick_ns_{0}, tick_wait_ns_{0};
  std::atomic<bool> stalled_{false};        // the loop found its process was frozen: judge first
  std::atomic<bool> verdict_saved_{false};  // on_timeout has returned
  coord::WaitMemo wait_memo_;
  coord::DesyncMemo desync_memo_;
  int64_t start_ns_ = 0, next_judge_ns_ = 0, next_deadline_ns_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cs
