#pragma once
// The engine's one clock: monotonic (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux) in
// integer nanoseconds. Every deadline, age and elapsed time in the engine and the bindings reads
// it (operation start times in the flight recorder, the coordinator's and the watchdogs' ages,
// waits with a limit, the Lua budget), so that any two of them compare. A polled wait that must
// leave out the time its process was stopped uses WaitClock (poll_wait.hpp), on this clock too.
#include <chrono>
#include <cstdint>

namespace cs {

// Now, in nanoseconds on the monotonic clock (its epoch is arbitrary: compare, never print).
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The now_ns() value `d` from now: a deadline (`now_ns() < deadline_ns(...)` while it has not
// passed).
inline int64_t deadline_ns(std::chrono::nanoseconds d) { return now_ns() + d.count(); }
inline int64_t deadline_ns(double seconds) { return now_ns() + static_cast<int64_t>(seconds * 1e9); }

// Seconds since `t0_ns`, a now_ns() value.
inline double seconds_since(int64_t t0_ns) { return static_cast<double>(now_ns() - t0_ns) * 1e-9; }

}  // namespace cs
