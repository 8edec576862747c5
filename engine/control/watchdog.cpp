#include "watchdog.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "coordinator_timing.hpp"
#include "job.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace cs {

Watchdog::Watchdog(double grace_s, int rank, std::string host, std::function<void(const std::string&)> on_timeout,
                   bool end_process)
    : grace_s_(grace_s),
      rank_(rank),
      host_(std::move(host)),
      on_timeout_(std::move(on_timeout)),
      end_process_(end_process) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(coord::kWatchdogPollMs));
    const Progress& p = Progress::instance();
    if (!p.in_flight()) continue;
    const uint64_t n = p.ops_started();
    const int64_t start = p.current_start_ns();
    const double deadline = p.current().deadline_s;
    if (deadline <= 0) continue;
    const int64_t limit = static_cast<int64_t>((deadline + grace_s_) * 1e9);
    if (now_ns() - start < limit || p.ops_started() != n || !p.in_flight()) continue;
    const OpRecord op = p.current();
    char line[512];
    std::snprintf(line, sizeof line, "timeout: %s #%llu (%sB, %s) after %.1f s on rank %d (host %s)",
                  std::string(collective_name(op.coll)).c_str(), static_cast<unsigned long long>(op.seq),
                  format_size(op.bytes).c_str(), std::string(op.comm_name()).c_str(),
                  static_cast<double>(now_ns() - start) * 1e-9, rank_, host_.c_str());
    std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
    if (on_timeout_) on_timeout_(line);
    std::fflush(stdout);
    if (!end_process_) {  // embedded: end the run, not the host's process; one verdict per run
      job::request_cancel(5);
      return;
    }
    _exit(5);
  }
}

}  // namespace cs
