// The NCCL backend's child communicators: a split (comm:split), the timed twin every
// communicator has (a blocking split for the timed loops), and what a split and a shrink share:
// NCCL's non-blocking call polled on the parent against the deadline, the child's slot kept
// alive until NCCL is done with it, then the child's device setup agreed on by its members.
// nccl_shrink.cpp has the shrink itself.
#include "cuda_device.hpp"
#include "error.hpp"
#include "gpu_libs.hpp"
#include "host_name.hpp"
#include "nccl_communicator.hpp"
#include "nccl_shared.hpp"
#include "poll_wait.hpp"
#include "progress.hpp"

namespace cs {

namespace {

// NCCL 2.19 made the background job per communicator, joined by ncclCommAbort (group.cc
// ncclGroupJobAbort): from then on nothing writes a split's child slot after the abort returns.
bool abort_joins_job() { return nccl_lib().version >= 21900; }

}  // namespace

ncclComm_t NcclCommunicator::child_polled(const std::function<ncclResult_t(ncclComm_t*)>& start, bool want_child,
                                          double limit, const std::string& what) {
  // NCCL writes the child through this pointer from its own thread when the job ends (init.cc
  // ncclCommInitRankFunc: `__atomic_store_n(job->newcomm, comm, __ATOMIC_RELEASE)`, on failure
  // too), after our call has returned: the slot is on the heap, freed once nothing can write it.
  auto* slot = new ncclComm_t(nullptr);
  auto child = [&] { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); };
  auto end_with = [&](ExitCode code, const std::string& msg) {
    // The parent first: its abort joins the job (from NCCL 2.19), so the slot is final after it.
    why_aborted_ = msg;
    abort_comm();
    if (ncclComm_t c = child()) ncclCommAbort(c);
    if (abort_joins_job()) delete slot;  // else left: an older NCCL's job may still write it
    throw Error(code, msg);
  };
  ncclResult_t r = start(slot);
  // A non-blocking parent returns ncclSuccess at once with the child still NULL (ncclCommSplit:
  // the group end's ncclInProgress is swallowed); its progress is on the parent.
  const int64_t t0 = now_ns();
  for (unsigned polls = 0; r == ncclSuccess || r == ncclInProgress; ++polls) {
    ncclResult_t a = ncclSuccess;
    if (const ncclResult_t q = ncclCommGetAsyncError(comm_, &a); q != ncclSuccess) {
      r = q;
      break;
    }
    if (a != ncclInProgress) {
      r = a;
      break;
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (limit > 0 && waited > limit)
      end_with(ExitCode::hang_or_desync,
               "timeout: " + what + " did not complete within " + std::to_string(static_cast<int>(limit)) +
                   " s (a rank never called it?); the communicator was aborted (ncclCommAbort)");
    pause_poll(waited, polls);
  }
  if (r != ncclSuccess)
    end_with(ExitCode::runtime,
             what + " failed: " + nccl_text(r, comm_) + "; the communicator was aborted (ncclCommAbort)");
  ncclComm_t c = child();
  delete slot;
  if (want_child && !c) {
    why_aborted_ = what + ": NCCL reported success but published no communicator";
    abort_comm();
    throw Error(ExitCode::runtime, why_aborted_);
  }
  if (!want_child && c) {  // not expected: NCCL_SPLIT_NOCOLOR gives no communicator
    ncclCommAbort(c);
    c = nullptr;
  }
  return c;
}

ncclComm_t NcclCommunicator::split_polled(int color, int key, ncclConfig_t& cfg, double limit,
                                          const std::string& what) {
  return child_polled([&](ncclComm_t* slot) { return ncclCommSplit(comm_, color, key, slot, &cfg); },
                      color != NCCL_SPLIT_NOCOLOR, limit, what);
}

void NcclCommunicator::make_timed(double limit_s) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.commName = stable_name(name() + "/timed");
  timed_ = split_polled(0, rank_, cfg, limit_s,
                        "ncclCommSplit (the blocking communicator of the timed loops) of communicator '" + name() +
                            "' on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_));
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (!comm_) throw Error(ExitCode::runtime, "split of communicator '" + name() + "': " + why_aborted_);
  {
    std::lock_guard<std::mutex> g(family_->mu);
    if (family_->aborted)
      throw Error(ExitCode::runtime, "split of communicator '" + name() + "': unusable after " + family_->why);
  }
  auto sub_ctrl = ctrl_->split(color, key);
  ++splits_;  // on every rank, even one left out: the names must agree
  const std::string sub_name = name() + "/s" + std::to_string(splits_) + ".c" + std::to_string(color);
  const std::string what = "ncclCommSplit of communicator '" + name() + "' (color " + std::to_string(color) +
                           ") on rank " + std::to_string(rank_) + ", GPU " + std::to_string(device_);
  // The split first, every rank at once: a rank whose device setup failed before it would leave
  // the others waiting in ncclCommSplit (setup comes after, agreed on over the sub-communicator).
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.splitShare = 1;  // for the child's own twin
  cfg.commName = stable_name(sub_name);
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  ncclComm_t nc = split_polled(color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, cfg, limit, what);
  if (!sub_ctrl) {
    if (nc) ncclCommAbort(nc);  // not expected: NCCL_SPLIT_NOCOLOR gives no communicator
    return nullptr;
  }
  std::unique_ptr<NcclCommunicator> sub(new NcclCommunicator(std::move(sub_ctrl), sub_name, device_));
  sub->comm_ = nc;                               // freed with `sub`, whatever happens below
  if (split_share_on()) sub->family_ = family_;  // it shares this one's abort flag
  finish_child(*sub, limit);
  return sub;
}

// A child communicator (split or shrink) once it holds its NCCL handle: this one's deadline,
// verification and timing, its device setup agreed on by every member (one member's failure
// ends them all, naming its GPU), then its timed twin.
void NcclCommunicator::finish_child(NcclCommunicator& sub, double limit) const {
  sub.set_timeout(timeout_s_, local_grace_s_);
  sub.set_verify(verify_);
  sub.event_timing_ = event_timing_;
  std::string err;
  try {
    sub.setup();
  } catch (const Error& e) {
    err = std::string("GPU ") + std::to_string(device_) + ": " + e.what();
  }
  const auto hosts = sub.ctrl_->allgather(host_name());
  agree(*sub.ctrl_, err, ExitCode::runtime, hosts);
  sub.make_timed(limit);
}

}  // namespace cs
