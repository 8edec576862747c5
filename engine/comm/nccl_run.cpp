// Running one operation on the NCCL backend: the checks before it, the enqueue (watched by the
// monitor thread on the blocking twin), the wait for it polled against the deadline, and the
// ends of a failure (the communicator aborted, the error naming the operation) and of a timeout
// (with what the RAS probe adds).
#include <mutex>

#include "cuda_device.hpp"
#include "error.hpp"
#include "nccl_communicator.hpp"
#include "nccl_guard.hpp"
#include "nccl_shared.hpp"
#include "poll_wait.hpp"
#include "size.hpp"

namespace cs {

namespace {

std::mutex g_ras_mu;
NcclCommunicator::RasProbe g_ras_probe;

}  // namespace

void NcclCommunicator::set_ras_probe(RasProbe probe) {
  std::lock_guard<std::mutex> g(g_ras_mu);
  g_ras_probe = std::move(probe);
}

void NcclCommunicator::run(const Op& op) {
  if (!comm_)
    throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " on communicator '" + name() +
                                       "': the communicator is unusable after an earlier failure (" + why_aborted_ +
                                       ")");
  {
    std::lock_guard<std::mutex> g(family_->mu);
    if (family_->aborted)  // NCCL aborted it with a relative that shares its abort flag
      throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " on communicator '" + name() +
                                         "': the communicator is unusable after " + family_->why);
  }
  check_buffers(op);
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  // Timed loops go to the blocking communicator: on a non-blocking one every call spawns and
  // joins a thread (NCCL >= 2.23), which would be inside the timed region.
  const ncclComm_t nc = op.blocking && timed_ ? timed_ : comm_;
  const bool timing = op.blocking && event_timing_ && !pipelined_;
  if (timing) cuda_check(cudaEventRecord(ev_start_, stream_), "cudaEventRecord");
  const char* call = "";
  const int64_t t0 = now_ns();
  ncclResult_t r = ncclSuccess;
  if (nc == timed_) {
    // A blocking call can wait inside NCCL (lazy connection setup, the work FIFO): watched.
    bool fired = false;
    r = guarded(
        timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0, [&] { return enqueue(op, &call, nc); }, &fired);
    if (fired)
      timed_out(op, static_cast<double>(now_ns() - t0) * 1e-9,
                "inside the blocking call (NCCL's host-side wait: lazy connection setup or the work FIFO)");
  } else {
    r = enqueue(op, &call, nc);
  }
  if (r != ncclSuccess && r != ncclInProgress) fail(op, call, r);
  // A non-blocking communicator may still be enqueueing: the work is on the stream only once
  // the asynchronous state says so (then the end event goes after it).
  if (r == ncclInProgress) wait(op, call, true, t0);
  if (pipelined_) return;  // time_loop_us waits once, after the whole loop
  if (timing) cuda_check(cudaEventRecord(ev_end_, stream_), "cudaEventRecord");
  wait(op, call, false, t0);
}

void NcclCommunicator::wait(const Op& op, const char* call, bool enqueueing, int64_t t0) {
  const double limit = timeout_s_ > 0 ? timeout_s_ + local_grace_s_ : 0;
  // Timed loops spin (the stream query is the whole cost); the clock and the asynchronous
  // error are looked at every 1024 polls there, on every poll otherwise.
  const unsigned every = op.blocking ? 1023u : 0u;
  for (unsigned polls = 0;; ++polls) {
    if (enqueueing) {
      ncclResult_t a = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &a);
      if (q != ncclSuccess) fail(op, "ncclCommGetAsyncError", q);
      if (a == ncclSuccess) return;
      if (a != ncclInProgress) fail(op, call, a);
    } else {
      const cudaError_t s = cudaStreamQuery(stream_);
      if (s == cudaSuccess) return;
      if (s != cudaErrorNotReady) {
        cudaGetLastError();
        why_aborted_ = std::string(call) + ": cudaStreamQuery: " + cuda_error_text(s);
        abort_comm();
        throw Error(ExitCode::runtime, std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " on '" +
                                           name() + "', rank " + std::to_string(rank_) + ": " + why_aborted_);
      }
    }
    if ((polls & every) != every) continue;
    if (!enqueueing) {
      ncclResult_t a = ncclSuccess;
      for (ncclComm_t c : {comm_, timed_})
        if (c && ncclCommGetAsyncError(c, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress)
          fail(op, call, a);
    }
    const double waited = static_cast<double>(now_ns() - t0) * 1e-9;
    if (ctrl_survives_) check_gone(op, call);
    if (limit > 0 && waited > limit) timed_out(op, waited);
    if (!op.blocking) pause_poll(waited, polls);
  }
}

void NcclCommunicator::fail(const Op& op, const char* call, ncclResult_t r) {
  const std::string msg = std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                          format_size(op.bytes()) + "B, " + name() + ") on rank " + std::to_string(rank_) + ", GPU " +
                          std::to_string(device_) + ": " + call + " failed: " + nccl_text(r, comm_);
  // Every error ends the communicator: on a non-blocking one even ncclInvalidArgument persists
  // (ncclCommGetAsyncError keeps returning it), so nothing could run on it afterwards.
  why_aborted_ = msg;
  abort_comm();
  throw Error(ExitCode::runtime, msg);
}

void NcclCommunicator::timed_out(const Op& op, double waited_s, const char* where) {
  std::string msg = "timeout: " + std::string(collective_name(op.coll)) + " #" + std::to_string(seq()) + " (" +
                    format_size(op.bytes()) + "B, " + name() + ") after " + std::to_string(static_cast<int>(waited_s)) +
                    " s on rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) +
                    "): NCCL never completed it" + (where ? std::string(" ") + where : std::string()) +
                    "; the communicator was aborted (ncclCommAbort)";
  RasProbe probe;
  {
    std::lock_guard<std::mutex> g(g_ras_mu);
    probe = g_ras_probe;
  }
  if (probe) {
    try {
      const std::string ras = probe(op, name());
      if (!ras.empty()) msg += "\nNCCL RAS: " + ras;
    } catch (const std::exception& e) {
      msg += "\nNCCL RAS: not available (" + std::string(e.what()) + ")";
    }
  }
  why_aborted_ = msg;
  abort_comm();
  throw Error(ExitCode::hang_or_desync, msg);
}

}  // namespace cs
