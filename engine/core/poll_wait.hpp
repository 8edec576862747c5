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

}  // namespace cs
