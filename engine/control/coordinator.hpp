#pragma once
// Out-of-band view of every rank, independent of MPI (docs/hangs-chaos-replay.md): each rank
// streams a heartbeat (its operation in flight, sequence number, injections) over TCP to a
// coordinator thread on rank 0. When an operation passes its deadline, the coordinator names the
// ranks that never arrived, telling dead (connection closed), stuck (no progress, or no
// heartbeat at all) and slow (still progressing) apart, and reports ranks that called a
// different operation (desync). It collects every rank's flight recorder, hands the verdict to
// the report, and ends the job with exit code 5.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace cs {

// One rank's side: connects to the coordinator and sends a heartbeat every `interval_ms`.
class HeartbeatClient {
 public:
  HeartbeatClient(const std::string& endpoint, int rank, const std::string& host, bool same_host_as_root,
                  int interval_ms = 100);
  ~HeartbeatClient();
  HeartbeatClient(const HeartbeatClient&) = delete;
  HeartbeatClient& operator=(const HeartbeatClient&) = delete;
  bool connected() const { return fd_ >= 0; }
  void send_event(const nlohmann::json& ev);  // e.g. a chaos injection, sent at once
  // Tells the coordinator this rank is failing (a recipe error) and waits up to wait_ms for it
  // to have saved the report. Returns true when it confirmed.
  bool report_failure(int code, const std::string& message, int wait_ms);
  // This rank is being ended (signal, clean exit): its closing connection is not a death.
  void send_goodbye(const char* why);

 private:
  void loop();
  void send_line(const std::string& s);
  int fd_ = -1;
  int rank_;
  int interval_ms_;
  std::mutex write_mu_;
  std::atomic<bool> acked_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Rank 0's side.
class Coordinator {
 public:
  struct Options {
    int nranks = 1;
    double timeout_s = 300;
    std::string out_dir;
    // Receives the verdict (incident JSON, with "line") after the rings were collected, on the
    // coordinator thread, right before the process exits with code 5.
    std::function<void(const nlohmann::json& incident)> on_timeout;
    // Receives a rank's failure report (rank, exit code, message) on the coordinator thread;
    // the rank waits for it to return before it ends the job.
    std::function<void(int rank, int code, const std::string& message)> on_error;
    // The first rank whose connection closed without saying goodbye: it died. Called once, on
    // the coordinator thread, before mpirun gets to end the others (and rank 0).
    std::function<void(const nlohmann::json& incident)> on_death;
    // false for an embedded run (job.hpp): a verdict (timeout, a rank's failure) cancels the
    // run on every rank (CANCEL over the heartbeat connections) instead of ending the process.
    bool end_process = true;
  };
  explicit Coordinator(Options o);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // "ip1,ip2,...:port" for the clients.
  const std::string& endpoint() const { return endpoint_; }
  // What the coordinator knows now (for a partial report when the job is being killed).
  nlohmann::json snapshot() const;
  // Injections the ranks reported.
  nlohmann::json events() const;
  // Tells every rank to give up the run with `code` (job::request_cancel on each; embedded runs).
  void cancel_all(int code);

 private:
  struct RankState;
  void loop();
  void check_deadlines(int64_t now);
  // Ranks at the same sequence number of a communicator calling different things: a desync,
  // reported at once (call verification keeps MPI from running such a call).
  void check_desync(int64_t now);
  // Long waits are not silent: who arrived and who is missing, every so often.
  void report_waiting(int64_t now);
  nlohmann::json verdict(int stuck_rank, int64_t now) const;
  void end_job(nlohmann::json incident);

  Options o_;
  int listen_fd_ = -1;
  std::string endpoint_;
  mutable std::mutex mu_;
  std::vector<RankState> ranks_;
  std::vector<int> fds_;  // by rank, -1 when not (or no longer) connected
  nlohmann::json events_ = nlohmann::json::array();
  int first_death_ = -1;
  bool judged_ = false;  // a verdict was given (embedded: the run is cancelled, judge no more)
  int64_t last_wait_note_ns_ = 0;
  std::string desync_key_;  // comm#seq where different calls were first seen
  int64_t desync_seen_ns_ = 0;
  std::string waited_op_;  // comm#seq of the wait last reported
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cs
