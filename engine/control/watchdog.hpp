#pragma once
// A thread per rank that watches the operation in flight (Progress) and ends the job with exit
// code 5 when one runs past its deadline, instead of hanging. It never calls MPI: it prints,
// runs the timeout hook (flight-recorder dump) and _exits; mpirun then stops the other ranks.
#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace cs {

class Watchdog {
 public:
  // Each operation carries its own deadline (Communicator::set_timeout, recorded by Progress);
  // the watchdog acts `grace_s` after it. An operation without a deadline is never timed out.
  // `on_timeout` receives the one-line verdict before the exit.
  // With end_process false (an embedded run) it cancels the run (job::request_cancel) instead of
  // ending the process; an operation blocked inside MPI then returns only if its peers arrive.
  Watchdog(double grace_s, int rank, std::string host, std::function<void(const std::string&)> on_timeout,
           bool end_process = true);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  double grace_s() const { return grace_s_; }

 private:
  void loop();
  double grace_s_;
  int rank_;
  std::string host_;
  std::function<void(const std::string&)> on_timeout_;
  bool end_process_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cs
