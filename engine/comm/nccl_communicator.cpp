// The NCCL communicator's life: created (every rank's GPU agreed on, the unique id from rank 0,
// non-blocking init polled against the deadline, the timed twin split off), marked aborted, and
// torn down within a deadline in every state. The other concerns are beside it, one a file
// (nccl_communicator.hpp lists them).
#include "nccl_communicator.hpp"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cuda_device.hpp"
#include "error.hpp"
#include "mpi_communicator.hpp"
#include "nccl_device.hpp"
#include "nccl_guard.hpp"
#include "nccl_shared.hpp"
#include "poll_wait.hpp"

namespace cs {

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> control, std::string name, int device)
    : Communicator(std::move(name)),
      ctrl_(std::move(control)),
      family_(std::make_shared<NcclFamily>()),
      guard_(std::make_shared<NcclGuard>()),
      device_(device) {
  GuardMonitor::get().add(guard_);
  rank_ = ctrl_->rank();
  size_ = ctrl_->size();
  const char* t = std::getenv("COMMSCRIPT_TIMING");
  event_timing_ = !(t && std::string_view(t) == "host");
}

void NcclCommunicator::setup() {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cuda_check(cudaEventCreate(&ev_start_), "cudaEventCreate");
  cuda_check(cudaEventCreate(&ev_end_), "cudaEventCreate");
  cuda_check(cudaMalloc(&barrier_buf_, 8), "cudaMalloc");
  cuda_check(cudaMemset(barrier_buf_, 0, 8), "cudaMemset");
}

NcclCommunicator::~NcclCommunicator() {
  teardown();
  GuardMonitor::get().remove(guard_.get());
  if (scratch_) cudaFree(scratch_);
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (ev_end_) cudaEventDestroy(ev_end_);
  if (ev_start_) cudaEventDestroy(ev_start_);
  if (stream_) cudaStreamDestroy(stream_);
}

// Ends both NCCL communicators within a deadline in every state. Healthy: the twin is destroyed
// under the guard (ncclCommDestroy is always blocking: init.cc commReclaim waits for the streams;
// past the deadline the monitor aborts comm_, whose abort flag the twin shares), then comm_ is
// finalized without blocking and polled (ncclCommFinalize is refused unless comm_ is ready:
// init.cc ncclCommEnsureReady), then destroyed. Revoked, failed, busy or late: ncclCommAbort,
// which never waits for a peer.
void NcclCommunicator::teardown() {
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 10.0;
  bool healthy = !revoked_;
  {
    std::lock_guard<std::mutex> g(family_->mu);
    healthy = healthy && !family_->aborted;
  }
  if (healthy && timed_) {
    bool fired = false;
    const ncclResult_t r = guarded(
        limit, [&] { return ncclCommDestroy(timed_); }, &fired);
    if (r != ncclSuccess && !fired) ncclCommAbort(timed_);  // refused: not freed
    timed_ = nullptr;
    healthy = !fired;
  }
  if (!healthy || !comm_) {
    abort_comm();
    return;
  }
  ncclResult_t r = ncclCommFinalize(comm_);
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclInProgress; ++polls) {
    if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) break;
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (r != ncclInProgress || waited > limit) break;
    pause_poll(waited, polls);
  }
  if (r == ncclSuccess && ncclCommDestroy(comm_) == ncclSuccess)
    comm_ = nullptr;
  else
    abort_comm();
}

void NcclCommunicator::mark_aborted(const std::string& why) {
  std::lock_guard<std::mutex> g(family_->mu);
  if (family_->aborted) return;
  family_->aborted = true;
  family_->why = "an abort of communicator '" + name() + "' (" + why + ")";
}

void NcclCommunicator::abort_comm() {
  if (timed_ || comm_) mark_aborted(why_aborted_.empty() ? "teardown after a failure" : why_aborted_);
  if (timed_) ncclCommAbort(timed_);  // split from comm_: it goes first
  timed_ = nullptr;
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::world(double init_timeout_s) {
  return create(MpiCommunicator::world(), "world", init_timeout_s);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(std::unique_ptr<Communicator> control, std::string name,
                                                           double init_timeout_s) {
  Communicator& ctl = *control;
  const int n = ctl.size(), me = ctl.rank();

  // 1. What every rank has, so that all of them refuse the same way (none is left waiting).
  std::vector<std::string> hosts;
  const int dev = agree_on_device(ctl, &hosts);

  // 2. This rank's GPU: stream, events, the barrier's buffer.
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(std::move(control), std::move(name), dev));
  std::string err;
  try {
    c->setup();
  } catch (const Error& e) {
    err = std::string("GPU ") + std::to_string(dev) + ": " + e.what();
  }
  agree(*c->ctrl_, err, ExitCode::runtime, hosts);

  // 3. The unique id, from rank 0 over the control communicator.
  ncclUniqueId id{};
  std::string blob;
  if (me == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    blob = r == ncclSuccess ? "1" + std::string(id.internal, sizeof id.internal)
                            : "0ncclGetUniqueId failed on rank 0 (host " + hosts[0] + "): " + nccl_text(r, nullptr);
  }
  blob = c->ctrl_->broadcast(blob, 0);
  if (blob.empty() || blob[0] != '1' || blob.size() != 1 + sizeof id.internal)
    throw Error(ExitCode::runtime,
                "--backend nccl: " + (blob.size() > 1 ? blob.substr(1) : std::string("no unique id")));
  std::memcpy(id.internal, blob.data() + 1, sizeof id.internal);

  // 4. Non-blocking init, polled against the deadline.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // the timed twin (and the recipe's splits) share this one's resources
  cfg.commName = stable_name(c->name_);
  ncclComm_t comm = nullptr;
  ExitCode code = ExitCode::runtime;
  err.clear();
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, me, &cfg);
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclInProgress; ++polls) {
    const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
    if (q != ncclSuccess) r = q;
    if (r != ncclInProgress) break;
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (init_timeout_s > 0 && waited > init_timeout_s) {
      code = ExitCode::hang_or_desync;
      err = "timeout: ncclCommInitRankConfig (GPU " + std::to_string(dev) + ") did not complete within " +
            std::to_string(static_cast<int>(init_timeout_s)) +
            " s: a rank never joined, or NCCL's bootstrap cannot connect (NCCL_SOCKET_IFNAME?); the communicator was "
            "aborted (ncclCommAbort)";
      break;
    }
    pause_poll(waited, polls);
  }
  if (err.empty() && r != ncclSuccess)
    err = "ncclCommInitRankConfig (GPU " + std::to_string(dev) + ") failed: " + nccl_text(r, comm);
  if (!err.empty() && comm) {
    ncclCommAbort(comm);
    comm = nullptr;
  }
  try {
    agree(*c->ctrl_, err, code, hosts);
  } catch (...) {
    if (comm) ncclCommAbort(comm);
    throw;
  }
  c->comm_ = comm;
  c->make_timed(init_timeout_s);
  try {  // a control plane that survives drops (Gloo) says who is alive; MPI refuses
    c->ctrl_->survivors();
    c->ctrl_survives_ = true;
  } catch (const InputError&) {
  }
  return c;
}

}  // namespace cs
