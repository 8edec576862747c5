// The NCCL backend's timing on the host-side GPU stand-in (tests/fake_gpu), whose events carry a
// virtual clock: an all-reduce of B bytes on one rank costs exactly B / FAKE_GPU_BUSBW_GBPS.
// Without the stand-in (a real CUDA runtime, or none) these cases do nothing.
#ifdef COMMSCRIPT_HAVE_NCCL
#include <catch2/catch.hpp>
#include <cstdlib>

#include "gpu_libs.hpp"
#include "nccl_communicator.hpp"
#include "op.hpp"
#include "self_communicator.hpp"

TEST_CASE("nccl fake: time_loop_us times the whole pipelined loop with CUDA events") {
  if (!cs::cudart_lib().fake || !cs::nccl_lib().fake) {
    WARN("not on the GPU stand-in: skipped");
    return;
  }
  setenv("FAKE_GPU_BUSBW_GBPS", "100", 1);  // read once by the stand-in, before its first use
  auto c = cs::NcclCommunicator::create(std::make_unique<cs::SelfCommunicator>(), "t", 30);
  const size_t count = 1 << 20;  // 4 MiB of float32
  cs::Tensor send = c->alloc(cs::DType::float32, count), recv = c->alloc(cs::DType::float32, count);
  send.fill(3);
  const cs::Op op = cs::make_op(*c, cs::Collective::allreduce, send, recv);
  const double per_op_us = 4.0 * count / (100 * 1e3);  // bytes / (GB/s * 1e3) = us
  REQUIRE(c->device_timing());
  const double us = c->time_loop_us(op, 10);
  CHECK(us == Approx(10 * per_op_us).epsilon(1e-5));
  CHECK(recv.get(count - 1) == 3);  // the loop ran for real (one rank: the sum is the input)
  CHECK(c->seq() == 10);
  // One timed operation gives the same per-operation time.
  cs::Op timed = op;
  timed.blocking = true;  // as bench() times it
  CHECK(c->timed_execute_us(timed) == Approx(per_op_us).epsilon(1e-5));
}
#endif
