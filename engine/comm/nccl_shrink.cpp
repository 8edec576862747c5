// Surviving a dropped rank with the NCCL backend (NCCL >= 2.28 and a control plane that can:
// Gloo): whether it can be done and why not, the ranks gone (looked at while waiting on the
// GPU), revoke (ncclCommRevoke, polled until quiescent) and shrink (ncclCommShrink over the
// control plane's own shrink).
#include <algorithm>

#include "cuda_device.hpp"
#include "error.hpp"
#include "gpu_libs.hpp"
#include "int_list.hpp"
#include "nccl_communicator.hpp"
#include "nccl_shared.hpp"
#include "poll_wait.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace cs {

std::string NcclCommunicator::no_shrink_reason() const {
  if (!nccl_has("ncclCommRevoke") || !nccl_has("ncclCommShrink"))
    return "cannot survive a dropped rank: the loaded NCCL (" + nccl_version_string(nccl_lib().version) +
           ") lacks ncclCommRevoke/ncclCommShrink (NCCL >= 2.28 has both)";
  return "cannot survive a dropped rank with this control plane (" + ctrl_->backend() +
         "): " + ctrl_->no_shrink_reason() +
         "; launch without MPI (--launcher env or slurm), where the NCCL backend's control plane is Gloo";
}

std::vector<int> NcclCommunicator::survivors() {
  if (!ctrl_survives_ || !nccl_has("ncclCommRevoke") || !nccl_has("ncclCommShrink"))
    throw InputError("nccl: " + no_shrink_reason());
  return ctrl_->survivors();
}

void NcclCommunicator::check_gone(const Op& op, const char* call) {
  const int64_t now = now_ns();
  if (now - gone_checked_ns_ < 100000000) return;
  gone_checked_ns_ = now;
  const std::vector<int> alive = ctrl_->survivors();
  if (static_cast<int>(alive.size()) >= size_) return;
  std::vector<int> gone;
  for (int r = 0; r < size_; ++r)
    if (std::find(alive.begin(), alive.end(), r) == alive.end()) gone.push_back(r);
  // The communicator stays as it is (the operation still on the GPU): revoke() stops it.
  throw RanksLostError(std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                           format_size(op.bytes()) + "B, " + name() + ", nccl) on rank " + std::to_string(rank_) +
                           ", GPU " + std::to_string(device_) + ": " + call + " cannot complete: rank" +
                           (gone.size() > 1 ? "s " : " ") + format_int_ranges(gone) +
                           " gone (the control plane lost their connection); revoke and shrink to go on",
                       gone);
}

void NcclCommunicator::revoke() {
  survivors();  // refuses, saying why, where a drop cannot be survived
  ctrl_->revoke();
  if (revoked_ || !comm_) return;
  revoked_ = true;
  {  // the revoke raises the abort flag that the twin and the recipe's splits share
    std::lock_guard<std::mutex> g(family_->mu);
    if (!family_->aborted) {
      family_->aborted = true;
      family_->why = "the revoke of communicator '" + name() + "' (shrink it to go on)";
    }
  }
  if (timed_) ncclCommAbort(timed_);  // the timed loops' communicator is rebuilt by shrink
  timed_ = nullptr;
  const std::string what = "ncclCommRevoke of communicator '" + name() + "' on rank " + std::to_string(rank_);
  ncclResult_t r = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 10;
  const int64_t t0 = now_ns();
  // In progress until the stopped work has left the GPU (quiescent).
  for (unsigned polls = 0; r == ncclSuccess || r == ncclInProgress; ++polls) {
    ncclResult_t a = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(comm_, &a); q != ncclSuccess)
      r = q;
    else if (a != ncclInProgress) {
      r = a;
      break;
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (waited > limit) {
      why_aborted_ = "timeout: " + what + " not quiescent within " + std::to_string(static_cast<int>(limit)) +
                     " s; the communicator was aborted (ncclCommAbort)";
      abort_comm();
      throw Error(ExitCode::hang_or_desync, why_aborted_);
    }
    pause_poll(waited, polls);
  }
  if (r != ncclSuccess) {
    why_aborted_ = what + " failed: " + nccl_text(r, comm_);
    abort_comm();
    throw Error(ExitCode::runtime, why_aborted_);
  }
  // What was enqueued but stopped leaves the stream now.
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

std::unique_ptr<Communicator> NcclCommunicator::shrink(const std::vector<int>& exclude) {
  survivors();
  // The control plane first: it checks the list (only gone ranks, not itself, not all) and
  // gives the survivors their new ranks.
  std::unique_ptr<Communicator> sub_ctrl = ctrl_->shrink(exclude);
  if (!comm_) throw Error(ExitCode::runtime, "shrink of communicator '" + name() + "': " + why_aborted_);
  if (timed_) ncclCommAbort(timed_);
  timed_ = nullptr;
  ++shrinks_;
  const std::string sub_name = name() + "/shrink" + std::to_string(shrinks_);
  const std::string what = "ncclCommShrink of communicator '" + name() + "' (excluding " + format_int_ranges(exclude) +
                           ") on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_);
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // for the new communicator's own twin
  cfg.commName = stable_name(sub_name);
  std::vector<int> ex(exclude.begin(), exclude.end());  // NCCL sorts it in place (qsort)
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  // NCCL_SHRINK_ABORT: whatever still runs on the parent is stopped first (a no-op after revoke);
  // the new communicator never shares the parent's resources then.
  ncclComm_t nc = child_polled(
      [&](ncclComm_t* slot) {
        return ncclCommShrink(comm_, ex.data(), static_cast<int>(ex.size()), slot, &cfg, NCCL_SHRINK_ABORT);
      },
      true, limit, what);
  std::unique_ptr<NcclCommunicator> sub(new NcclCommunicator(std::move(sub_ctrl), sub_name, device_));
  sub->comm_ = nc;  // its own family: a shrink never shares
  sub->ctrl_survives_ = true;
  finish_child(*sub, limit);
  return sub;
}

}  // namespace cs
