// The coordinator's server with per-host relays, in one process over loopback
// (control/coordinator.hpp): 2 "hosts" of 3 ranks; host h0 is rank 0's (its ranks connect
// directly), host h1's ranks go through leader 3's relay. What each rank reports is injected
// (HeartbeatClient::Options::sample), so one process plays every rank.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator.hpp"
#include "progress.hpp"

using namespace cs;

namespace {

// What one simulated rank is doing.
struct FakeRank {
  std::mutex mu;
  coord::Beat beat;
  int64_t op_start_ns = 0;  // in flight since (0: idle)
  coord::Beat sample() {
    std::lock_guard<std::mutex> g(mu);
    coord::Beat b = beat;
    if (op_start_ns) b.age_ms = static_cast<double>(now_ns() - op_start_ns) * 1e-6;
    return b;
  }
  void enter(uint64_t seq, double deadline_s, int64_t start) {
    std::lock_guard<std::mutex> g(mu);
    beat.started = seq;
    beat.in_flight = true;
    beat.seq = beat.cseq = seq;
    beat.coll = "allreduce";
    beat.comm = "world";
    beat.bytes = 4096;
    beat.count = 1024;
    beat.dtype = 0;
    beat.deadline_s = deadline_s;
    op_start_ns = start;
  }
  void idle(uint64_t seq) {
    std::lock_guard<std::mutex> g(mu);
    beat.started = seq;
    beat.in_flight = false;
    beat.seq = beat.cseq = seq;
    beat.coll = "allreduce";
    beat.comm = "world";
    op_start_ns = 0;
  }
};

struct Captured {
  std::mutex mu;
  std::condition_variable cv;
  nlohmann::json verdict, timeout, death, files;
  int64_t verdict_ns = 0;
  template <class Pred>
  bool wait(Pred p, int ms) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::milliseconds(ms), p);
  }
};

struct Job {
  static constexpr int kRanks = 6;
  std::string dir;
  Captured cap;
  std::unique_ptr<Coordinator> coord;
  std::unique_ptr<HostRelay> relay;
  FakeRank fake[kRanks];
  std::unique_ptr<HeartbeatClient> client[kRanks];

  // fail_over false: h1's ranks cannot reach rank 0 but through the relay (a crashed node).
  explicit Job(bool fail_over = true) {
    dir = (std::filesystem::temp_directory_path() / ("cs-coord-test-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
    Coordinator::Options o;
    o.nranks = kRanks;
    o.timeout_s = 300;
    o.out_dir = dir;
    o.end_process = false;
    o.launcher = "env";
    o.on_verdict = [this](const nlohmann::json& inc) {
      std::lock_guard<std::mutex> g(cap.mu);
      cap.verdict = inc;
      cap.verdict_ns = now_ns();
      cap.cv.notify_all();
    };
    o.on_timeout = [this](const nlohmann::json& inc) {
      std::lock_guard<std::mutex> g(cap.mu);
      cap.timeout = inc;
      cap.cv.notify_all();
    };
    o.on_flight_files = [this](const nlohmann::json& f) {  // after the verdict was saved
      std::lock_guard<std::mutex> g(cap.mu);
      cap.files = f;
      cap.cv.notify_all();
    };
    o.on_death = [this](const nlohmann::json& inc) {
      std::lock_guard<std::mutex> g(cap.mu);
      if (cap.death.is_null()) cap.death = inc;
      cap.cv.notify_all();
    };
    coord = std::make_unique<Coordinator>(o);
    relay = std::make_unique<HostRelay>(3, "h1", coord->endpoint(), false);
    REQUIRE(relay->connected());
    for (int r = 0; r < kRanks; ++r) {
      fake[r].idle(0);
      HeartbeatClient::Options ho;
      const bool h0 = r < 3;
      ho.endpoint = h0 ? coord->endpoint() : relay->endpoint();
      ho.coordinator = h0 || !fail_over ? "" : coord->endpoint();
      ho.same_host_as_root = true;  // one machine: loopback reaches rank 0 too
      ho.rank = r;
      ho.host = h0 ? "h0" : "h1";
      ho.root_host = "h0";
      ho.launcher = "env";
      ho.sample = [this, r] { return fake[r].sample(); };
      client[r] = std::make_unique<HeartbeatClient>(std::move(ho));
      REQUIRE(client[r]->connected());
      CHECK(client[r]->via_relay() == (!h0 && fail_over));
    }
    REQUIRE(wait_alive(2000));
  }
  ~Job() {
    for (auto& c : client) c.reset();
    relay.reset();
    coord.reset();
    std::filesystem::remove_all(dir);
  }
  // Every rank that should be there is "alive" in the snapshot.
  bool wait_alive(int ms, std::vector<int> except = {}) {
    for (int waited = 0; waited < ms; waited += 20) {
      bool ok = true;
      for (const auto& s : coord->snapshot())
        if (std::find(except.begin(), except.end(), s["rank"].get<int>()) == except.end())
          ok = ok && s["state"] == "alive";
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

std::vector<int> ranks_in(const nlohmann::json& list) {
  std::vector<int> out;
  for (const auto& m : list) out.push_back(m["rank"].get<int>());
  return out;
}

}  // namespace

TEST_CASE("coordinator with a host relay: O(hosts) connections, a stuck rank named in time", "[coordinator]") {
  Job job;
  CHECK(job.coord->connections() == 4);  // ranks 0, 1, 2 and host h1's relay
  const double deadline_s = 1.0;
  const int64_t start = now_ns();
  for (int r = 0; r < Job::kRanks; ++r)
    if (r != 4) job.fake[r].enter(5, deadline_s, start);
  REQUIRE(job.cap.wait([&] { return !job.cap.verdict.is_null(); }, 4000));
  const double late_ms = static_cast<double>(job.cap.verdict_ns - start) * 1e-6 - deadline_s * 1000;
  INFO("verdict " << late_ms << " ms after the deadline: " << job.cap.verdict["line"].get<std::string>());
  CHECK(late_ms >= 0);
  CHECK(late_ms <= 2 * coord::kHeartbeatMs);
  CHECK(ranks_in(job.cap.verdict["missing"]) == std::vector<int>{4});
  CHECK(job.cap.verdict["missing"][0]["host"] == "h1");
  CHECK(job.cap.verdict["arrived"].size() == 5);
  // The flight recorders of every rank come back, the relayed ones included.
  REQUIRE(job.cap.wait([&] { return !job.cap.timeout.is_null() && !job.cap.files.is_null(); }, 4000));
  CHECK(job.cap.files.size() == Job::kRanks);
}

TEST_CASE("coordinator with a host relay: a relayed rank's death is named", "[coordinator]") {
  Job job;
  job.client[5]->drop_without_goodbye();
  REQUIRE(job.cap.wait([&] { return !job.cap.death.is_null(); }, 3000));
  CHECK(ranks_in(job.cap.death["dead_ranks"]) == std::vector<int>{5});
  CHECK(job.cap.death["dead_ranks"][0]["host"] == "h1");
  const std::string msg = job.cap.death["message"];
  CHECK(msg.find("--launcher env") != std::string::npos);
  CHECK(msg.find("mpirun") == std::string::npos);
  // A goodbye is not a death.
  job.client[4].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(job.coord->snapshot()[4]["state"] == "alive");
  CHECK(ranks_in(job.cap.death["dead_ranks"]) == std::vector<int>{5});
}

TEST_CASE("coordinator with a host relay: the leader dies, its host's ranks are still judged exactly",
          "[coordinator]") {
  Job job;
  // Leader 3's process vanishes: its own heartbeat and its relay, without a word.
  job.client[3]->drop_without_goodbye();
  job.relay->drop_without_goodbye();
  REQUIRE(job.cap.wait([&] { return !job.cap.death.is_null(); }, 3000));
  CHECK(ranks_in(job.cap.death["dead_ranks"]) == std::vector<int>{3});
  // Ranks 4 and 5 go to rank 0 directly and are alive, not dead and not unreachable.
  for (int waited = 0; waited < 3000 && job.coord->connections() < 5; waited += 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(job.coord->connections() == 5);  // ranks 0, 1, 2, 4, 5; no relay
  CHECK(!job.client[4]->via_relay());
  CHECK(!job.client[5]->via_relay());
  REQUIRE(job.wait_alive(3000, {3}));
  // Then rank 5 is stuck: it alone is missing besides dead rank 3.
  const int64_t start = now_ns();
  for (int r : {0, 1, 2, 4}) job.fake[r].enter(5, 1.0, start);
  REQUIRE(job.cap.wait([&] { return !job.cap.verdict.is_null(); }, 4000));
  CHECK(ranks_in(job.cap.verdict["missing"]) == std::vector<int>{3, 5});
  CHECK(job.cap.verdict["missing"][0]["state"] == "dead");
  CHECK(job.cap.verdict["missing"][1]["host"] == "h1");
}

TEST_CASE("coordinator with a host relay: a frozen leader is named alone, its host's ranks go direct",
          "[coordinator]") {
  Job job;
  // Leader 3's process is stopped (SIGSTOP, swapping): its heartbeat and its relay say nothing,
  // their connections stay open. Everyone else enters the operation that then cannot complete.
  const int64_t stop = now_ns();
  job.client[3]->freeze();
  job.relay->freeze();
  const double deadline_s = 2.0;
  for (int r = 0; r < Job::kRanks; ++r)
    if (r != 3) job.fake[r].enter(7, deadline_s, stop);
  // Ranks 4 and 5 stop trusting the silent relay and reach rank 0 directly.
  for (int waited = 0; waited < 3000 && job.coord->connections() < 6; waited += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double failover_ms = static_cast<double>(now_ns() - stop) * 1e-6;
  INFO("failover after " << failover_ms << " ms");
  CHECK(job.coord->connections() == 6);  // ranks 0, 1, 2, 4, 5 and the frozen relay, still open
  CHECK(!job.client[4]->via_relay());
  CHECK(!job.client[5]->via_relay());
  CHECK(failover_ms <= coord::kRelaySilentFailoverMs + 3 * coord::kHeartbeatMs);
  REQUIRE(job.cap.wait([&] { return !job.cap.verdict.is_null(); }, 5000));
  const double late_ms = static_cast<double>(job.cap.verdict_ns - stop) * 1e-6 - deadline_s * 1000;
  INFO("verdict " << late_ms << " ms after the deadline: " << job.cap.verdict["line"].get<std::string>());
  CHECK(late_ms >= 0);
  CHECK(late_ms <= 2 * coord::kHeartbeatMs);
  CHECK(job.cap.verdict["seq"] == 7);
  REQUIRE(ranks_in(job.cap.verdict["missing"]) == std::vector<int>{3});
  CHECK(job.cap.verdict["missing"][0]["state"] == "stuck");
  CHECK(job.cap.verdict["missing"][0]["host"] == "h1");
  CHECK(job.cap.verdict["arrived"] == nlohmann::json::array({0, 1, 2, 4, 5}));
  CHECK(job.cap.death.is_null());  // frozen is not dead
  // The flight recorders of every rank but the frozen one come back (4 and 5 directly).
  REQUIRE(job.cap.wait([&] { return !job.cap.timeout.is_null() && !job.cap.files.is_null(); }, 4000));
  CHECK(job.cap.files.size() == Job::kRanks - 1);
}

TEST_CASE("coordinator with a host relay: a whole host lost is unreachable, not alive", "[coordinator]") {
  Job job(/*fail_over=*/false);
  // Host h1 goes away at once (a node crash): its relay vanishes with the leader, and its other
  // ranks cannot reach rank 0 any more.
  job.relay->drop_without_goodbye();
  REQUIRE(job.cap.wait([&] { return !job.cap.death.is_null(); }, 3000));
  CHECK(ranks_in(job.cap.death["dead_ranks"]) == std::vector<int>{3});
  const int64_t start = now_ns();
  for (int r : {0, 1, 2}) job.fake[r].enter(5, 2.0, start);
  REQUIRE(job.cap.wait([&] { return !job.cap.verdict.is_null(); }, 5000));
  CHECK(ranks_in(job.cap.verdict["missing"]) == std::vector<int>{3, 4, 5});
  CHECK(job.cap.verdict["missing"][0]["state"] == "dead");
  CHECK(job.cap.verdict["missing"][1]["state"] == "unreachable");
  CHECK(job.cap.verdict["missing"][2]["state"] == "unreachable");
}

TEST_CASE("open-files limit: raised when it can be, the numbers when it cannot", "[coordinator]") {
  rlimit lim{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &lim) == 0);
  CHECK(ensure_open_files(16).empty());
  if (lim.rlim_max != RLIM_INFINITY) {
    CHECK(ensure_open_files(static_cast<size_t>(lim.rlim_max)).empty());
    const std::string why = ensure_open_files(static_cast<size_t>(lim.rlim_max) + 1);
    CHECK(why.find("needs " + std::to_string(lim.rlim_max + 1) + " open files") != std::string::npos);
    CHECK(why.find("hard limit " + std::to_string(lim.rlim_max)) != std::string::npos);
  }
}

TEST_CASE("coordinator: listens on the job's address, not on every interface", "[coordinator]") {
  // job_address: the source address the kernel routes each peer from (nothing is sent).
  CHECK(job_address({"127.0.0.1"}) == "127.0.0.1");
  CHECK(job_address({"127.0.0.1", "127.0.0.1"}) == "127.0.0.1");
  CHECK(job_address({"not-an-address"}).empty());
  CHECK(job_address({""}).empty());
  // Before: a multi-host coordinator bound 0.0.0.0 and advertised every address of the host.
  Coordinator::Options o;
  o.nranks = 1;
  o.end_process = false;
  o.bind_ip = "127.0.0.1";
  Coordinator c(o);
  const std::string ep = c.endpoint();
  CHECK(ep.rfind("127.0.0.1:", 0) == 0);
  CHECK(ep.find(',') == std::string::npos);
  // Nothing answers on another of the host's addresses at that port.
  const std::string others = host_ipv4s();
  const int port = std::stoi(ep.substr(ep.find(':') + 1));
  for (size_t at = 0; !others.empty() && at != std::string::npos;) {
    const size_t comma = others.find(',', at);
    const std::string ip = others.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? comma : comma + 1;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
    close(fd);
  }
}
