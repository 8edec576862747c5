#pragma once
// How a rank that waits for an operation by polling (the MPI and NCCL backends' untimed calls)
// paces its polls: every poll at once for the first millisecond (an operation that completes
// at once is seen at once), yielding after the first 1000; then a sleep between polls that
// grows with the wait: 50 us up to 10 ms, 200 us up to 100 ms, 1 ms after that, so that the
// wake-up lag stays within 5 % of the time already waited. A rank idle in a barrier while one
// pair is measured must not take the CPU from that pair: with 14 of 16 ranks polling every
// 50 us on 2 cores, the idle ranks used most of the machine (docs/timing.md).
#include <sched.h>
#include <time.h>

#include <cstdint>

namespace cs {

inline long poll_sleep_ns(double waited_s) {
  if (waited_s <= 1e-3) return 0;
  if (waited_s <= 1e-2) return 50000;
  if (waited_s <= 1e-1) return 200000;
  return 1000000;
}

inline void pause_poll(double waited_s, unsigned polls) {
  if (const long ns = poll_sleep_ns(waited_s)) {
    const timespec ts{0, ns};
    nanosleep(&ts, nullptr);
  } else if (polls > 1000) {
    sched_yield();
  }
}

// A polled wait's clock without the time this process did not run. A rank stopped for 10 s
// (SIGSTOP, a debugger) has not waited 10 s for the others and must not blame them for it at
// its local deadline; the coordinator names it instead (coordinator_timing.hpp, kStallNs).
// Polls are at most a few milliseconds apart, so a gap of a second between two is a freeze.
class WaitClock {
 public:
  static constexpr int64_t kFrozenGapNs = 1000LL * 1000 * 1000;
  WaitClock() : t0_(mono_ns()), last_(t0_) {}
  // Seconds waited so far, frozen gaps left out.
  double waited_s() {
    const int64_t t = mono_ns();
    if (t - last_ > kFrozenGapNs) frozen_ += t - last_;
    last_ = t;
    return static_cast<double>(t - t0_ - frozen_) * 1e-9;
  }
  double frozen_s() const { return static_cast<double>(frozen_) * 1e-9; }

 private:
  static int64_t mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  }
  int64_t t0_, last_, frozen_ = 0;
};

}  // namespace cs
