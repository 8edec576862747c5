// NCCL conformance probes: the behaviours of NCCL that the NCCL backend depends on, checked with
// NCCL's own API on whatever libnccl/libcudart the process loads. CI runs them on the host-side
// stand-in (tests/fake_gpu: `commscript_unit_tests "[conformance]"` in the fake-GPU build); the
// GPU kit runs the same binary on a real GPU (tests/gpu/run.sh). Each probe names the NCCL
// function whose source it pins (v2.28.9-1); the stand-in cites the same functions. Without a
// device (the ordinary build) they say so and check nothing.
#ifdef COMMSCRIPT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_support.hpp"
#include "gpu_libs.hpp"

namespace {

bool usable() {
  if (cs::cuda_probe().count > 0 && cs::nccl_lib().loaded) return true;
  WARN("no NVIDIA GPU and NCCL (nor the stand-in): skipped");
  return false;
}

using Clock = std::chrono::steady_clock;

// Polls ncclCommGetAsyncError until it leaves ncclInProgress (at most `secs`).
ncclResult_t settle(ncclComm_t c, double secs = 60) {
  const auto t0 = Clock::now();
  ncclResult_t s = ncclInProgress;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < secs) {
    if (ncclCommGetAsyncError(c, &s) != ncclSuccess) return ncclSystemError;
    if (s != ncclInProgress) return s;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return ncclInProgress;
}

// A one-rank non-blocking communicator (NCCL_CONFIG_INITIALIZER, blocking = 0).
ncclComm_t one_rank(int blocking = 0, int share = 0) {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  ncclUniqueId id{};
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking;
  cfg.splitShare = share;
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
  // init.cc ncclCommInitRankDev: the handle is published before the job starts.
  REQUIRE(c != nullptr);
  REQUIRE((r == ncclSuccess || r == ncclInProgress));
  REQUIRE(settle(c) == ncclSuccess);
  return c;
}

struct Buffers {
  cudaStream_t stream = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  Buffers() {
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaMalloc(&a, 4096) == cudaSuccess);
    REQUIRE(cudaMalloc(&b, 4096) == cudaSuccess);
  }
  ~Buffers() {
    cudaStreamSynchronize(stream);
    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(stream);
  }
};

ncclComm_t load(ncclComm_t* slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); }

}  // namespace

TEST_CASE(
    "conformance: a non-blocking split returns ncclSuccess at once, the parent carries its progress, "
    "and the child is written through the caller's pointer when it ends",
    "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommSplit / ncclCommInitChildComm / ncclCommInitRankFunc
  ncclComm_t parent = one_rank();
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  auto* slot = new ncclComm_t(reinterpret_cast<ncclComm_t>(0x1));  // NCCL sets it to NULL first
  const ncclResult_t r = ncclCommSplit(parent, 0, 0, slot, &cfg);
  ncclResult_t state = ncclSuccess;
  REQUIRE(ncclCommGetAsyncError(parent, &state) == ncclSuccess);
  const ncclComm_t right_after = load(slot);
  WARN("ncclCommSplit returned " << r << "; parent state " << state << "; child right after: " << right_after);
  CHECK(r == ncclSuccess);
  CHECK(state == ncclInProgress);
  CHECK(right_after == nullptr);
  CHECK(settle(parent) == ncclSuccess);
  const ncclComm_t child = load(slot);
  CHECK(child != nullptr);
  ncclResult_t cs = ncclInProgress;
  if (child) {
    CHECK(ncclCommGetAsyncError(child, &cs) == ncclSuccess);
    CHECK(cs == ncclSuccess);
    CHECK(ncclCommDestroy(child) == ncclSuccess);
  }
  CHECK(ncclCommDestroy(parent) == ncclSuccess);
  delete slot;
}

TEST_CASE(
    "conformance: a communicator used while its split runs is refused with ncclInvalidArgument, and the "
    "last error is one buffer for every thread",
    "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommEnsureReady; enqueue.cc ncclEnqueueCheck; debug.cc ncclLastError
  ncclComm_t parent = one_rank();
  Buffers buf;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  auto* slot = new ncclComm_t(nullptr);
  REQUIRE(ncclCommSplit(parent, 0, 0, slot, &cfg) == ncclSuccess);
  const ncclResult_t busy = ncclAllReduce(buf.a, buf.b, 16, ncclFloat32, ncclSum, parent, buf.stream);
  std::string seen_elsewhere;
  std::thread([&] { seen_elsewhere = ncclGetLastError(nullptr); }).join();
  WARN("collective on a busy communicator: " << busy << "; last error from another thread: " << seen_elsewhere);
  CHECK(busy == ncclInvalidArgument);
  CHECK(seen_elsewhere.find("Attempt to use communicator before the previous operation returned ncclSuccess") !=
        std::string::npos);
  // The split still ends; the refusal stored on the parent races with the job's own result, so
  // only the child's arrival is waited for here, then the parent is aborted (any state).
  const auto t0 = Clock::now();
  while (!load(slot) && std::chrono::duration<double>(Clock::now() - t0).count() < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(load(slot) != nullptr);
  CHECK(ncclCommAbort(parent) == ncclSuccess);  // joins the job (group.cc ncclGroupJobAbort)
  if (ncclComm_t c = load(slot)) CHECK(ncclCommAbort(c) == ncclSuccess);
  delete slot;
}

TEST_CASE("conformance: NCCL_SPLIT_NOCOLOR still runs on the parent and leaves the child NULL", "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommInitChildComm (no child allocated), ncclCommInitRankFunc (`goto exit`)
  ncclComm_t parent = one_rank();
  auto* slot = new ncclComm_t(reinterpret_cast<ncclComm_t>(0x1));
  CHECK(ncclCommSplit(parent, NCCL_SPLIT_NOCOLOR, 0, slot, nullptr) == ncclSuccess);
  CHECK(settle(parent) == ncclSuccess);
  CHECK(load(slot) == nullptr);
  CHECK(ncclCommDestroy(parent) == ncclSuccess);
  delete slot;
}

TEST_CASE("conformance: an abort of a parent with a split in flight returns after the job wrote the child",
          "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommAbort -> ncclCommEnsureReady -> group.cc ncclGroupJobAbort (pthread_join)
  ncclComm_t parent = one_rank();
  auto* slot = new ncclComm_t(nullptr);
  REQUIRE(ncclCommSplit(parent, 0, 0, slot, nullptr) == ncclSuccess);
  CHECK(ncclCommAbort(parent) == ncclSuccess);
  const ncclComm_t after_abort = load(slot);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(load(slot) == after_abort);  // nothing writes it any more
  WARN("child slot after the parent's abort: " << after_abort << " (a half-initialised child when non-NULL)");
  if (after_abort) CHECK(ncclCommAbort(after_abort) == ncclSuccess);
  delete slot;
}

TEST_CASE(
    "conformance: non-blocking collectives return ncclInProgress or ncclSuccess and complete on the stream; "
    "blocking ones return ncclSuccess",
    "[.conformance][gpu]") {
  if (!usable()) return;
  // enqueue.cc ncclEnqueueCheck (returns ncclCommGetAsyncError), group.cc ncclGroupEndInternal
  for (int blocking : {0, 1}) {
    INFO("blocking " << blocking);
    ncclComm_t c = one_rank(blocking);
    Buffers buf;
    std::vector<float> in(16, 2.5f), out(16, 0.f);
    REQUIRE(cudaMemcpy(buf.a, in.data(), 64, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // a pageable copy may return before it lands
    const ncclResult_t r = ncclAllReduce(buf.a, buf.b, 16, ncclFloat32, ncclSum, c, buf.stream);
    if (blocking)
      CHECK(r == ncclSuccess);
    else
      CHECK((r == ncclSuccess || r == ncclInProgress));
    CHECK(settle(c) == ncclSuccess);
    REQUIRE(cudaStreamSynchronize(buf.stream) == cudaSuccess);
    REQUIRE(cudaMemcpy(out.data(), buf.b, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(out[15] == 2.5f);
    CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
}

TEST_CASE("conformance: on one rank a receive from self needs a send to self in the same group",
          "[.conformance][gpu]") {
  if (!usable()) return;
  // enqueue.cc scheduleP2pTasksToPlan: "Trying to recv to self without a matching send"
  ncclComm_t c = one_rank(1);
  Buffers buf;
  std::vector<int32_t> in(16, 7), out(16, 0);
  REQUIRE(cudaMemcpy(buf.a, in.data(), 64, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // a pageable copy may return before it lands
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(buf.a, 16, ncclInt32, 0, c, buf.stream) == ncclSuccess);
  REQUIRE(ncclRecv(buf.b, 16, ncclInt32, 0, c, buf.stream) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(buf.stream) == cudaSuccess);
  REQUIRE(cudaMemcpy(out.data(), buf.b, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(out[15] == 7);
  const ncclResult_t lone = ncclRecv(buf.b, 16, ncclInt32, 0, c, buf.stream);
  WARN("a lone receive from self on a blocking one-rank communicator: " << lone << " (" << ncclGetLastError(nullptr)
                                                                        << ")");
  CHECK(lone == ncclInvalidUsage);
  CHECK(ncclCommAbort(c) == ncclSuccess);
}

TEST_CASE("conformance: ncclAlltoAll on one rank copies count elements and leaves an in-place buffer alone",
          "[.conformance][gpu]") {
  if (!usable()) return;
  if (!cs::nccl_has("ncclAlltoAll")) {
    WARN("this NCCL has no ncclAlltoAll (before 2.28): the backend uses ncclSend/ncclRecv");
    return;
  }
  // enqueue.cc taskAppend: nRanks == 1 -> ncclLaunchOneRank (onerank.cu: a copy, none when dst == src)
  ncclComm_t c = one_rank(1);
  Buffers buf;
  std::vector<int32_t> in(16), out(16, 0);
  for (int i = 0; i < 16; ++i) in[static_cast<size_t>(i)] = 100 + i;
  REQUIRE(cudaMemcpy(buf.a, in.data(), 64, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(ncclAlltoAll(buf.a, buf.b, 16, ncclInt32, c, buf.stream) == ncclSuccess);
  REQUIRE(ncclAlltoAll(buf.a, buf.a, 16, ncclInt32, c, buf.stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(buf.stream) == cudaSuccess);
  REQUIRE(cudaMemcpy(out.data(), buf.b, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(out == in);
  REQUIRE(cudaMemcpy(out.data(), buf.a, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(out == in);
  CHECK(ncclCommAbort(c) == ncclSuccess);
}

TEST_CASE("conformance: finalize follows the ensure-ready rule, runs in the background, and only once",
          "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommFinalize (ncclCommEnsureReady, finalizeCalled), ncclCommDestroy
  ncclComm_t c = one_rank();
  ncclResult_t r = ncclCommFinalize(c);
  CHECK((r == ncclSuccess || r == ncclInProgress));
  CHECK(settle(c) == ncclSuccess);
  CHECK(ncclCommFinalize(c) == ncclInvalidArgument);
  // The refusal is stored on the non-blocking communicator: it cannot be destroyed cleanly now.
  ncclResult_t s = ncclSuccess;
  CHECK(ncclCommGetAsyncError(c, &s) == ncclSuccess);
  CHECK(s == ncclInvalidArgument);
  CHECK(ncclCommAbort(c) == ncclSuccess);
}

TEST_CASE("conformance: a blocking child of a splitShare parent works and both can be aborted, child first",
          "[.conformance][gpu]") {
  if (!usable()) return;
  // init.cc ncclCommInitChildComm (`comm->shareResources = ... comm->config.splitShare`; the
  // shared resources are reference-counted, commFree): the timed twin's life, and its end in
  // NcclCommunicator::revoke (the twin aborted, then its parent).
  ncclComm_t parent = one_rank(0, 1);
  auto* slot = new ncclComm_t(nullptr);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  REQUIRE(ncclCommSplit(parent, 0, 0, slot, &cfg) == ncclSuccess);
  REQUIRE(settle(parent) == ncclSuccess);
  ncclComm_t child = load(slot);
  REQUIRE(child != nullptr);
  Buffers buf;
  REQUIRE(ncclAllReduce(buf.a, buf.b, 16, ncclFloat32, ncclSum, child, buf.stream) == ncclSuccess);
  REQUIRE(cudaStreamSynchronize(buf.stream) == cudaSuccess);
  CHECK(ncclCommAbort(child) == ncclSuccess);
  CHECK(ncclCommAbort(parent) == ncclSuccess);  // callable in any state
  delete slot;
}

#endif  // COMMSCRIPT_HAVE_NCCL
