// Issue 34: a polled wait inside a timed region never sleeps, so that the timed path keeps the
// transport progressing as a plain MPI loop does; a wait anywhere else still sleeps, so that idle
// ranks leave the CPU. Counted (core/poll_wait.hpp's poll_pauses()), not
// timed: the polled "operation" below waits on a virtual clock, a fixed number of polls, each
// past the 200 us after which an idle wait sleeps.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.hpp"
#include "collective.hpp"
#include "poll_wait.hpp"

using cs::Collective;
using cs::DType;
using cs::ReduceOp;
using cs::Tensor;

namespace {

// One rank whose every operation (the barriers included) is a polled wait of kPolls polls, each
// paced by pause_poll as the MPI backend's wait() paces its MPI_Testall polls.
class PolledComm final : public cs::Communicator {
 public:
  static constexpr unsigned kPolls = 8;
  static constexpr double kWaitedS = 0.0004;  // past 200 us: an idle wait sleeps 20 us per poll
  PolledComm() : Communicator("polled") {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "polled"; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override { return {v}; }
  std::vector<std::string> allgather(const std::string& s) override { return {s}; }
  std::string broadcast(const std::string& s, int) override { return s; }
  uint64_t timed_polls = 0, idle_polls = 0;

 protected:
  void run(const cs::Op&) override {
    for (unsigned p = 0; p < kPolls; ++p) {
      ++(cs::TimedRegion::open() ? timed_polls : idle_polls);
      cs::pause_poll(kWaitedS, p);
    }
  }
};

struct Pauses {
  uint64_t sleeps, yields, timed_sleeps, timed_yields;
  static Pauses now() {
    const cs::PollPauses& n = cs::poll_pauses();
    return {n.sleeps.load(), n.yields.load(), n.timed_sleeps.load(), n.timed_yields.load()};
  }
};

}  // namespace

TEST_CASE("pause_poll: no sleep inside a timed region, a sleep outside it", "[poll]") {
  const Pauses a = Pauses::now();
  cs::pause_poll(0.0004, 5);  // idle: sleeps 20 us
  const Pauses b = Pauses::now();
  CHECK(b.sleeps == a.sleeps + 1);
  CHECK(b.timed_sleeps == a.timed_sleeps);
  {
    const cs::TimedRegion outer;
    const cs::TimedRegion inner;  // nested regions count as one
    CHECK(cs::TimedRegion::open());
    cs::pause_poll(0.0004, 5);  // where an idle wait sleeps: polls on at once
    cs::pause_poll(0.5, 5000);  // where an idle wait sleeps 10 ms: a yield, as after 1000 polls
  }
  CHECK_FALSE(cs::TimedRegion::open());
  const Pauses c = Pauses::now();
  CHECK(c.timed_sleeps == b.timed_sleeps);
  CHECK(c.sleeps == b.sleeps);
  CHECK(c.timed_yields == b.timed_yields + 1);
  cs::pause_poll(0.0004, 5);  // closed again: idle, sleeps
  CHECK(Pauses::now().sleeps == c.sleeps + 1);
}

TEST_CASE("bench(): no sleep in a polled wait from the warm-up to the last sample; the check's run still sleeps",
          "[poll][bench]") {
  PolledComm comm;
  Tensor s = Tensor::host(DType::float32, 16), r = Tensor::host(DType::float32, 16);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, s, r, ReduceOp::sum);
  cs::BenchSpec spec;
  spec.warmup = 2;
  spec.iters = 3;
  spec.samples = 3;
  spec.check = false;
  const Pauses a = Pauses::now();
  cs::bench(comm, op, s, r, spec);
  const Pauses b = Pauses::now();
  // warm-up 2 + barrier + 3 timed + barrier + 3 samples: 10 operations, all polled in the region
  CHECK(comm.timed_polls == 10 * PolledComm::kPolls);
  CHECK(comm.idle_polls == 0);
  CHECK(b.timed_sleeps == a.timed_sleeps);  // each of those 80 polls would have slept before
  CHECK(b.sleeps == a.sleeps);

  // The checked run comes after the timed regions and waits as an idle rank does.
  spec.check = true;
  cs::bench(comm, op, s, r, spec);
  const Pauses c = Pauses::now();
  CHECK(comm.idle_polls == PolledComm::kPolls);
  CHECK(c.timed_sleeps == b.timed_sleeps);
  CHECK(c.sleeps >= b.sleeps + PolledComm::kPolls);
}
