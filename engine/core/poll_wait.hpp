#pragma once
// How a rank that waits for an operation by polling (the MPI and NCCL backends' untimed calls)
// paces its polls: every poll at once for the first 200 us (an operation that completes at
// once is seen at once), yielding after the first 1000; then a sleep between polls of a
// twentieth of the time already waited (10 us at 200 us, 1 ms at 20 ms, at most 10 ms from
// 200 ms on), so that the wake-up lag stays within 5 % of the wait and a wait of T costs about
// 20 ln(T / 200 us) polls. Waiting ranks must leave the CPU to the ones that measure: on 2
// cores, 13 of 16 ranks idle in short barriers while one pair was measured doubled that pair's
// time, and a poll of an MPI barrier there costs about 30 us (docs/timing.md).
#include <sched.h>
#include <time.h>

#include <cstdint>

namespace cs {

inline long poll_sleep_ns(double waited_s) {
  if (waited_s <= 2e-4) return 0;
  const double ns = waited_s * 1e9 / 20;
  return ns >= 1e7 ? 10000000 : static_cast<long>(ns);
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
