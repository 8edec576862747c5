#pragma once
// How a rank that waits for an operation by polling (the MPI and NCCL backends' polled waits)
// paces its polls. Two kinds of wait, told apart in one place (pause_poll, by the one setting
// kTimedWaitsSleep):
//  - anywhere outside a timed region (an untimed barrier, a Lua-level collective, the ranks idle
//    while a pair is measured): every poll at once for the first 200 us (an operation that
//    completes at once is seen at once), yielding after the first 1000; then a sleep between
//    polls of a twentieth of the time already waited (10 us at 200 us, 1 ms at 20 ms, at most
//    10 ms from 200 ms on), so that the wake-up lag stays within 5 % of the wait and a wait of T
//    costs about 20 ln(T / 200 us) polls. Waiting ranks must leave the CPU to the ones that
//    measure: on 2 cores, 13 of 16 ranks idle in short barriers while one pair was measured
//    doubled that pair's time, and a poll of an MPI barrier there costs about 30 us
//    (docs/timing.md).
//  - inside a timed region (TimedRegion: what bench.cpp times, from the warm-up to the last
//    sample, its barriers included): never a sleep. MPI moves a message only while a rank is
//    inside an MPI call, so a poller asleep stalls its peer's transfer (a ping-pong's receiver
//    polling MPI_Iprobe for a 4 MiB message) or starts the timed loop late (a barrier), and the
//    timed loop pays for it. Polls go back to back, yielding after the first 1000 as Open MPI's
//    own blocking calls do on an oversubscribed host (mpi_yield_when_idle): a yield leaves the
//    core only to a process that is ready to run, never idle.
// poll_pauses() counts the sleeps and yields taken (a counter, not a clock:
// tests/unit/test_poll_wait_timed.cpp checks that no sleep is taken inside a timed region).
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "clock.hpp"

namespace cs {

inline long poll_sleep_ns(double waited_s) {
  if (waited_s <= 2e-4) return 0;
  const double ns = waited_s * 1e9 / 20;
  return ns >= 1e7 ? 10000000 : static_cast<long>(ns);
}

// The one setting that separates the two policies: whether a wait inside a timed region may
// sleep between polls as an idle one does. It may not: see above.
inline constexpr bool kTimedWaitsSleep = false;

// Marks this thread's timed region for its lifetime (nested regions count as one): a thread-local
// increment and decrement, and one thread-local load per poll in pause_poll.
class TimedRegion {
 public:
  TimedRegion() { ++depth(); }
  ~TimedRegion() { --depth(); }
  TimedRegion(const TimedRegion&) = delete;
  TimedRegion& operator=(const TimedRegion&) = delete;
  static bool open() { return depth() > 0; }

 private:
  static int& depth() {
    static thread_local int d = 0;
    return d;
  }
};

// Pauses taken between polls since the process started, all threads: sleeps and yields, and
// how many of each were taken inside a timed region (no sleep there unless kTimedWaitsSleep).
struct PollPauses {
  std::atomic<uint64_t> sleeps{0}, yields{0}, timed_sleeps{0}, timed_yields{0};
};
inline PollPauses& poll_pauses() {
  static PollPauses p;
  return p;
}

inline void pause_poll(double waited_s, unsigned polls) {
  const bool timed = TimedRegion::open();
  PollPauses& n = poll_pauses();
  if (const long ns = timed && !kTimedWaitsSleep ? 0 : poll_sleep_ns(waited_s)) {
    n.sleeps.fetch_add(1, std::memory_order_relaxed);
    if (timed) n.timed_sleeps.fetch_add(1, std::memory_order_relaxed);
    const timespec ts{0, ns};
    nanosleep(&ts, nullptr);
  } else if (polls > 1000) {
    n.yields.fetch_add(1, std::memory_order_relaxed);
    if (timed) n.timed_yields.fetch_add(1, std::memory_order_relaxed);
    sched_yield();
  }
}

// A polled wait's clock (the engine's clock, clock.hpp) without the time this process did not run. A rank stopped for
// 10 s (SIGSTOP, a debugger) has not waited 10 s for the others and must not blame them for it at its local deadline;
// the coordinator names it instead (coordinator_timing.hpp, kStallNs). Polls are at most a few milliseconds apart, so a
// gap of a second between two is a freeze.
class WaitClock {
 public:
  static constexpr int64_t kFrozenGapNs = 1000LL * 1000 * 1000;
  WaitClock() : t0_(now_ns()), last_(t0_) {}
  // Seconds waited so far, frozen gaps left out.
  double waited_s() {
    const int64_t t = now_ns();
    if (t - last_ > kFrozenGapNs) frozen_ += t - last_;
    last_ = t;
    return static_cast<double>(t - t0_ - frozen_) * 1e-9;
  }
  double frozen_s() const { return static_cast<double>(frozen_) * 1e-9; }

 private:
  int64_t t0_, last_, frozen_ = 0;
};

}  // namespace cs
