// bench() on a one-rank SelfCommunicator: timing samples, bandwidth arithmetic, the result check,
// and the operations it issues (counted by Communicator::seq()).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "bench.hpp"
#include "collective.hpp"
#include "error.hpp"
#include "pattern.hpp"
#include "self_communicator.hpp"

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

void check_timing(const cs::BenchResult& r, const cs::Op& op, int iters, double wall_us) {
  REQUIRE(r.iter_us.size() == static_cast<size_t>(iters));
  CHECK(r.us.n == static_cast<size_t>(iters));
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
  const double mean_us = mean_of(r.iter_us);
  CHECK(r.us.mean == Approx(mean_us).epsilon(1e-12));
  REQUIRE(mean_us > 0.0);

  const double es = static_cast<double>(cs::dtype_size(op.dtype));
  const double n = op.nranks;
  const bool per_rank = op.coll == Collective::allgather || op.coll == Collective::reduce_scatter ||
                        op.coll == Collective::alltoall || op.coll == Collective::gather ||
                        op.coll == Collective::scatter;
  const double bytes = static_cast<double>(op.count) * es * (per_rank ? n : 1.0);
  CHECK(cs::algbw_bytes(op.coll, op.count, cs::dtype_size(op.dtype), op.nranks) == bytes);
  const double algbw = bytes / 1e9 / (mean_us * 1e-6);
  CHECK(std::fabs(r.algbw - algbw) <= 1e-9 * algbw);
  CHECK(r.busbw == r.algbw * cs::busbw_factor(op.coll, op.nranks));

  REQUIRE(r.rank_mean_us.size() == 1);
  CHECK(r.rank_mean_us[0] == Approx(mean_us).epsilon(1e-12));
  CHECK(r.slowest_rank == 0);
}

}  // namespace

TEST_CASE("bench: allreduce on a self communicator, checked", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 4096), recv = Tensor::host(DType::float32, 4096);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  const cs::BenchSpec spec{3, 17, true};

  const uint64_t seq0 = comm.seq();
  const auto t0 = std::chrono::steady_clock::now();
  const cs::BenchResult r = cs::bench(comm, op, send, recv, spec);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  // warm-up + timed iterations + the barrier before timing + the checked run.
  CHECK(comm.seq() - seq0 == 3 + 17 + 2);

  CHECK(r.checked);
  CHECK(r.wrong == 0);
  REQUIRE(r.wrong_by_rank.size() == 1);
  CHECK(r.wrong_by_rank[0] == 0);
  check_timing(r, op, 17, wall_us);
  CHECK(r.busbw == 0.0);  // allreduce on one rank moves nothing over a bus: 2(n-1)/n = 0

  // The checked run left the salted pattern of rank 0 in recv (one rank: the sum is the input).
  Tensor want = Tensor::host(DType::float32, 4096);
  cs::fill_pattern(want, 0, ReduceOp::sum, 1);
  size_t differ = 0;
  for (size_t i = 0; i < 4096; ++i) differ += recv.get(i) != want.get(i);
  CHECK(differ == 0);

  // A second bench on the same communicator keeps counting.
  const uint64_t seq1 = comm.seq();
  cs::bench(comm, op, send, recv, cs::BenchSpec{0, 1, true});
  CHECK(comm.seq() - seq1 == 0 + 1 + 2);
}

TEST_CASE("bench: unchecked runs issue no check operation", "[bench]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float64, 1000), recv = Tensor::host(DType::float64, 1000);
  const cs::Op op = cs::make_op(comm, Collective::broadcast, send, recv, ReduceOp::sum, 0);
  const uint64_t seq0 = comm.seq();
  const auto t0 = std::chrono::steady_clock::now();
  const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{2, 9, false});
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  CHECK(comm.seq() - seq0 == 2 + 9 + 1);
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
        const cs::BenchResult r = cs::bench(comm, op, send, recv, cs::BenchSpec{1, 2, true});
        CHECK(r.checked);
        CHECK(r.wrong == 0);
        CHECK(comm.seq() == 1 + 2 + 2);
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
  CHECK(comm.seq() == 0);  // nothing ran
}
