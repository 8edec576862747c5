#pragma once
// The NCCL backend (built when CUDA and NCCL are found: COMMSCRIPT_HAVE_NCCL). One GPU per rank,
// chosen by the rank's place among the ranks of its host (COMMSCRIPT_DEVICE overrides it), and
// a control communicator beside it (MPI for the world) that carries the unique id, the checks
// every rank must agree on, and the result gathering of the Communicator interface.
//
// NCCL has no collective timeout (docs/nccl.md): communicators are created non-blocking
// (config.blocking = 0), and every non-blocking call (init, split, shrink, revoke, finalize, a
// collective) is followed to completion by polling ncclCommGetAsyncError on the communicator
// NCCL reports it on (a split's and a shrink's progress on the PARENT: NCCL returns
// ncclSuccess at once and writes the child through our pointer from its own thread when done)
// against the operation's deadline; past it the communicator is aborted (ncclCommAbort) and the
// operation fails with a timeout error that names it. Timed loops (op.blocking) run on a
// blocking twin split off with splitShare (one set of NCCL resources; on a non-blocking
// communicator NCCL creates a thread per call), enqueue, then spin on the stream (nccl-tests'
// completeColl), and are timed with CUDA events. A blocking call can wait inside NCCL (lazy
// connection setup, the work FIFO): a monitor thread aborts the twin's parent past the deadline,
// which through the shared abort flag ends that wait, and the call fails as a timeout.
//
// Buffers must be device memory of the rank's GPU (Tensor::on_device): a host pointer is refused
// with a UsageError before anything is enqueued.
//
// One concern a file: nccl_communicator.cpp (creation, init, abort, teardown), nccl_device.cpp
// (the choice of GPU and its refusals), nccl_run.cpp (an operation: checks, enqueue, the wait
// against the deadline, failure and timeout), nccl_enqueue.cpp (an operation as NCCL calls),
// nccl_buffers.cpp (which buffers are accepted), nccl_timing.cpp (CUDA-event timing),
// nccl_guard.{hpp,cpp} (the monitor thread), nccl_split.cpp (split and the timed twin),
// nccl_shrink.cpp (revoke and shrink after a dropped rank), nccl_shared.{hpp,cpp} (what they share).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "communicator.hpp"
#include "cuda_support.hpp"
#include "tensor.hpp"

namespace cs {

struct NcclFamily;  // communicators that share NCCL's abort flag (splitShare)
struct NcclGuard;   // a blocking NCCL call watched by the monitor thread

class NcclCommunicator final : public Communicator {
 public:
  // Over every MPI rank (MPI must be initialised): the unique id goes out through a duplicate of
  // MPI_COMM_WORLD. Throws InputError when a rank has no usable device (naming its host), when
  // the ranks loaded different NCCL libraries, or when COMMSCRIPT_DEVICE is not a device; Error
  // (runtime) when NCCL fails to start; Error(timeout) when it does not start within
  // `init_timeout_s` (0: no deadline). Every rank throws the same error.
  static std::unique_ptr<NcclCommunicator> world(double init_timeout_s);
  // The same over the ranks of `control` (any backend: a SelfCommunicator gives a one-rank
  // NCCL communicator without MPI).
  static std::unique_ptr<NcclCommunicator> create(std::unique_ptr<Communicator> control, std::string name,
                                                  double init_timeout_s);
  // Before MPI_Init: makes the device of this rank's launcher-given local rank current (so that
  // CUDA-aware MPI and NCCL's own threads start on it) and remembers it for world()/create().
  // Returns an empty string, or the refusal (InputError text: more local ranks than GPUs on this
  // host); `print` is set when this process should print it (the host's local rank 0, or every
  // failing rank when the launcher does not say how many ranks share the host).
  static std::string choose_device_before_mpi(bool* print);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  std::unique_ptr<Communicator> split(int color, int key) override;

  // Surviving a dropped rank (NCCL >= 2.28), where the control communicator can (Gloo, as under
  // --launcher env; MPI cannot: its reason is given). A wait on the GPU asks the control plane
  // every 100 ms which ranks are gone and throws RanksLostError naming them, leaving the
  // communicator to revoke(): ncclCommRevoke, polled until quiescent; shrink(exclude):
  // ncclCommShrink with NCCL_SHRINK_ABORT over the control plane's own shrink, polled against
  // the deadline, giving a new communicator (its own stream and timed-loop communicator).
  void revoke() override;
  std::vector<int> survivors() override;
  std::unique_ptr<Communicator> shrink(const std::vector<int>& exclude) override;
  std::string no_shrink_reason() const override;

  // The control plane (MPI) gets the same deadline as the NCCL operations.
  using Communicator::set_timeout;  // the one-argument form (the process-wide grace)
  void set_timeout(double s, double local_grace_s) override {
    Communicator::set_timeout(s, local_grace_s);
    if (ctrl_) ctrl_->set_timeout(s, local_grace_s);
  }

  void allreduce_max(std::vector<double>& v) override { ctrl_->allreduce_max(v); }
  void allreduce_sum(std::vector<uint64_t>& v) override { ctrl_->allreduce_sum(v); }
  std::vector<double> allgather(double v) override { return ctrl_->allgather(v); }
  std::vector<std::string> allgather(const std::string& s) override { return ctrl_->allgather(s); }
  std::string broadcast(const std::string& s, int root) override { return ctrl_->broadcast(s, root); }
  void verify_max(std::vector<double>& v) override { ctrl_->verify_max(v); }
  void exchange(int to, const void* out, int from, void* in, size_t n) override {
    ctrl_->exchange(to, out, from, in, n);
  }

  // CUDA-event timing of the timed loops, unless turned off (set_event_timing(false), or
  // COMMSCRIPT_TIMING=host in the environment) or chaos is armed (its delays are host time).
  bool device_timing() const override { return event_timing_ && !hooked(); }
  double timed_execute_us(const Op& op) override;
  // CUDA events around `iters` back-to-back operations on the blocking communicator.
  double time_loop_us(const Op& op, size_t iters) override;
  void set_event_timing(bool on) { event_timing_ = on; }

  int device() const { return device_; }
  Tensor alloc(DType dtype, size_t count) const override { return Tensor::on_device(dtype, count, device_); }
  bool aborted() const { return comm_ == nullptr; }

  // RAS hook (NCCL's RAS service). Called on a local deadline, before ncclCommAbort,
  // with the operation that timed out and the communicator's name; what it returns (if not
  // empty) is appended to the timeout error. The intended probe connects to NCCL's RAS service
  // (NCCL_RAS_ADDR, default localhost:28028; NCCL >= 2.24, JSON from 2.28.7), sends
  // "SET FORMAT json" and "VERBOSE STATUS", and returns the missing ranks and collective counts
  // of the communicators. None is installed: it can only be written against a live NCCL job.
  using RasProbe = std::function<std::string(const Op& op, const std::string& comm_name)>;
  static void set_ras_probe(RasProbe probe);

 protected:
  void run(const Op& op) override;

 private:
  NcclCommunicator(std::unique_ptr<Communicator> control, std::string name, int device);
  void setup();  // stream, events and the barrier's buffer on device_
  ncclResult_t enqueue(const Op& op, const char** call, ncclComm_t nc);
  // The blocking communicator of the timed loops (a split of comm_ with config.blocking = 1),
  // created by the non-blocking split polled against `limit_s` (0: none).
  void make_timed(double limit_s);
  void finish_child(NcclCommunicator& sub, double limit) const;
  // ncclCommSplit of comm_, polled on comm_ (NCCL reports a split's progress on the parent)
  // against `limit` s; on a timeout or a failure the parent and then the child are aborted
  // and Error names `what`.
  ncclComm_t split_polled(int color, int key, ncclConfig_t& cfg, double limit, const std::string& what);
  // A child of comm_ (split or shrink, `start` calls NCCL with the slot NCCL writes the child
  // through): the slot lives on the heap until NCCL is done with it; comm_ is polled to the
  // end against `limit`; on a timeout or a failure comm_ and the child NCCL published are
  // aborted and Error names `what`. NULL for NCCL_SPLIT_NOCOLOR.
  ncclComm_t child_polled(const std::function<ncclResult_t(ncclComm_t*)>& start, bool want_child, double limit,
                          const std::string& what);
  // A blocking call on timed_, watched: past `limit_s` the monitor aborts comm_ (sharing the
  // abort flag), which ends NCCL's wait; returns true when that happened (comm_ is then gone).
  template <class F>
  ncclResult_t guarded(double limit_s, F&& call, bool* fired);
  void mark_aborted(const std::string& why);  // the whole family is unusable from now on
  void teardown();
  void* scratch(size_t bytes);  // device memory for in-place alltoall/sendrecv
  void check_buffers(const Op& op);
  // Polls until the enqueue of a non-blocking call has finished (enqueueing) or the stream has
  // drained; aborts the communicator and throws past the deadline (counted from t0) or on an
  // asynchronous NCCL error.
  void wait(const Op& op, const char* call, bool enqueueing, int64_t t0);
  [[noreturn]] void fail(const Op& op, const char* call, ncclResult_t r);
  [[noreturn]] void timed_out(const Op& op, double waited_s, const char* where = nullptr);
  void abort_comm();
  // Past 100 ms since the last look, the ranks the control plane knows are gone (survivable
  // control only); throws RanksLostError naming them and the operation.
  void check_gone(const Op& op, const char* call);

  std::unique_ptr<Communicator> ctrl_;
  std::shared_ptr<NcclFamily> family_;
  std::shared_ptr<NcclGuard> guard_;
  ncclComm_t comm_ = nullptr;
  ncclComm_t timed_ = nullptr;  // blocking: what timed loops (op.blocking) run on
  bool pipelined_ = false;      // inside time_loop_us: run() enqueues without waiting
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ev_start_ = nullptr, ev_end_ = nullptr;
  void* barrier_buf_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  int device_ = 0;
  int rank_ = 0, size_ = 1;
  int splits_ = 0;
  bool event_timing_ = true;
  const void* checked_[4] = {};  // buffers already found to be on this device
  unsigned checked_next_ = 0;
  std::string why_aborted_;     // why comm_ is gone
  bool ctrl_survives_ = false;  // the control plane can tell and survive a dropped rank
  bool revoked_ = false;
  int shrinks_ = 0;
  int64_t gone_checked_ns_ = 0;
};

// ---- the parts that need no device (public for the tests) ----

// nccl_version_string / nccl_version_code: core/cuda_support.hpp (one home for NCCL version text).
// Throws InputError naming the ranks of each version when the codes differ.
void check_nccl_versions(const std::vector<int>& code_by_rank);
// The rank's place among the ranks of its host (hosts[r] is rank r's host name).
int local_rank(const std::vector<std::string>& hosts, int rank);
// The device rank `rank` (local rank `local`, on `host`, seeing `count` devices) uses:
// COMMSCRIPT_DEVICE when given (`env`, nullptr when unset), else local % count. InputError when
// env is not an index below count.
int choose_device(int local, int count, const char* env, const std::string& host, int rank);

// Where a buffer lives, as cudaPointerGetAttributes says.
struct BufferPlace {
  MemLocation where = MemLocation::host;
  int device = -1;
  bool managed = false;
};
// Refuses (UsageError naming the operation and the communicator) a buffer the NCCL backend
// cannot use: host or pinned memory, or the memory of another GPU than `device`. Only the
// buffers this rank touches are judged (a scatter's send buffer on the root only, a gather's
// and a reduce's receive buffer on the root only).
void check_nccl_buffers(const Op& op, int rank, int device, const std::string& comm_name, const BufferPlace& send,
                        const BufferPlace& recv);
ncclDataType_t nccl_dtype(DType t);
ncclRedOp_t nccl_redop(ReduceOp op);

}  // namespace cs
