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
  // timeout_s <= 0 disables it. `on_timeout` receives the one-line verdict before the exit.
  Watchdog(double timeout_s, int rank, std::string host, std::function<void(const std::string&)> on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  double timeout_s() const { return timeout_s_; }

 private:
  void loop();
  double timeout_s_;
  int rank_;
  std::string host_;
  std::function<void(const std::string&)> on_timeout_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cs
