// The coordinator against thousands of simulated ranks in one process (issue 11): rank 0's
// server (control/coordinator.hpp) is real; the ranks are simulated by one driver thread over
// raw loopback sockets speaking the wire protocol (control/coordinator_wire.hpp): rank 0's host
// connects its ranks directly, every other host as one relay forwarding its ranks' beats once per
// interval. Measures rank 0's CPU time per second in steady state, and the detection latency of
// one stuck rank (the verdict's time minus the operation's deadline), and checks that the verdict
// names exactly that rank.
//
//   commscript_coordinator_bench [--ranks 4096] [--per-host 8] [--deadline 1] [--warm 3]
//                                [--check] [--max-cpu-pct 10]
// Prints one JSON line last. With --check, exits 1 when the stuck rank is not named exactly, or
// later than deadline + 2 heartbeat intervals, or when rank 0 used more than --max-cpu-pct.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator.hpp"
#include "progress.hpp"

using namespace cs;
using namespace cs::coord;

namespace {

struct Sim {
  int ranks = 4096, per_host = 8;
  double deadline_s = 1;
  int stuck = -1;
  std::atomic<int64_t> op_start{0};  // 0: every rank idle after op #4
  std::vector<int> fds;              // [0, per_host): rank 0's host, one per rank; then one per host
  std::atomic<bool> stop{false};

  int hosts() const { return (ranks + per_host - 1) / per_host; }

  // What rank r's latest beat said when it was sent at `sent`.
  Beat beat(int r, int64_t sent) const {
    Beat b;
    b.coll = "allreduce";
    b.comm = "world";
    b.bytes = 4096;
    b.count = 1024;
    b.dtype = 0;
    b.site = "bench.lua:1";
    const int64_t s = op_start.load();
    if (s && r != stuck && sent >= s) {
      b.started = 5;
      b.in_flight = true;
      b.seq = b.cseq = 5;
      b.age_ms = static_cast<double>(sent - s) * 1e-6;
      b.deadline_s = deadline_s;
    } else {
      b.started = 4;
      b.seq = b.cseq = 4;
    }
    return b;
  }

  // Answers what the coordinator sends (flight-recorder requests); keeps the sockets drained.
  void answer(size_t i, LineBuffer& in) {
    std::string line;
    while (in.next(&line)) {
      if (i < static_cast<size_t>(per_host)) {
        if (line == "DUMP") write_all(fds[i], "RING []\n");
      } else if (line == "ALL DUMP") {
        const int host = static_cast<int>(i) - per_host + 1;
        std::string out;
        for (int r = host * per_host; r < std::min(ranks, (host + 1) * per_host); ++r)
          out += encode_addressed("FWD", r, "RING []") + "\n";
        write_all(fds[i], out);
      }
    }
  }

  // One driver thread: every interval, each connection sends once, spread over the interval.
  void drive() {
    std::vector<LineBuffer> ins(fds.size());
    const int64_t interval = static_cast<int64_t>(kHeartbeatMs) * 1000000;
    const int64_t t0 = now_ns();
    std::vector<int64_t> next(fds.size());
    for (size_t i = 0; i < fds.size(); ++i)
      next[i] = t0 + interval * static_cast<int64_t>(i) / static_cast<int64_t>(fds.size());
    std::vector<RelayedBeat> agg;
    while (!stop) {
      const int64_t now = now_ns();
      for (size_t i = 0; i < fds.size(); ++i) {
        if (now < next[i]) continue;
        next[i] += interval;
        if (i < static_cast<size_t>(per_host)) {
          write_all(fds[i], encode_beat(beat(static_cast<int>(i), now)) + "\n");
        } else {
          const int host = static_cast<int>(i) - per_host + 1;
          agg.clear();
          for (int r = host * per_host; r < std::min(ranks, (host + 1) * per_host); ++r) {
            const double hold_ms = static_cast<double>((r * 37) % kRelayForwardMs);  // beats arrive spread out
            agg.push_back({r, hold_ms, beat(r, now - static_cast<int64_t>(hold_ms * 1e6))});
          }
          write_all(fds[i], encode_host_beats(host * per_host, agg) + "\n");
        }
        drain(fds[i], ins[i]);
        answer(i, ins[i]);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
};

double arg(int argc, char** argv, const char* name, double dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return dflt;
}

bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Sim sim;
  sim.ranks = static_cast<int>(arg(argc, argv, "--ranks", 4096));
  sim.per_host = static_cast<int>(arg(argc, argv, "--per-host", 8));
  sim.deadline_s = arg(argc, argv, "--deadline", 1);
  const double warm_s = arg(argc, argv, "--warm", 3);
  const double max_cpu_pct = arg(argc, argv, "--max-cpu-pct", 10);
  const bool check = flag(argc, argv, "--check");
  if (sim.ranks < 2 || sim.per_host < 1 || sim.deadline_s <= 0 || warm_s <= 0) {
    std::fprintf(stderr, "coordinator_bench: --ranks >= 2, --per-host >= 1, --deadline > 0, --warm > 0\n");
    return 1;
  }
  sim.stuck = sim.ranks - 3;  // on the last hosts: reported through a relay
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("cs-coord-bench-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);

  std::mutex mu;
  nlohmann::json verdict;
  int64_t verdict_ns = 0;
  Coordinator::Options o;
  o.nranks = sim.ranks;
  o.timeout_s = 300;
  o.out_dir = dir;
  o.end_process = false;
  const size_t conns = static_cast<size_t>(sim.per_host + sim.hosts() - 1);
  o.expected_connections = 2 * conns;  // both ends live in this process
  o.on_verdict = [&](const nlohmann::json& inc) {
    std::lock_guard<std::mutex> g(mu);
    if (verdict.is_null()) {
      verdict = inc;
      verdict_ns = now_ns();
    }
  };
  Coordinator coord(o);

  // Connect: rank 0's host rank by rank, every other host as a relay announcing its ranks.
  const int64_t t_connect = now_ns();
  for (int r = 0; r < sim.per_host && r < sim.ranks; ++r) {
    const int fd = connect_endpoint(coord.endpoint(), true, kConnectTimeoutMs);
    if (fd < 0) {
      std::fprintf(stderr, "coordinator_bench: cannot connect rank %d\n", r);
      return 1;
    }
    write_all(fd, encode_hello(r, "host0", 1000 + r) + "\n");
    sim.fds.push_back(fd);
  }
  for (int h = 1; h < sim.hosts(); ++h) {
    const int fd = connect_endpoint(coord.endpoint(), true, kConnectTimeoutMs);
    if (fd < 0) {
      std::fprintf(stderr, "coordinator_bench: cannot connect host %d's relay (%s)\n", h, std::strerror(errno));
      return 1;
    }
    const std::string host = "host" + std::to_string(h);
    std::string out = encode_relay_hello(h * sim.per_host, host) + "\n";
    for (int r = h * sim.per_host; r < std::min(sim.ranks, (h + 1) * sim.per_host); ++r)
      out += encode_addressed("FWD", r, encode_hello(r, host, 1000 + r)) + "\n";
    write_all(fd, out);
    sim.fds.push_back(fd);
  }
  std::thread driver([&] { sim.drive(); });
  bool all_alive = false;
  for (int waited = 0; waited < 20000 && !all_alive; waited += 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    all_alive = true;
    for (const auto& s : coord.snapshot()) all_alive = all_alive && s["state"] == "alive";
  }
  const double connect_s = static_cast<double>(now_ns() - t_connect) * 1e-9;

  // Steady state: rank 0's CPU per second of heartbeats.
  const double cpu0 = coord.cpu_seconds();
  const int64_t w0 = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(warm_s * 1000)));
  const double cpu_pct = (coord.cpu_seconds() - cpu0) / (static_cast<double>(now_ns() - w0) * 1e-9) * 100;

  // One operation that every rank but one enters.
  const int64_t start = now_ns();
  sim.op_start = start;
  nlohmann::json v;
  for (int waited = 0; waited < static_cast<int>(sim.deadline_s * 1000) + 5000; waited += 5) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!verdict.is_null()) {
        v = verdict;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double late_ms = v.is_null() ? -1 : static_cast<double>(verdict_ns - start) * 1e-6 - sim.deadline_s * 1000;
  std::vector<int> named;
  if (!v.is_null())
    for (const auto& m : v["missing"]) named.push_back(m["rank"].get<int>());
  const bool exact = named.size() == 1 && named[0] == sim.stuck;
  const size_t held = coord.connections();
  sim.stop = true;
  driver.join();
  for (int fd : sim.fds) close(fd);
  std::filesystem::remove_all(dir);

  const double target_ms = 2.0 * kHeartbeatMs;
  std::printf("coordinator bench: %d ranks on %d hosts (%d per host), rank 0 holds %zu connections\n", sim.ranks,
              sim.hosts(), sim.per_host, held);
  std::printf("  all ranks alive after %.2f s\n", connect_s);
  std::printf("  rank 0 CPU in steady state: %.2f %% of one core (target < 10 %%)\n", cpu_pct);
  if (v.is_null())
    std::printf("  stuck rank %d: NO verdict\n", sim.stuck);
  else
    std::printf("  stuck rank %d: named %.1f ms after the %.1f s deadline (target <= %.0f ms); missing: %s\n",
                sim.stuck, late_ms, sim.deadline_s, target_ms, exact ? "exactly it" : v["line"].dump().c_str());
  std::printf(
      "{\"ranks\": %d, \"hosts\": %d, \"connections\": %zu, \"all_alive\": %s, \"cpu_pct\": %.3f, "
      "\"detect_after_deadline_ms\": %.1f, \"named_exactly\": %s}\n",
      sim.ranks, sim.hosts(), held, all_alive ? "true" : "false", cpu_pct, late_ms, exact ? "true" : "false");
  if (!check) return 0;
  bool ok = true;
  if (!all_alive) ok = !std::fprintf(stderr, "FAIL: not every simulated rank was seen alive\n");
  if (!exact) ok = !std::fprintf(stderr, "FAIL: the verdict did not name exactly rank %d\n", sim.stuck);
  if (late_ms < 0 || late_ms > target_ms)
    ok = !std::fprintf(stderr, "FAIL: detection %.1f ms after the deadline (target <= %.0f ms)\n", late_ms, target_ms);
  if (cpu_pct > max_cpu_pct)
    ok = !std::fprintf(stderr, "FAIL: rank 0 used %.1f %% of a core (limit %.0f %%)\n", cpu_pct, max_cpu_pct);
  return ok ? 0 : 1;
}
