// bench() on a one-rank SelfCommunicator: timing samples, bandwidth arithmetic, the result check,
// and the operations it issues (counted by Communicator::seq()).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "collective.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "poll_wait.hpp"
#include "progress.hpp"
#include "self_communicator.hpp"

// Every allocation of this test binary through the global operator new, counted: the timed
// loops must make none (issue 10: a timed loop allocates nothing, calls no Lua, logs nothing).
namespace {
std::atomic<uint64_t> g_news{0};
}  // namespace
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // free() of what the malloc above gave
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using cs::Collective;
using cs::DType;
using cs::ReduceOp;
using cs::Tensor;

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

void check_timing(const cs::BenchResult& r, const cs::Op& op, int samples, double wall_us) {
  REQUIRE(r.iter_us.size() == static_cast<size_t>(samples));
  CHECK(r.us.n == static_cast<size_t>(samples));
  double total = 0;
  for (double x : r.iter_us) {
    CHECK(x >= 0.0);
    total += x;
  }
  CHECK(total <= wall_us);  // the samples are inside the call
  CHECK(r.us.min <= r.us.p50);
  CHECK(r.us.p50 <= r.us.max);
  CHECK(r.us.min == *std::min_element(r.iter_us.begin(), r.iter_us.end()));
  CHECK(r.us.max == *std::max_element(r.iter_us.begin(), r.iter_us.end()));
  // One rank: the per-iteration mean over ranks is its own sample (to the picosecond sums).
  REQUIRE(r.iter_avg_us.size() == static_cast<size_t>(samples));
  for (size_t i = 0; i < r.iter_us.size(); ++i) CHECK(r.iter_avg_us[i] == Approx(r.iter_us[i]).margin(1e-6));
  CHECK(r.us_avg.p50 == Approx(r.us.p50).margin(1e-6));
  CHECK(r.us_avg.max == Approx(r.us.max).margin(1e-6));
  const double mean_us = mean_of(r.iter_us);
  CHECK(r.us.mean == Approx(mean_us).epsilon(1e-12));
  REQUIRE(mean_us > 0.0);

  // The headline: one rank, so its own loop time / iters is the mean, the min and the max.
  REQUIRE(r.rank_time_us.size() == 1);
  CHECK(r.time_us == r.rank_time_us[0]);
  CHECK(r.time_rank_min_us == r.time_us);
  CHECK(r.time_rank_max_us == r.time_us);
  REQUIRE(r.time_us > 0.0);
  CHECK(r.time_us <= wall_us);

  const double es = static_cast<double>(cs::dtype_size(op.dtype));
  const double n = op.nranks;
  const bool per_rank = op.coll == Collective::allgather || op.coll == Collective::reduce_scatter ||
                        op.coll == Collective::alltoall || op.coll == Collective::gather ||
                        op.coll == Collective::scatter;
  const double bytes = static_cast<double>(op.count) * es * (per_rank ? n : 1.0);
  CHECK(cs::algbw_bytes(op.coll, op.count, cs::dtype_size(op.dtype), op.nranks) == bytes);
  const double algbw = bytes / 1e9 / (r.time_us * 1e-6);  // from the headline, not the samples
  CHECK(std::fabs(r.algbw - algbw) <= 1e-9 * algbw);
  CHECK(r.busbw == r.algbw * cs::busbw_factor(op.coll, op.nranks));

  REQUIRE(r.rank_mean_us.size() == 1);
  CHECK(r.rank_mean_us[0] == Approx(mean_us).epsilon(1e-12));  // the sampled pass's own mean
  CHECK(r.slowest_rank == 0);
}

// A communicator of `n` ranks seen from rank 0 whose operations do nothing and whose loop clock
// is virtual: time_loop_us returns exactly `per_iter_us` x iters, and the other ranks' loop
// averages are `others` (what allgather returns after rank 0's own). Every number of the
// headline is then known exactly.
class VirtualClockComm final : public cs::Communicator {
 public:
  VirtualClockComm(int n, double per_iter_us, std::vector<double> others)
      : Communicator("virtual"), n_(n), per_iter_us_(per_iter_us), others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return n_; }
  std::string backend() const override { return "virtual"; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  double time_loop_us(const cs::Op& op, size_t iters) override {
    for (size_t i = 0; i < iters; ++i) execute(op);
    loops_ += 1;
    return per_iter_us_ * static_cast<double>(iters);
  }
  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override {
    std::vector<double> all{v};
    all.insert(all.end(), others_.begin(), others_.end());
    all.resize(static_cast<size_t>(n_), v);
    return all;
  }
  std::vector<std::string> allgather(const std::string& s) override {
    return std::vector<std::string>(static_cast<size_t>(n_), s);
  }
  std::string broadcast(const std::string& s, int) override { return s; }
  int loops_ = 0;

 protected:
  void run(const cs::Op&) override {}

 private:
  int n_;
  double per_iter_us_;
  std::vector<double> others_;
};

}  // namespace

TEST_CASE("bench: allreduce on a self communicator, checked", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 4096), recv = Tensor::host(DType::float32, 4096);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  const cs::BenchSpec spec{3, 17, true, 11};

  const uint64_t seq0 = comm.seq();
  const auto t0 = std::chrono::steady_clock::now();
  const cs::BenchResult r = cs::bench(comm, op, send, recv, spec);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  // warm-up + the loop + the barrier before it + the barrier before the sampled pass + the
  // sampled pass + the checked run.
  CHECK(comm.seq() - seq0 == 3 + 17 + 1 + 1 + 11 + 1);

  CHECK(r.checked);
  CHECK(r.wrong == 0);
  REQUIRE(r.wrong_by_rank.size() == 1);
  CHECK(r.wrong_by_rank[0] == 0);
  check_timing(r, op, 11, wall_us);
  CHECK(r.busbw == 0.0);  // allreduce on one rank moves nothing over a bus: 2(n-1)/n = 0

  // The checked run left the salted pattern of rank 0 in recv (one rank: the sum is the input).
  Tensor want = Tensor::host(DType::float32, 4096);
  cs::fill_pattern(want, 0, ReduceOp::sum, 1);
  size_t differ = 0;
  for (size_t i = 0; i < 4096; ++i) differ += recv.get(i) != want.get(i);
  CHECK(differ == 0);

  // A second bench on the same communicator keeps counting.
  const uint64_t seq1 = comm.seq();
  cs::bench(comm, op, send, recv, cs::BenchSpec{0, 1, true, 1});
  CHECK(comm.seq() - seq1 == 0 + 1 + 1 + 1 + 1 + 1);
}

TEST_CASE("bench: unchecked runs issue no check operation", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float64, 1000), recv = Tensor::host(DType::float64, 1000);
  const cs::Op op = cs::make_op(comm, Collective::broadcast, send, recv, ReduceOp::sum, 0);
  const uint64_t seq0 = comm.seq();
  const auto t0 = std::chrono::steady_clock::now();
  const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{2, 9, false, 9});
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  CHECK(comm.seq() - seq0 == 2 + 9 + 1 + 1 + 9);
  CHECK_FALSE(r.checked);
  CHECK(r.wrong == 0);
  check_timing(r, op, 9, wall_us);
  CHECK(r.busbw == r.algbw);  // broadcast: factor 1
  CHECK(r.busbw > 0.0);
}

TEST_CASE("bench: every bench collective and dtype checks clean on one rank", "[bench]") {
  for (Collective c : cs::kBenchCollectives) {
    for (DType dt : cs::kAllDTypes) {
      for (ReduceOp rop : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
        if (rop == ReduceOp::avg && !cs::dtype_is_float(dt)) continue;
        if (!cs::collective_reduces(c) && rop != ReduceOp::sum) continue;
        INFO(cs::collective_name(c) << " " << cs::dtype_name(dt) << " " << cs::reduce_op_name(rop));
        cs::SelfCommunicator comm;
        Tensor send = Tensor::host(dt, 257), recv = Tensor::host(dt, 257);
        const cs::Op op = cs::make_op(comm, c, send, recv, rop, 0, 0, 0);
        const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{1, 2, true, 2});
        CHECK(r.checked);
        CHECK(r.wrong == 0);
        CHECK(comm.seq() == 1 + 2 + 1 + 1 + 2 + 1);
        // What bench() checked is really in the buffer: the salted pattern, computed here.
        Tensor want = Tensor::host(dt, 257);
        cs::fill_pattern(want, 0, rop, 1);
        size_t differ = 0;
        for (size_t i = 0; i < 257; ++i) differ += recv.get(i) != want.get(i);
        CHECK(differ == 0);
      }
    }
  }
}

TEST_CASE("bench: the check catches a result that never arrives", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::int32, 100);
  Tensor elsewhere = Tensor::host(DType::int32, 100);  // where the op really writes
  Tensor recv = Tensor::host(DType::int32, 100);       // what bench is told to check
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, elsewhere, ReduceOp::sum);
  recv.fill(5);  // stale data: bench must poison it before the checked run
  const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{0, 2, true});
  CHECK(r.checked);
  CHECK(r.wrong == 100);
  REQUIRE(r.wrong_by_rank.size() == 1);
  CHECK(r.wrong_by_rank[0] == 100);
}

TEST_CASE("bench: in-place allreduce (send and recv views of one buffer)", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor buf = Tensor::host(DType::float32, 64);
  Tensor send = buf.slice(0, 64), recv = buf.slice(0, 64);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::max);
  const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{1, 3, true});
  CHECK(r.wrong == 0);
}

TEST_CASE("bench: rejects bad specs", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 8), recv = Tensor::host(DType::float32, 8);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv);
  CHECK_THROWS_AS(cs::bench(comm, op, send, recv, cs::BenchSpec{0, 0, true}), cs::InputError);
  CHECK_THROWS_AS(cs::bench(comm, op, send, recv, cs::BenchSpec{-1, 5, true}), cs::InputError);
  CHECK_THROWS_AS(cs::bench(comm, op, send, recv, cs::BenchSpec{0, 5, true, 0}), cs::InputError);
  CHECK(comm.seq() == 0);  // nothing ran
}

TEST_CASE("bench: the headline is the loop's time / iters, averaged over ranks (virtual clock)", "[bench]") {
  // Rank 0's loop takes 7.5 us per iteration; ranks 1..3 report 6, 9.5 and 7 us.
  VirtualClockComm comm(4, 7.5, {6.0, 9.5, 7.0});
  Tensor send = Tensor::host(DType::float32, 1 << 18), recv = Tensor::host(DType::float32, 1 << 18);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{2, 40, false, 5});
  CHECK(comm.loops_ == 1);
  CHECK(comm.seq() == 2 + 40 + 1 + 1 + 5);
  REQUIRE(r.rank_time_us == std::vector<double>{7.5, 6.0, 9.5, 7.0});
  CHECK(r.time_us == 7.5);  // (7.5 + 6 + 9.5 + 7) / 4, exact in binary
  CHECK(r.time_rank_min_us == 6.0);
  CHECK(r.time_rank_max_us == 9.5);
  CHECK(r.time_rank_min_us <= r.time_us);
  CHECK(r.time_us <= r.time_rank_max_us);
  // algbw = 1 MiB / 7.5 us; busbw = algbw x 2(n-1)/n = x 1.5 for 4 ranks.
  const double algbw = 1048576.0 / 1e9 / 7.5e-6;
  CHECK(r.algbw == Approx(algbw).epsilon(1e-14));
  CHECK(r.busbw == Approx(algbw * 1.5).epsilon(1e-14));
  CHECK(r.busbw == Approx(1048576.0 * 1.5 / 7.5e3).epsilon(1e-14));  // GB/s = B/ns
  // The sampled pass is separate: its samples are the host clock around each (empty) call, so
  // they have nothing to do with the virtual 7.5 us.
  CHECK(r.iter_us.size() == 5);
  CHECK(r.us.max < 7.5);
  REQUIRE(r.rank_mean_us.size() == 4);
}

TEST_CASE("bench: the over-ranks mean stays within [min, max] for any spread", "[bench]") {
  for (double spread : {0.0, 1e-9, 0.3, 5.0, 1e6}) {
    INFO("spread " << spread);
    VirtualClockComm comm(3, 0.1 + spread, {0.1, 0.1 + spread / 3});
    Tensor send = Tensor::host(DType::float64, 3), recv = Tensor::host(DType::float64, 3);
    const cs::Op op = cs::make_op(comm, Collective::sendrecv, send, recv, ReduceOp::sum, 0, 1, 2);
    const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{0, 3, false, 1});
    // Rank 0's own value went through x iters / iters: equal up to rounding.
    CHECK(r.time_rank_min_us == Approx(0.1).epsilon(1e-15));
    CHECK(r.time_rank_max_us == Approx(0.1 + spread).epsilon(1e-15));
    CHECK(r.time_rank_min_us <= r.time_us);
    CHECK(r.time_us <= r.time_rank_max_us);
    CHECK(r.time_us == Approx((0.1 + spread + 0.1 + 0.1 + spread / 3) / 3).epsilon(1e-12));
    CHECK(r.busbw == Approx(24.0 / 1e9 / (r.time_us * 1e-6)).epsilon(1e-12));  // sendrecv: factor 1
  }
}

TEST_CASE("Communicator::time_loop_us: the default runs the op iters times on the host clock", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 16), recv = Tensor::host(DType::float32, 16);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  const auto t0 = std::chrono::steady_clock::now();
  const double us = comm.time_loop_us(op, 250);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  CHECK(comm.seq() == 250);
  CHECK(us > 0.0);
  CHECK(us <= wall_us);
}

TEST_CASE("timed loops allocate nothing: time_loop_us and time_steps_us, no hook", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 1024), recv = Tensor::host(DType::float32, 1024);
  const cs::Op ar = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  const cs::Op sr = cs::make_op(comm, Collective::sendrecv, send, recv, ReduceOp::sum, 0, 0, 0);
  const cs::Communicator::TimedStep steps[2] = {{&ar, 3}, {&sr, 1}};
  (void)comm.time_loop_us(ar, 1);  // anything made once per communicator, made here
  (void)comm.time_steps_us(steps, 2, 1);
  const uint64_t before = g_news.load();
  (void)comm.time_loop_us(ar, 5000);
  (void)comm.time_steps_us(steps, 2, 2000);
  CHECK(g_news.load() == before);
  CHECK(comm.seq() == 1 + 4 + 5000 + 2000 * 4);
  // The counter counts: one vector is one allocation.
  std::vector<int> v(10);
  CHECK(g_news.load() == before + 1);
}

namespace {

// Rank 0 of two whose operations do nothing but record what they were given.
class RecordingComm final : public cs::Communicator {
 public:
  struct Call {
    Collective coll;
    const void* send;
    const void* recv;
  };
  RecordingComm() : Communicator("recording") {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "recording"; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override { return {v, v}; }
  std::vector<std::string> allgather(const std::string& s) override { return {s, s}; }
  std::string broadcast(const std::string& s, int) override { return s; }
  std::vector<Call> calls;

 protected:
  void run(const cs::Op& op) override { calls.push_back({op.coll, op.send, op.recv}); }
};

}  // namespace

TEST_CASE("pingpong: sends one buffer and receives into another, as osu_latency", "[bench]") {
  // Receiving into the buffer that is sent next made every transfer read lines the other core had
  // just written: latency.lua read about 2x osu_latency from 64 KiB up.
  RecordingComm comm;
  Tensor buf = Tensor::host(DType::uint8, 4096);
  const cs::PingPongResult r = cs::pingpong(comm, 1, buf, 3, 5, 2);
  REQUIRE(comm.calls.size() == 2 * (3 + 5 + 2));
  for (size_t i = 0; i < comm.calls.size(); ++i) {
    INFO("call " << i);
    const auto& c = comm.calls[i];
    CHECK(c.coll == (i % 2 == 0 ? Collective::send : Collective::recv));  // rank 0 sends first
    if (c.coll == Collective::send) CHECK(c.send == buf.data());
    if (c.coll == Collective::recv) {
      CHECK(c.recv != nullptr);
      CHECK(c.recv != buf.data());
    }
  }
  CHECK(comm.seq() == 2 * (3 + 5 + 2));
  CHECK(r.latency_us >= 0.0);
  CHECK(r.us.n == 2);
}

namespace {

// One rank whose operations do nothing, except that call number `gate_at` (0-based, counted over
// the communicator's life) waits until the test opens the gate, or throws when `throw_at` says so.
class GateComm final : public cs::Communicator {
 public:
  GateComm() : Communicator("gate") {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "gate"; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override { return {v}; }
  std::vector<std::string> allgather(const std::string& s) override { return {s}; }
  std::string broadcast(const std::string& s, int) override { return s; }
  long gate_at = -1, throw_at = -1;
  std::atomic<bool> waiting{false}, open{false};
  long calls = 0;

 protected:
  void run(const cs::Op&) override {
    const long n = calls++;
    if (n == throw_at) throw cs::Error(cs::ExitCode::runtime, "gate: injected failure");
    if (n != gate_at) return;
    waiting = true;
    while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

struct CountingHook final : cs::OpHook {
  std::vector<uint64_t> before_seq, after_seq;
  void before(cs::Op&, uint64_t seq, std::string_view) override { before_seq.push_back(seq); }
  void after(const cs::Op&, uint64_t seq, int64_t) override { after_seq.push_back(seq); }
};

}  // namespace

TEST_CASE("time_steps_us: one Progress record for the loop, read as its current operation", "[bench]") {
  GateComm comm;
  Tensor a = Tensor::host(DType::float32, 4), b = Tensor::host(DType::float32, 4);
  const cs::Op ar = cs::make_op(comm, Collective::allreduce, a, b, ReduceOp::sum);
  cs::Op barrier;
  barrier.coll = Collective::barrier;
  barrier.nranks = 1;
  // 5 iterations of {allreduce x 2, barrier}: 15 calls, seq 1..15; call 8 (0-based) is the
  // third iteration's barrier, seq 9.
  const cs::Communicator::TimedStep steps[2] = {{&ar, 2}, {&barrier, 1}};
  comm.gate_at = 8;
  cs::Progress& p = cs::Progress::instance();
  const uint64_t started0 = p.ops_started();
  double us = -1;
  std::thread loop([&] { us = comm.time_steps_us(steps, 2, 5); });
  while (!comm.waiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(p.in_flight());
  const cs::OpRecord cur = p.current();
  CHECK(cur.seq == 9);
  CHECK(cur.coll == Collective::barrier);
  CHECK(cur.ops == 9);
  CHECK(cur.comm_name() == "gate");
  CHECK(p.ops_started() == started0 + 9);
  // Its start is when a reader first saw it: fixed from then on, so its age grows while it hangs
  // (what the watchdog and the heartbeats measure).
  const int64_t s1 = p.current_start_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(p.current_start_ns() == s1);
  CHECK(cs::now_ns() - s1 >= 30000000);
  CHECK(p.recent().back().seq == 9);
  // What a guardian reads when this process is gone: the same call, never an unwritten slot.
  CHECK(p.recent_left().back().seq == 9);
  CHECK(p.recent_left().back().coll == Collective::barrier);
  comm.open = true;
  loop.join();
  CHECK(us > 0.0);
  CHECK_FALSE(p.in_flight());
  CHECK(comm.calls == 15);
  CHECK(comm.seq() == 15);
  CHECK(p.ops_started() == started0 + 15);
  const cs::OpRecord last = p.current();  // the loop's record now describes its last call
  CHECK(last.seq == 15);
  CHECK(last.coll == Collective::barrier);
  CHECK(last.ops == 15);
  // The next operation is a record of its own, numbered after the loop.
  comm.execute(ar);
  CHECK(p.current().seq == 16);
  CHECK(p.current().ops == 1);
  CHECK(p.current().coll == Collective::allreduce);
  CHECK(p.ops_started() == started0 + 16);
  const std::vector<cs::OpRecord> left = p.recent_left();
  REQUIRE(left.size() >= 2);
  CHECK(left.back().seq == 16);
  CHECK(left.back().coll == Collective::allreduce);
  CHECK(left[left.size() - 2].seq == 15);  // the loop's record, as its last call
  CHECK(left[left.size() - 2].comm_name() == "gate");
}

TEST_CASE("time_steps_us: a call that throws stays the current operation, numbered", "[bench]") {
  GateComm comm;
  Tensor a = Tensor::host(DType::float32, 4), b = Tensor::host(DType::float32, 4);
  const cs::Op ar = cs::make_op(comm, Collective::allreduce, a, b, ReduceOp::sum);
  comm.throw_at = 4;
  CHECK_THROWS_AS(comm.time_loop_us(ar, 10), cs::Error);
  cs::Progress& p = cs::Progress::instance();
  CHECK(comm.seq() == 5);
  CHECK(p.in_flight());
  CHECK(p.current().seq == 5);
  CHECK(p.current().ops == 5);
  comm.execute(ar);
  CHECK_FALSE(p.in_flight());
  CHECK(p.current().seq == 6);
  CHECK(p.current().ops == 1);
}

TEST_CASE("time_steps_us: with an operation hook (chaos) every call goes through it", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 16), recv = Tensor::host(DType::float32, 16);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  CountingHook hook;
  cs::Communicator::set_hook(&hook);
  const double us = comm.time_loop_us(op, 10);
  cs::Communicator::set_hook(nullptr);
  CHECK(us > 0.0);
  CHECK(comm.seq() == 10);
  REQUIRE(hook.before_seq.size() == 10);
  REQUIRE(hook.after_seq.size() == 10);
  for (uint64_t i = 0; i < 10; ++i) {
    CHECK(hook.before_seq[i] == i + 1);
    CHECK(hook.after_seq[i] == i + 1);
  }
  // Without the hook, the same loop calls it no more.
  (void)comm.time_loop_us(op, 5);
  CHECK(hook.before_seq.size() == 10);
  CHECK(comm.seq() == 15);
}

TEST_CASE("collective numbers: sends and receives do not count, in single calls and in timed loops", "[bench]") {
  // Communicator::cseq() (what the coordinator matches ranks by) counts collectives only;
  // seq() counts every operation. Progress's current record agrees with both, also inside and
  // after a timed loop that mixes a sendrecv step with an allreduce step.
  cs::SelfCommunicator comm;
  Tensor a = Tensor::host(DType::float32, 16), b = Tensor::host(DType::float32, 16);
  const cs::Op ar = cs::make_op(comm, Collective::allreduce, a, b, ReduceOp::sum);
  const cs::Op sr = cs::make_op(comm, Collective::sendrecv, a, b, ReduceOp::sum, 0, 0, 0);
  comm.execute(ar);
  comm.execute(sr);
  comm.execute(sr);
  CHECK(comm.seq() == 3);
  CHECK(comm.cseq() == 1);
  CHECK(cs::Progress::instance().current().seq == 3);
  CHECK(cs::Progress::instance().current().cseq == 1);  // a sendrecv: the collectives before it
  const cs::Communicator::TimedStep steps[] = {{&sr, 2}, {&ar, 3}};
  comm.time_steps_us(steps, 2, 4);  // 4 x (2 sendrecv + 3 allreduce)
  CHECK(comm.seq() == 3 + 20);
  CHECK(comm.cseq() == 1 + 12);
  const cs::OpRecord last = cs::Progress::instance().current();
  CHECK(last.coll == Collective::allreduce);
  CHECK(last.seq == 23);
  CHECK(last.cseq == 13);
  comm.execute(sr);
  CHECK(cs::Progress::instance().current().cseq == 13);
  comm.execute(ar);
  CHECK(cs::Progress::instance().current().cseq == 14);
}

TEST_CASE("poll pacing: no sleep in the first 200 us, then a sleep that grows and stays within 5 % of the wait",
          "[bench]") {
  CHECK(cs::poll_sleep_ns(0) == 0);
  CHECK(cs::poll_sleep_ns(0.0002) == 0);
  CHECK(cs::poll_sleep_ns(0.0003) > 0);
  long last = 0;
  double polls = 0;  // polls of a 1 s wait, at the paced rate
  for (double w = 0.00021; w < 3600; w *= 1.01) {
    const long ns = cs::poll_sleep_ns(w);
    CHECK(ns > 0);
    CHECK(ns >= last);  // never shorter as the wait grows
    CHECK(static_cast<double>(ns) * 1e-9 <= 0.05 * w);
    if (w < 1) polls += w * 0.01 / (static_cast<double>(ns) * 1e-9);
    last = ns;
  }
  CHECK(last == 10000000);  // at most 10 ms between polls
  // a 1 s wait: 20 ln(200 ms / 200 us) + 0.8 s / 10 ms = 218 paced polls (the pacing before:
  // about 1530 after a millisecond of polls without a pause)
  CHECK(polls > 200);
  CHECK(polls < 240);
}
