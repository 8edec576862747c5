// The polled wait's clock (core/poll_wait.hpp): a freeze of the process (a gap of over a
// second between two polls, as SIGSTOP leaves) is not time waited for the other ranks.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "poll_wait.hpp"

using cs::WaitClock;

TEST_CASE("WaitClock: polls a few ms apart count in full", "[poll]") {
  WaitClock c;
  double w = 0;
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    w = c.waited_s();
  }
  CHECK(w >= 0.15);
  CHECK(c.frozen_s() == 0.0);
}

TEST_CASE("WaitClock: a SIGSTOP between two polls is left out", "[poll]") {
  // A child polls every ms and reports what it waited; it is stopped for 1.5 s in between.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    WaitClock c;
    const auto t0 = std::chrono::steady_clock::now();
    double w = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2200)) {
      w = c.waited_s();
      const timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
    }
    const double out[2] = {w, c.frozen_s()};
    if (write(fds[1], out, sizeof out) != static_cast<ssize_t>(sizeof out)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pid, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGCONT);
  double got[2] = {0, 0};
  REQUIRE(read(fds[0], got, sizeof got) == static_cast<ssize_t>(sizeof got));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(got[1] >= 1.4);  // the freeze
  CHECK(got[1] <= 1.8);
  CHECK(got[0] < 1.0);  // 2.2 s of wall time, about 0.7 s of it polling
  CHECK(got[0] > 0.4);
}
