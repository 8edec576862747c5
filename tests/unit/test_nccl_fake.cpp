// The NCCL backend's timing on the host-side GPU stand-in (tests/fake_gpu), whose events carry a
// virtual clock: an all-reduce of B bytes on one rank costs exactly B / FAKE_GPU_BUSBW_GBPS.
// Without the stand-in (a real CUDA runtime, or none) these cases do nothing.
#ifdef COMMSCRIPT_HAVE_NCCL
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>

#include "gpu_libs.hpp"
#include "nccl_communicator.hpp"
#include "op.hpp"
#include "self_communicator.hpp"

namespace {

bool on_fake() {
  if (cs::cudart_lib().fake && cs::nccl_lib().fake) return true;
  WARN("not on the GPU stand-in: skipped");
  return false;
}

// A one-rank control plane that remembers the deadline it was given.
class RecordingControl final : public cs::Communicator {
 public:
  RecordingControl() : Communicator("world") {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<RecordingControl>(); }
  void set_timeout(double s, double grace) override {
    Communicator::set_timeout(s, grace);
    *seen = s;
  }
  void allreduce_max(std::vector<double>&) override {}
  void allreduce_sum(std::vector<uint64_t>&) override {}
  std::vector<double> allgather(double v) override { return {v}; }
  std::vector<std::string> allgather(const std::string& v) override { return {v}; }
  std::string broadcast(const std::string& v, int) override { return v; }
  std::shared_ptr<double> seen = std::make_shared<double>(-1);

 protected:
  void run(const cs::Op&) override {}
};

}  // namespace

TEST_CASE("nccl fake: time_loop_us times the whole pipelined loop with CUDA events") {
  if (!on_fake()) return;
  // The stand-in's device time is the longer of the modelled cost and the host work that
  // performs it: at 0.01 GB/s the model dominates, so the loop's time is the model's, exactly,
  // but for the host's gap between the start event and the first enqueue.
  setenv("FAKE_GPU_BUSBW_GBPS", "0.01", 1);  // read at every operation
  auto c = cs::NcclCommunicator::create(std::make_unique<cs::SelfCommunicator>(), "t", 30);
  const size_t count = 1 << 18;  // 1 MiB of float32
  cs::Tensor send = c->alloc(cs::DType::float32, count), recv = c->alloc(cs::DType::float32, count);
  send.fill(3);
  const cs::Op op = cs::make_op(*c, cs::Collective::allreduce, send, recv);
  const double per_op_us = 4.0 * count / (0.01 * 1e3);  // bytes / (GB/s * 1e3) = us
  REQUIRE(c->device_timing());
  const double us = c->time_loop_us(op, 10);
  CHECK(us == Approx(10 * per_op_us).epsilon(2e-3));
  CHECK(recv.get(count - 1) == 3);  // the loop ran for real (one rank: the sum is the input)
  CHECK(c->seq() == 10);
  // One timed operation gives the same per-operation time.
  cs::Op timed = op;
  timed.blocking = true;  // as bench() times it
  CHECK(c->timed_execute_us(timed) == Approx(per_op_us).epsilon(2e-3));
  unsetenv("FAKE_GPU_BUSBW_GBPS");
}
#endif

#ifdef COMMSCRIPT_HAVE_NCCL
// Defect 3: the control plane (MPI for the world) gets the NCCL operations' deadline, also on a
// split communicator; without it a control-plane wait has none.
TEST_CASE("nccl fake: the deadline reaches the control plane, also of a split") {
  if (!on_fake()) return;
  auto ctl = std::make_unique<RecordingControl>();
  const auto seen = ctl->seen;
  auto c = cs::NcclCommunicator::create(std::move(ctl), "dl", 30);
  c->set_timeout(7, 1);
  CHECK(*seen == 7);
  auto sub = c->split(0, 0);
  REQUIRE(sub);
  CHECK(sub->timeout_s() == 7);
}

// Defect 4: an NCCL error on a non-blocking communicator (ncclInvalidArgument persists there)
// ends the communicator: the failing call is named, and the next operation says why it cannot run
// instead of failing again inside NCCL.
TEST_CASE("nccl fake: an invalid argument ends the communicator and names the call") {
  if (!on_fake()) return;
  auto c = cs::NcclCommunicator::create(std::make_unique<cs::SelfCommunicator>(), "inv", 30);
  cs::Tensor t = c->alloc(cs::DType::float32, 16);
  cs::Op bad = cs::make_op(*c, cs::Collective::reduce, t, t);
  bad.root = 3;  // past make_op's checks: only NCCL sees it
  std::string first;
  try {
    c->execute(bad);
  } catch (const cs::Error& e) {
    first = e.what();
  }
  CHECK(first.find("ncclReduce failed") != std::string::npos);
  CHECK(first.find("invalid argument") != std::string::npos);
  CHECK(c->aborted());
  const cs::Op good = cs::make_op(*c, cs::Collective::allreduce, t, t);
  std::string second;
  try {
    c->execute(good);
  } catch (const cs::Error& e) {
    second = e.what();
  }
  CHECK(second.find("unusable after an earlier failure") != std::string::npos);
  CHECK(second.find("ncclReduce failed") != std::string::npos);
}
#endif

#ifdef COMMSCRIPT_HAVE_NCCL
namespace cs {
void* nccl_sym(const char* name);  // engine/core/gpu_libs.cpp
}

// A blocking call that waits inside NCCL cannot escape the deadline: here the work FIFO is full
// (FAKE_NCCL_FIFO_DEPTH=1) behind an operation that never completes, so NCCL's launch of the next
// one waits (enqueue.cc waitWorkFifoAvailable, no abort check) inside the blocking twin. The
// monitor aborts the twin's parent past the deadline, the shared abort flag ends the stuck
// kernel and so the wait, and the loop fails as a timeout that says where it waited. Without the
// monitor this call never returns.
TEST_CASE("nccl fake: a blocking call stuck inside NCCL ends at the deadline as a timeout") {
  if (!on_fake()) return;
  const auto ops = reinterpret_cast<uint64_t (*)()>(cs::nccl_sym("fake_nccl_op_count"));
  REQUIRE(ops);
  auto c = cs::NcclCommunicator::create(std::make_unique<cs::SelfCommunicator>(), "fifo", 30);
  c->set_timeout(1, 0.5);
  cs::Tensor t = c->alloc(cs::DType::float32, 256);
  const cs::Op op = cs::make_op(*c, cs::Collective::allreduce, t, t);
  setenv("FAKE_NCCL_FIFO_DEPTH", "1", 1);
  setenv("FAKE_NCCL_HANG", ("0:" + std::to_string(ops() + 1)).c_str(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  int code = 0;
  try {
    c->time_loop_us(op, 3);
  } catch (const cs::Error& e) {
    msg = e.what();
    code = static_cast<int>(e.code());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("FAKE_NCCL_FIFO_DEPTH");
  unsetenv("FAKE_NCCL_HANG");
  INFO(msg);
  CHECK(code == static_cast<int>(cs::ExitCode::hang_or_desync));
  CHECK(msg.find("timeout: allreduce #2") == 0);
  CHECK(msg.find("inside the blocking call") != std::string::npos);
  CHECK(secs < 10);
  CHECK(c->aborted());
}
#endif
